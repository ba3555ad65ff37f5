"""A store's scheduled repush (`venice store update --repush-schedule --repush-ttl`): the `venice_repush__<store>`
DAG, on the plugin's `BusinessHoursTimetable` (the cron's times, or once a working day, inside the store's working
hours). The DAG file imports this module only to build such a DAG (TriggerDagRunOperator's import alone costs a
task process about 0.35 s). Two tasks:

- `check_version_age` decides (`controller.repush_config.scheduled_repush`): skipped (and the run with it) while the
  store's current version is younger than the threshold, or while a push is in flight; otherwise it returns the repush's
  run conf (`source=kafka`, a TTL repush for a hybrid store).
- `trigger_repush` triggers that run of the store's rollout DAG (`venice_push__<store>`), which rolls it out like
  any push: the hooks, region by region. It does not wait for it: the rollout DAG's run is where it is followed.
"""

from __future__ import annotations

from typing import Any

import pendulum
from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator
from airflow.sdk import DAG, task
from airflow.sdk.exceptions import AirflowSkipException

from venice_core.controller import repush_config
from venice_core.meta.context import metadata
from venice_core.rollout.names import SOURCE_KAFKA_PARAM, repush_dag_id, rollout_dag_id
from venice_core.schedules.repush import RepushSchedule
from venice_plugin.error_policy import airflow_errors
from venice_plugin.timetables import BusinessHoursTimetable

CHECK, TRIGGER = "check_version_age", "trigger_repush"


def check_version_age(store: str) -> dict[str, Any]:
    """The run conf of the repush to trigger; AirflowSkipException (with why) when none is due."""
    with metadata() as (_, meta):
        decision, confs = repush_config.scheduled_repush(meta, store)
    if not decision.due:
        raise AirflowSkipException(f"no repush of '{store}': {decision.reason}")
    print(f"repushing '{store}': {decision.reason}")
    return {"source": SOURCE_KAFKA_PARAM, "input": repush_config.REPUSH_INPUT, "conf": confs}


def build_repush_dag(store: str, schedule: RepushSchedule) -> DAG:
    with DAG(
        dag_id=repush_dag_id(store),
        description=f"Repush '{store}' when its current version is older than {schedule.ttl_seconds}s",
        schedule=BusinessHoursTimetable.of(schedule),
        start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
        catchup=False,
        max_active_runs=1,
        tags=["venice", "repush"],
        render_template_as_native_obj=True,  # the trigger's conf is the check's dict, not its text
    ) as dag:

        @task(task_id=CHECK)
        def check() -> dict[str, Any]:
            with airflow_errors():
                return check_version_age(store)

        check() >> TriggerDagRunOperator(
            task_id=TRIGGER,
            trigger_dag_id=rollout_dag_id(store),
            # A template the run renders to the check's dict (render_template_as_native_obj), not a dict yet.
            conf=f"{{{{ ti.xcom_pull(task_ids='{CHECK}') }}}}",  # type: ignore[arg-type]  # rendered to a dict
            wait_for_completion=False,
        )
    return dag
