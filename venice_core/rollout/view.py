"""The rollout page's read model: one store's rollout run as the Airflow UI page shows it. Regions and versions,
hook answers and ingestion progress come from the metadata store; the run's task instances are given by the caller
(the plugin reads them from Airflow), so this module imports no Airflow.

The region x step matrix is built from the run's task ids (`<region group>.<step>`, top-level steps without a
group), not from a list of steps: the DAG's shape may change without this module knowing. A hook answer is placed
on the task that was running when it was recorded: of the region's tasks and the top-level ones, the one that
opened last before it. The DAG runs its steps one after another, so that is the task that asked. A task opens
when its upstream tasks have all ended (or when Airflow saw it start, if earlier): Airflow keeps no record of
when a rescheduled sensor's first poke started.
"""

from __future__ import annotations

import heapq
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select

from venice_core.controller.stores import get_store
from venice_core.controller.versions import RegionProgress, ingestion_progress
from venice_core.hooks.executor import Outcome
from venice_core.hooks.records import invocations
from venice_core.meta import MetadataStore
from venice_core.meta.models import HookInvocationRecord, RegionCurrentVersion, Version
from venice_core.model.status import VersionStatus
from venice_core.rollout.airflow_states import ENDED, NEVER_RAN, NOT_RUN, AirflowState
from venice_core.rollout.names import push_job_id, region_group

DECISIONS = ("abort", "rollback")  # a task named with one of these applies a hook's decision (a branch's target)


def decision(step: str) -> str | None:
    """ABORT or ROLLBACK for a task that applies one (`abort`, `pre_swap_abort`, `pre_swap.rollback`), else None."""
    words = set(re.split(r"[._]", step))
    return next((d.upper() for d in DECISIONS if d in words), None)


@dataclass(frozen=True)
class TaskRun:
    """One task instance of the run, as Airflow reports it."""

    task_id: str
    state: str  # Airflow's state, "none" before it has one
    tries: int = 0
    started_at: float | None = None  # the earliest start Airflow recorded for it, epoch seconds
    upstream: frozenset[str] = frozenset()  # upstream task ids, for the DAG's order
    ended_at: float | None = None


@dataclass(frozen=True)
class Answer:
    """Consecutive identical answers of one hook at one function, collapsed (`count` of them)."""

    hook: str  # class name, without its module
    function: str
    region: str | None
    outcome: str | None  # None for the informational functions (post_*), which answer nothing
    detail: str  # the hook's reason, or its error
    count: int = 1

    @property
    def notable(self) -> bool:
        """Worth a line of its own: anything but PROCEED or an informational call, or a reason or error."""
        return self.outcome not in (None, Outcome.PROCEED) or bool(self.detail)


@dataclass(frozen=True)
class Step:
    name: str  # within its region group (or the task id, at the top level)
    task_id: str
    state: str
    tries: int
    answers: tuple[Answer, ...] = ()
    started_at: float | None = None  # the earliest start of any try or reschedule, epoch seconds
    ended_at: float | None = None  # the last try's end (a rescheduled sensor's: its last poke's)

    def elapsed(self, now: float) -> tuple[float, bool] | None:
        """How long the step took, and whether it is still going (then the time so far: a sensor between pokes, a
        try waiting for its retry); None for a step that never started."""
        if self.started_at is None or self.state in NEVER_RAN:
            return None
        if self.state in ENDED:
            return (self.ended_at - self.started_at, False) if self.ended_at is not None else None
        return now - self.started_at, True


@dataclass(frozen=True)
class Stop:
    """Where the rollout stopped, in a region: the decision (ABORT, ROLLBACK, or FAILED for a step that failed on
    its own), at which step, and why."""

    decision: str
    step: str
    reason: str


@dataclass(frozen=True)
class RegionRow:
    region: str
    current: int  # the version it serves (0: none)
    backup: int  # the version it keeps for a rollback (0: none)
    steps: dict[str, Step]  # by step name
    progress: RegionProgress | None  # ingestion of the run's version
    stop: Stop | None


@dataclass(frozen=True)
class VersionInfo:
    number: int
    status: VersionStatus
    reason: str


