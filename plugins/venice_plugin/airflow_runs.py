"""A store's DAG runs and their task instances, read from Airflow's own database (this runs inside Airflow's API
server, beside the routes that read it the same way). Airflow's modules are imported in the functions: every task
process loads the plugin folder, and only the API server calls these."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from venice_core.rollout.view import TaskRun


@dataclass(frozen=True)
class RunInfo:
    run_id: str
    state: str
    started: str  # ISO time, or "" before it starts
    conf: dict[str, Any] = field(default_factory=dict)  # the run's params (a repush's job id is prefixed)


def _iso(when: datetime | None) -> str:
    return when.isoformat(timespec="seconds") if when else ""


def _epoch(*candidates: datetime | None) -> float | None:
    known = [c.timestamp() for c in candidates if c is not None]
    return min(known) if known else None


def recent_runs(dag_id: str, limit: int = 20) -> list[RunInfo]:
    """The DAG's latest runs, newest first."""
    return _runs(dag_id, None, limit)


def find_run(dag_id: str, run_id: str) -> RunInfo | None:
    return next(iter(_runs(dag_id, run_id, 1)), None)


def _runs(dag_id: str, run_id: str | None, limit: int) -> list[RunInfo]:
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from sqlalchemy import select

    query = select(DagRun).where(DagRun.dag_id == dag_id)
    if run_id is not None:
        query = query.where(DagRun.run_id == run_id)
    with create_session() as session:
        runs = session.scalars(query.order_by(DagRun.run_after.desc(), DagRun.id.desc()).limit(limit))
        return [
            RunInfo(run.run_id, str(run.state or "none"), _iso(run.start_date), dict(run.conf or {})) for run in runs
        ]


def run_tasks(dag_id: str, run_id: str) -> list[TaskRun]:
    """The run's task instances: state, tries, the earliest start recorded (of an earlier try, a reschedule),
    upstream tasks (from the DAG version the run was created with), end."""
    from airflow.models.dagbag import DBDagBag
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.taskinstancehistory import TaskInstanceHistory
    from airflow.models.taskreschedule import TaskReschedule
    from airflow.utils.session import create_session
    from sqlalchemy import func, select

    with create_session() as session:
        run = session.scalars(select(DagRun).where(DagRun.dag_id == dag_id, DagRun.run_id == run_id)).first()
        if run is None:
            return []
        tis = list(
            session.scalars(
                select(TaskInstance).where(
                    TaskInstance.dag_id == dag_id, TaskInstance.run_id == run_id, TaskInstance.map_index == -1
                )
            )
        )
        first_poke = dict(
            session.execute(
                select(TaskReschedule.ti_id, func.min(TaskReschedule.start_date))
                .where(TaskReschedule.ti_id.in_([ti.id for ti in tis]))
                .group_by(TaskReschedule.ti_id)
            ).all()
        )
        h = TaskInstanceHistory
        first_try = dict(
            session.execute(
                select(h.task_id, func.min(h.start_date))
                .where(h.dag_id == dag_id, h.run_id == run_id, h.map_index == -1)
                .group_by(h.task_id)
            ).all()
        )
        dag: Any = DBDagBag().get_dag_for_run(run, session=session)
        upstream = {t.task_id: frozenset(t.upstream_task_ids) for t in dag.tasks} if dag is not None else {}
        return [
            TaskRun(
                ti.task_id,
                str(ti.state or "none"),
                ti.try_number or 0,
                _epoch(ti.start_date, first_poke.get(ti.id), first_try.get(ti.task_id)),
                upstream.get(ti.task_id, frozenset()),
                _epoch(ti.end_date),
            )
            for ti in tis
        ]
