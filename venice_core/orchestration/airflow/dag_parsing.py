"""The one wait for Airflow to serve DAGs as their files now are: for a push, the store's DAG; for a drain, the
pipeline's; after a store changes, each rewritten file's. Each file's parse is asked for (the nudge) and asked again
every so often: Airflow drops a request for a file it is parsing, and finds a new file only at its dag-processor's
next look at the folder."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from venice_core.utils.waiting import SYSTEM_CLOCK, Clock, Nudge, poll_until


def wait_until_parsed(
    dags: Mapping[str, Callable[[], bool]],
    ask: Callable[[list[str]], None],
    *,
    timeout: float,
    ask_every: float,
    interval: float,
    timeout_error: Callable[[list[str]], Exception],
    slow: tuple[float, Callable[[list[str]], None]] | None = None,
    clock: Clock = SYSTEM_CLOCK,
) -> None:
    """Until each DAG of `dags` (its id, and whether Airflow serves it as its file now is) is served. Nothing is
    asked when every one already is; else `ask(pending)` for the DAGs not yet served, now and every `ask_every`
    seconds, and `timeout_error(pending)` raised past `timeout`. `slow`: after so many seconds, said once (what the
    caller waits for)."""
    pending = [dag for dag, served in dags.items() if not served()]
    if not pending:
        return
    said_at = None if slow is None else clock.monotonic() + slow[0]

    def all_served() -> bool:
        nonlocal said_at
        pending[:] = [dag for dag in pending if not dags[dag]()]
        if pending and slow is not None and said_at is not None and clock.monotonic() > said_at:
            slow[1](list(pending))
            said_at = None
        return not pending

    poll_until(
        all_served,
        timeout=timeout,
        interval=interval,
        nudge=Nudge(lambda: ask(list(pending)), ask_every),
        timeout_error=lambda _: timeout_error(list(pending)),
        clock=clock,
    )