@dataclass(frozen=True)
class RolloutView:
    store: str
    run_id: str | None
    run_state: str | None
    version: VersionInfo | None  # the version the run's push created, if it got that far
    job_steps: tuple[Step, ...]  # the top-level steps, in the DAG's order
    columns: tuple[str, ...]  # the region steps, in the DAG's order
    regions: tuple[RegionRow, ...]  # in the store's rollout order
    unplaced: tuple[Answer, ...] = field(default=())  # answers recorded when no task of theirs had started


def rollout_view(
    meta: MetadataStore,
    store: str,
    run_id: str | None = None,
    run_state: str | None = None,
    tasks: Sequence[TaskRun] = (),
    run_conf: Mapping[str, Any] | None = None,
) -> RolloutView:
    """The page of `store` for one run (`run_id` None: the store alone, before any run; `run_conf`: its params)."""
    with meta.session() as session:
        order = list(get_store(session, store).rollout_order)
        serving = {
            row.region: (row.current_version, row.backup_version)
            for row in session.scalars(select(RegionCurrentVersion).where(RegionCurrentVersion.store_name == store))
        }
        job_id = push_job_id(store, run_id, run_conf) if run_id else None
        version = (
            session.scalars(select(Version).where(Version.store_name == store, Version.push_job_id == job_id)).first()
            if job_id
            else None
        )
        info = (
            None
            if version is None
            else VersionInfo(version.number, VersionStatus(version.status), version.lifecycle.reason)
        )
    progress = ingestion_progress(meta, store, info.number) if info else {}
    records = invocations(meta, job_id) if job_id else []

    ordered = dag_order(tasks)
    groups = {region_group(r): r for r in order}
    placed, unplaced = _place_answers(records, ordered, groups)
    job_steps: list[Step] = []
    by_region: dict[str, list[Step]] = {r: [] for r in order}
    for task in ordered:
        group, _, name = task.task_id.partition(".")
        answers = tuple(placed.get(task.task_id, ()))
        step = Step(name or group, task.task_id, task.state, task.tries, answers, task.started_at, task.ended_at)
        if name and group in groups:
            by_region[groups[group]].append(step)
        else:
            job_steps.append(step)
    rows = tuple(
        RegionRow(
            region,
            *serving.get(region, (0, 0)),
            steps={s.name: s for s in by_region[region]},
            progress=progress.get(region),
            stop=_stop(by_region[region], info),
        )
        for region in order
    )
    return RolloutView(
        store,
        run_id,
        run_state,
        info,
        tuple(job_steps),
        _columns([[s.name for s in by_region[r]] for r in order], _skipped_everywhere(rows)),
        rows,
        tuple(unplaced),
    )


def dag_order(tasks: Sequence[TaskRun]) -> list[TaskRun]:
    """Tasks in a topological order of the DAG; among tasks free to go, the one started first (then by id)."""
    by_id = {t.task_id: t for t in tasks}
    rank = {t.task_id: (t.started_at if t.started_at is not None else math.inf, t.task_id) for t in tasks}
    waiting = {t.task_id: set(t.upstream) & by_id.keys() for t in tasks}
    ready = [(rank[i], i) for i, ups in waiting.items() if not ups]
    heapq.heapify(ready)
    ordered: list[TaskRun] = []
    while ready:
        _, task_id = heapq.heappop(ready)
        ordered.append(by_id[task_id])
        for other, ups in waiting.items():
            if task_id in ups:
                ups.discard(task_id)
                if not ups:
                    heapq.heappush(ready, (rank[other], other))
    done = {t.task_id for t in ordered}
    return ordered + sorted((t for t in tasks if t.task_id not in done), key=lambda t: rank[t.task_id])  # cycles


def _columns(region_steps: list[list[str]], hidden: set[str]) -> tuple[str, ...]:
    """One column per step name, in each region's order: a step only some regions have goes after the step that
    precedes it there. Steps in `hidden` are left out."""
    columns: list[str] = []
    for steps in region_steps:
        previous: str | None = None
        for name in steps:
            if name not in columns:
                columns.insert(columns.index(previous) + 1 if previous else 0, name)
            previous = name
    return tuple(c for c in columns if c not in hidden)


