"""A DAG run of the platform's, triggered and followed until it ends (`venice push` and `repush` through
`pushes`, `venice stream drain` and `upgrade` through `streams`): `RunFollower` shows what happened in a
`FollowView` (state changes and the hooks' non-PROCEED answers in the order they happened, skipped steps counted on
one line, each region's ingestion progress), `follow` rides out an Airflow restart, and what an operator did by hand
is said as such (a run deleted, a DAG paused)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from venice_core.controller import versions
from venice_core.controller.versions import RegionProgress
from venice_core.errors import ComponentError, VeniceError
from venice_core.hooks.records import describe, invocations, is_notable
from venice_core.meta import MetadataStore
from venice_core.orchestration.airflow.api import AirflowApi, AirflowRefused, AirflowUnreachable
from venice_core.orchestration.airflow.dag_parsing import wait_until_parsed
from venice_core.rollout.airflow_states import ENDED, QUIET, SKIPPED, STARTED, TERMINAL
from venice_core.rollout.airflow_states import AirflowState as S
from venice_core.rollout.names import (
    ENDED_IN_AIRFLOW,
    FAILURE_XCOM,
    push_job_id,
    region_of,
    rollout_dag_id,
)
from venice_core.utils.waiting import poll_until

DAG_APPEAR_TIMEOUT_SECONDS = 120
UNREACHABLE_TIMEOUT_SECONDS = 600
# A poll reads the run and its ~80 task instances from Airflow's API: ~60 ms of the API server's CPU each, so a
# follower polling every second kept 6% of a core busy on the server alone.
FOLLOW_POLL_SECONDS = 2.0
# A paused DAG is asked about at most this often: its read costs the API server about as much CPU as the run's, and
# an operator's pause is news within seconds either way.
PAUSED_CHECK_SECONDS = 10.0


class RolloutFailed(VeniceError):
    exit_code = 3


class DagPaused(VeniceError):
    """The store's DAG is paused in Airflow: a run would wait, unseen, until someone unpauses it."""

    http_status = 409


class RunDeleted(RolloutFailed):
    """An operator deleted the followed run in Airflow."""

    def __init__(self, message: str, run_id: str, job_id: str) -> None:
        super().__init__(message)
        self.run_id, self.job_id = run_id, job_id


PARSE_PATIENCE_SECONDS = 10  # a DAG asked for and not there yet after this long: say what the push waits for


def unpause_hint(dag: str) -> str:
    return f"unpause it (the Airflow UI's toggle, or `venice airflow dags unpause {dag}`)"


def wait_for_dag(dag: str, ready: Callable[[], bool], nudge: Callable[[], None], view: FollowView, hint: str) -> None:
    """Until Airflow has the DAG as its file now is (`ready`), nudging its dag-processor (`nudge`: the file's parse
    asked for) now, and again every few seconds: a request that arrives while the file is being parsed is dropped,
    and a new file is found only at the dag-processor's next look at its folder."""
    wait_until_parsed(
        {dag: ready},
        lambda _pending: nudge(),
        timeout=DAG_APPEAR_TIMEOUT_SECONDS,
        ask_every=PARSE_PATIENCE_SECONDS,
        interval=1.0,
        timeout_error=lambda _pending: ComponentError(
            f"Airflow has no DAG {dag} ({hint} the dag-processor picks it up)"
        ),
        slow=(
            PARSE_PATIENCE_SECONDS,
            lambda _pending: view.line(f"waiting for Airflow's dag-processor to pick up {dag}"),
        ),
    )


