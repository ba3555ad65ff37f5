"""Hook invocations persisted in the metadata store, and VIP-4's per class and function metrics computed from
them (so the counts survive the short-lived processes, such as Airflow tasks, that invoke hooks)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import func, select

from venice_core.hooks.api import HookContext
from venice_core.hooks.executor import HookInvocation, Outcome, Recorder, combine
from venice_core.meta import MetadataStore
from venice_core.meta.models import HookInvocationRecord
from venice_core.utils.metrics import render


def recorder(meta: MetadataStore, push_job_id: str | None = None) -> Recorder:
    def record(ctx: HookContext, invocation: HookInvocation) -> None:
        with meta.session() as session:
            session.add(
                HookInvocationRecord(
                    store_name=ctx.store,
                    version=ctx.version,
                    push_job_id=push_job_id,
                    hook_class=invocation.hook_class,
                    function=invocation.function,
                    region=invocation.region,
                    outcome=invocation.outcome,
                    reason=invocation.reason,
                    error=invocation.error,
                    timed_out=invocation.timed_out,
                    invalid_outcome=invocation.invalid_outcome,
                    queue_wait_seconds=invocation.queue_wait_seconds,
                    duration_seconds=invocation.duration_seconds,
                )
            )

    return record


def first_asked_at(meta: MetadataStore, push_job_id: str, function: str, region: str | None) -> float | None:
    """When this push first asked `function` (in `region`): the start of a WAIT streak, since any other answer
    ends the step. Read from the persisted invocations, so a sensor's maximum wait survives task restarts."""
    r = HookInvocationRecord
    query = select(func.min(r.created_at)).where(r.push_job_id == push_job_id, r.function == function)
    query = query.where(r.region.is_(None) if region is None else r.region == region)
    with meta.session() as session:
        return session.execute(query).scalar()


def settled_answers(meta: MetadataStore, push_job_id: str, function: str) -> dict[str | None, tuple[Outcome, str]]:
    """Each region's settled answer at `function` in this push: the latest answers of the hooks there, combined as
    one invocation's are, with their reasons, unless that is WAIT (a region still waiting, or never asked, is
    absent). A step asking several regions at each poke asks only the unsettled ones again."""
    by_region: dict[str | None, list[HookInvocationRecord]] = {}
    for record in _latest(meta, push_job_id):
        if record.function == function:
            by_region.setdefault(record.region, []).append(record)
    settled: dict[str | None, tuple[Outcome, str]] = {}
    for region, answers in by_region.items():
        outcome = combine([Outcome(a.outcome) for a in answers if a.outcome])
        if outcome is not Outcome.WAIT:
            reasons = [a.error or a.reason for a in answers if a.outcome == outcome and (a.error or a.reason)]
            settled[region] = (outcome, "; ".join(reasons))
    return settled


def invocations(meta: MetadataStore, push_job_id: str, after_id: int = 0) -> list[HookInvocationRecord]:
    """A push's invocations recorded after `after_id`, oldest first (to follow a rollout as it goes)."""
    r = HookInvocationRecord
    query = select(r).where(r.push_job_id == push_job_id, r.id > after_id).order_by(r.id)
    with meta.session() as session:
        return list(session.scalars(query))


def _latest(meta: MetadataStore, push_job_id: str) -> list[HookInvocationRecord]:
    """Each hook's latest invocation at each function (and region) of a push, in the order they were first asked."""
    latest: dict[tuple[str, str, str | None], HookInvocationRecord] = {}
    for record in invocations(meta, push_job_id):
        latest[(record.hook_class, record.function, record.region)] = record
    return list(latest.values())


def latest_answers(meta: MetadataStore, push_job_id: str) -> list[dict[str, object]]:
    """Each hook's latest answer at each function (and region) of a push, in the order they were first asked: what
    VIP-4's `/job` reply shows of the hooks."""
    return [
        {
            "hook": r.hook_class,
            "function": r.function,
            "region": r.region,
            "outcome": r.outcome,
            "reason": r.error or r.reason,
            "at": r.created_at,
        }
        for r in _latest(meta, push_job_id)
    ]


def is_notable(record: HookInvocationRecord) -> bool:
    """An answer worth showing a person following a rollout: anything but PROCEED, or a hook's failure."""
    return record.outcome not in (None, Outcome.PROCEED) or record.error is not None


def describe(record: HookInvocationRecord) -> str:
    """`AnswerFromConfig answered WAIT at pre_store_version_swap in dc-1`."""
    where = f" in {record.region}" if record.region else ""
    return f"{record.hook_class.rsplit('.', 1)[-1]} answered {record.outcome} at {record.function}{where}"


def metrics_text(meta: MetadataStore) -> str:
    """Prometheus text: invocations, outcomes, failures, invalid outcomes, timeouts and queue wait, per hook class and
    function."""
    r = HookInvocationRecord
    keys = (r.hook_class, r.function)
    with meta.session() as session:
        totals = session.execute(
            select(*keys, func.count(), func.sum(r.queue_wait_seconds), func.sum(r.duration_seconds)).group_by(*keys)
        ).all()
        outcomes = session.execute(
            select(*keys, r.outcome, func.count()).where(r.outcome.is_not(None)).group_by(*keys, r.outcome)
        ).all()
        failures = session.execute(
            select(*keys, func.count())
            .where(r.error.is_not(None), r.timed_out.is_(False), r.invalid_outcome.is_(None))
            .group_by(*keys)
        ).all()
        invalid = session.execute(
            select(*keys, func.count()).where(r.invalid_outcome.is_not(None)).group_by(*keys)
        ).all()
        timeouts = session.execute(select(*keys, func.count()).where(r.timed_out.is_(True)).group_by(*keys)).all()

    def labels(row: Sequence[Any]) -> dict[str, str]:
        return {"hook_class": row[0], "function": row[1]}

    lines = render("venice_hook_invocations_total", "counter", "Hook invocations.", [(labels(t), t[2]) for t in totals])
    lines += render(
        "venice_hook_outcomes_total",
        "counter",
        "Hook answers by outcome.",
        [({**labels(o), "outcome": str(o[2])}, o[3]) for o in outcomes],
    )
    lines += render(
        "venice_hook_failures_total",
        "counter",
        "Hook calls that raised or returned something that is not an outcome.",
        [(labels(f), f[2]) for f in failures],
    )
    lines += render(
        "venice_hook_invalid_outcomes_total",
        "counter",
        "Hook calls that returned an outcome their function may not return (a failure under the failure policy).",
        [(labels(i), i[2]) for i in invalid],
    )
    lines += render(
        "venice_hook_timeouts_total", "counter", "Hook calls that timed out.", [(labels(t), t[2]) for t in timeouts]
    )
    lines += render(
        "venice_hook_queue_wait_seconds_sum",
        "counter",
        "Time hook calls waited for a thread.",
        [(labels(t), t[3] or 0.0) for t in totals],
    )
    lines += render(
        "venice_hook_queue_wait_seconds_count",
        "counter",
        "Hook calls that waited for a thread.",
        [(labels(t), t[2]) for t in totals],
    )
    lines += render(
        "venice_hook_duration_seconds_sum",
        "counter",
        "Time spent in hook calls.",
        [(labels(t), t[4] or 0.0) for t in totals],
    )
    return "\n".join(lines) + "\n"