def _skipped_everywhere(rows: tuple[RegionRow, ...]) -> set[str]:
    """Steps skipped in every region that has them: a branch no region took (an `abort` task that did not run)."""
    states: dict[str, set[str]] = {}
    for row in rows:
        for name, step in row.steps.items():
            states.setdefault(name, set()).add(step.state)
    return {name for name, seen in states.items() if seen == {AirflowState.SKIPPED}}


def _place_answers(
    records: list[HookInvocationRecord], tasks: list[TaskRun], groups: dict[str, str]
) -> tuple[dict[str, list[Answer]], list[Answer]]:
    """Each answer on the task that was running when it was recorded (see the module's docstring), consecutive
    identical answers collapsed."""
    started = sorted(_opened(tasks))
    placed: dict[str, list[Answer]] = {}
    unplaced: list[Answer] = []
    for record in records:
        owner = _owner(region_group(record.region) if record.region else None, record.created_at, started, groups)
        _append(placed.setdefault(owner, []) if owner else unplaced, record)
    return placed, unplaced


def _opened(tasks: list[TaskRun]) -> list[tuple[float, str]]:
    """When each task that ran opened: its upstream tasks' last end, or its recorded start if earlier."""
    ended = {t.task_id: t.ended_at for t in tasks}
    opened = []
    for task in tasks:
        if task.state in NOT_RUN:
            continue  # it asked no hook
        known = [task.started_at] if task.started_at is not None else []
        ends = [ended.get(u) for u in task.upstream]
        if ends and all(end is not None for end in ends):
            known.append(max(end for end in ends if end is not None))
        if known:
            opened.append((min(known), task.task_id))
    return opened


def _owner(group: str | None, at: float, opened: list[tuple[float, str]], groups: dict[str, str]) -> str | None:
    """The task that opened last before `at` among the top-level ones and those of `group` (of any group, for an
    answer without a region)."""
    for opened_at, task_id in reversed(opened):
        prefix, _, name = task_id.partition(".")
        if opened_at <= at and (not name or prefix not in groups or group in (None, prefix)):
            return task_id
    return None


def _append(answers: list[Answer], record: HookInvocationRecord) -> None:
    hook = record.hook_class.rsplit(".", 1)[-1]
    answer = Answer(hook, record.function, record.region, record.outcome, record.error or record.reason)
    for i in range(len(answers) - 1, -1, -1):  # the same hook's previous answer at the same function
        last = answers[i]
        if (last.hook, last.function, last.region) == (answer.hook, answer.function, answer.region):
            if (last.outcome, last.detail) == (answer.outcome, answer.detail):
                answers[i] = Answer(last.hook, last.function, last.region, last.outcome, last.detail, last.count + 1)
                return
            break
    answers.append(answer)


def _stop(steps: list[Step], version: VersionInfo | None) -> Stop | None:
    """The rollout stopped in this region if one of its steps failed, or one of its decision tasks ran."""
    step = next(
        (s for s in steps if s.state == AirflowState.FAILED or (decision(s.name) and s.state not in NOT_RUN)), None
    )
    if step is None:
        return None
    reason = version.reason if version else ""
    decided = [a for a in step.answers if a.outcome in (Outcome.ABORT, Outcome.ROLLBACK)]
    named = decision(step.name)
    at = step.name
    if named:  # `pre_swap_abort`: the decision of `pre_swap`
        what, at = named, step.name.removesuffix(f"_{named.lower()}")
    elif decided:
        what, reason = decided[-1].outcome or "", reason or decided[-1].detail
    elif version is not None and version.status == VersionStatus.ROLLED_BACK:
        what = Outcome.ROLLBACK
    elif Outcome.WAIT in {(a.hook, a.function, a.region): a.outcome for a in step.answers}.values():
        what = Outcome.ABORT  # a hook's last answer was WAIT: still WAIT past the maximum wait, an explicit ABORT
    else:
        what = "FAILED"
    return Stop(what, at, reason)