def trigger_and_follow(
    api: AirflowApi,
    meta: MetadataStore,
    store: str,
    dag: str,
    params: dict[str, Any],
    view: FollowView,
    timeout: float,
    *,
    failed: Callable[[RunFollower], Exception],
    timed_out: Callable[[str], Exception],
    queued_behind: str | None = None,
    job_id: Callable[[str], str] | None = None,
) -> str:
    """Trigger a run of `dag` with `params` and follow it to its end (`follow`); its run id once it succeeded. A
    failed run raises `failed(its follower)`, one still running at the timeout `timed_out(its run id)`. A run
    `queued_behind` another (in flight) says so, and when it starts; `job_id`: the run's push job, by its run id."""
    run_id = api.trigger(dag, params)
    view.line(f"triggered {dag} run {run_id}")
    if queued_behind is not None:
        view.line(f"queued behind run {queued_behind}; following it when it starts")
    follower = RunFollower(
        api,
        meta,
        store,
        run_id,
        view,
        queued=queued_behind is not None,
        job_id=job_id(run_id) if job_id else None,
        dag=dag,
    )
    state = follow(follower, view, timeout)
    if state == S.SUCCESS:
        return run_id
    if state == S.FAILED:
        raise failed(follower)
    raise timed_out(run_id)


def follow(follower: RunFollower, view: FollowView, timeout: float) -> str:
    """Poll a run until it succeeds or fails (its state), riding out an Airflow restart, and a restart of a database
    server (Airflow's: its API answers 5xx meanwhile; the metadata store's); `running` at the timeout."""
    from sqlalchemy.exc import OperationalError

    unreachable_since: float | None = None

    def ended() -> str | None:
        nonlocal unreachable_since
        try:
            state = follower.poll()
        except (AirflowUnreachable, AirflowRefused, OperationalError) as exc:  # the run goes on when it is back
            if isinstance(exc, AirflowRefused) and exc.status < 500:
                raise
            if unreachable_since is None:
                unreachable_since = time.monotonic()
                view.line(f"  {_outage(exc)}; still following the run")
            if time.monotonic() - unreachable_since > UNREACHABLE_TIMEOUT_SECONDS:
                raise
            return None
        unreachable_since = None
        return state if state in ENDED else None

    # (An outage is polled again as often as a run: both every 2 s.)
    return poll_until(ended, timeout=timeout, interval=FOLLOW_POLL_SECONDS) or S.RUNNING


def _outage(exc: Exception) -> str:
    """What a follower cannot reach for now."""
    if isinstance(exc, AirflowUnreachable):
        return f"Airflow at {exc.url} is unreachable ({exc.why})"
    if isinstance(exc, AirflowRefused):
        return f"Airflow answered {exc.status} (its database restarting?)"
    cause = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    return f"the metadata store is unreachable ({cause[0] if cause else type(exc).__name__})"


class FollowView(Protocol):
    """Where a followed run is shown: `line` for what happened (kept, in order), `steps` and `progress` for what
    is going on now (a live display redraws them; plain output prints progress at milestones)."""

    def line(self, text: str) -> None: ...

    def steps(self, active: dict[str, str], skipped: int) -> None: ...

    def progress(self, regions: dict[str, RegionProgress]) -> None: ...


class PlainView:
    """Plain lines (not a terminal: logs, CI, tests). Ingestion progress is printed as each region passes a tenth
    of its records, so a long push shows it is moving without a line per poll."""

    def __init__(self, echo: Callable[[str], None] = print) -> None:
        self.echo = echo
        self.shown: dict[str, int] = {}

    def line(self, text: str) -> None:
        self.echo(text)

    def steps(self, active: dict[str, str], skipped: int) -> None:
        pass

    def progress(self, regions: dict[str, RegionProgress]) -> None:
        for region, p in regions.items():
            if p.percent is None:
                continue
            tenth = int(p.percent // 10)
            if self.shown.get(region) != tenth:
                self.shown[region] = tenth
                self.echo(f"  {region} ingestion: {describe_progress(p)}")


def describe_progress(p: RegionProgress) -> str:
    """`1,234 of 20,000 records (6%)`; before END_OF_PUSH's counts are known, the records alone. A replicated
    region adds its ready replicas: `, 5 of 8 replicas ready`."""
    text = f"{p.records:,} records" if p.total is None else f"{p.records:,} of {p.total:,} records ({p.percent:.0f}%)"
    return text + (f", {p.replicas_ready} of {p.replicas} replicas ready" if p.replicas else "")


@dataclass(frozen=True)
class Event:
    at: float  # seconds since the epoch
    text: str


def _timestamp(value: str | None) -> float | None:
    return datetime.fromisoformat(value).timestamp() if value else None


class RunFollower:
    """Follows one DAG run, whatever its task ids: each step's state changes and the hooks' non-PROCEED answers
    in the order they happened (by the task instances' start and end times, not as a poll happens to list them);
    skipped and upstream-failed steps counted, not listed; each region's ingestion progress."""

    def __init__(
        self,
        api: AirflowApi,
        meta: MetadataStore,
        store: str,
        run_id: str,
        view: FollowView,
        queued: bool = False,
        job_id: str | None = None,
        dag: str | None = None,
    ) -> None:
        self.api, self.meta, self.store, self.run_id, self.view = api, meta, store, run_id, view
        self.dag = dag or rollout_dag_id(store)  # another DAG of the store's (a pipeline's upgrade) shows no push
        self.job_id = job_id or push_job_id(store, run_id)  # the run's push job (a repush run's is prefixed)
        self.queued = queued  # behind another run: say when it starts
        self.seen: dict[str, str] = {}
        self.waiting: set[str] = set()  # sensors already shown waiting: their later pokes are not news
        self.skipped: set[str] = set()
        self.last_invocation = 0
        self.version: int | None = None
        self.ingested = False
        self.paused_checked_at: float | None = None  # monotonic

    def poll(self) -> str:
        """One look at the run: what changed since the last, shown; its state. An operator's hand is said as such:
        the run deleted (`RunDeleted`), its DAG paused (`DagPaused`)."""
        try:
            return self._poll()
        except AirflowRefused as exc:
            if exc.status == 404 and not self._run_exists():  # deleted between two calls, or before the first
                raise RunDeleted(
                    f"rollout run {self.run_id} was deleted {ENDED_IN_AIRFLOW}", self.run_id, self.job_id
                ) from None
            raise

    def _run_exists(self) -> bool:
        try:
            self.api.run_state(self.dag, self.run_id)
        except AirflowRefused as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def _poll(self) -> str:
        # The run's state first: a run seen finished has its task instances final in the call after.
        state = self.api.run_state(self.dag, self.run_id)
        if self.queued and state != S.QUEUED:
            self.queued = False
            self.view.line(f"run {self.run_id} started")
        task_instances = self.api.task_instances(self.dag, self.run_id)
        hook_events = self._hook_events()  # read before any step is taken as seen: a failed read loses no line
        step_events = self._step_events(task_instances)
        active = {t: s for t, s in self.seen.items() if s not in TERMINAL}
        self.view.steps(active, len(self.skipped))
        for event in sorted(step_events + hook_events, key=lambda e: e.at):  # stable: a poll's order breaks ties
            self.view.line(event.text)
        # A paused DAG stops the run's steps moving, so it is asked only after a poll in which no step moved, and at
        # most every PAUSED_CHECK_SECONDS.
        if state in (S.QUEUED, S.RUNNING) and not step_events and self._pause_check_due() and self._paused():
            holding = sorted(t for t, s in self.seen.items() if s not in TERMINAL)
            at = f" at {', '.join(holding)}" if holding else ""
            raise DagPaused(
                f"the DAG {self.dag} was paused in Airflow: run {self.run_id} holds{at} until it is unpaused; "
                f"{unpause_hint(self.dag)}"
            )
        self._progress()
        if state in ENDED and self.skipped:
            self.view.line(f"  {steps_not_taken(len(self.skipped), state)}")
        return state

    def _pause_check_due(self) -> bool:
        return self.paused_checked_at is None or time.monotonic() - self.paused_checked_at >= PAUSED_CHECK_SECONDS

    def _paused(self) -> bool:
        self.paused_checked_at = time.monotonic()
        return self.api.dag_paused(self.dag)

    def _step_events(self, task_instances: list[dict[str, Any]]) -> list[Event]:
        now = time.time()
        events = []
        for ti in task_instances:
            task_id, state = ti["task_id"], ti["state"] or S.NONE
            if self.seen.get(task_id) == state or state in QUIET:
                continue
            self.seen[task_id] = state
            if state in SKIPPED:
                self.skipped.add(task_id)
                continue
            self.skipped.discard(task_id)  # cleared and run again
            if state not in (S.RUNNING, S.UP_FOR_RESCHEDULE):
                self.waiting.discard(task_id)
            elif task_id in self.waiting:
                continue  # another poke of a sensor already shown waiting
            elif state == S.UP_FOR_RESCHEDULE:
                self.waiting.add(task_id)
            dated = ti.get("start_date") if state in STARTED else ti.get("end_date") or ti.get("start_date")
            at = _timestamp(dated) or now
            tries = ti.get("try_number") or 1
            text = f"  {task_id}: {state}" + (f" (try {tries})" if state == S.RUNNING and tries > 1 else "")
            events.append(Event(at, text))
            if state == S.AWAITING_INPUT:
                region = region_of(task_id)
                events.append(
                    Event(
                        at,
                        f"    approve or reject in the Airflow UI (Required Actions), or with "
                        f"`venice rollout approve {self.store} --region {region} [--reject]`",
                    )
                )
        return events

    def _hook_events(self) -> list[Event]:
        events = []
        for record in invocations(self.meta, self.job_id, self.last_invocation):
            self.last_invocation = record.id
            if is_notable(record):
                detail = record.error or record.reason
                events.append(Event(record.created_at, f"    {describe(record)}" + (f": {detail}" if detail else "")))
        return events

    def _progress(self) -> None:
        """Each region's records ingested, from the version's creation until every region has them all."""
        if self.ingested:
            return
        if self.version is None:
            created = versions.version_of_push(self.meta, self.store, self.job_id)
            if created is None:
                return
            self.version = created.number
        try:
            regions = versions.ingestion_progress(self.meta, self.store, self.version)
        except VeniceError:  # the version is gone (a store deleted under the run): nothing to show
            return
        self.view.progress(regions)
        self.ingested = bool(regions) and all(p.percent == 100.0 for p in regions.values())

    def failed_tasks(self) -> list[str]:
        return [t for t, s in self.seen.items() if s == S.FAILED]

    def failures(self) -> dict[str, str | None]:
        """Each failed task and why, as its step kept it (`failure_reasons`)."""
        return failure_reasons(self.api, self.dag, self.run_id, self.failed_tasks())


def steps_not_taken(count: int, run_state: str) -> str:
    """The one line that stands for a run's skipped and upstream-failed steps: after a failure, the steps it left
    unrun; otherwise the ways not taken (the stops, regions left out)."""
    steps = f"{count} {'later ' * (run_state == S.FAILED)}step{'s' * (count != 1)}"
    return f"{steps} skipped" if run_state == S.FAILED else f"{steps} not taken (stops, regions left out)"


def failure_reasons(api: AirflowApi, dag: str, run_id: str, tasks: list[str]) -> dict[str, str | None]:
    """Each of a run's failed `tasks` and the reason its step kept as its XCom `failure` (None: it kept none, such
    as a task that failed outside the platform's code). Airflow unreachable: no reasons, the tasks still named."""
    reasons: dict[str, str | None] = {}
    for task in tasks:
        try:
            value = api.xcom(dag, run_id, task, FAILURE_XCOM)
        except ComponentError:
            value = None
        reasons[task] = None if value is None else str(value)
    return reasons
