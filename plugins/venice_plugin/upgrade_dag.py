"""A streaming pipeline's drain and upgrade: the `venice_upgrade__<pipeline>` DAG, run by `venice stream drain` and
`venice stream upgrade` (or from the UI). Its tasks are `streams.upgrade`'s steps:

- `drain` writes a drain notification for the pipeline's current run;
- `wait_drained`, a sensor, until the run has stopped cleanly or its drain failed (the timeout passed);
- `drain_outcome` branches: to `alert` after a failed drain (it fails the run; no new run is started), else to
  `start_new_run` for an upgrade, or to `drained` for a drain alone;
- `start_new_run`: the new deployment with the run's `args` (the new job's arguments) over what the pipeline last
  ran with: a new run id, fresh state, from exactly the offsets the drained run reached;
- `wait_consuming`, a sensor, until the new run's query runs.

The sensors poke (a drain takes seconds); failures are not retried: each step says why it failed (a VeniceError
as `venice_plugin.error_policy` maps it).
"""

from __future__ import annotations

from typing import Any, cast

import pendulum
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG, PokeReturnValue, task
from airflow.sdk.exceptions import AirflowFailException

from venice_core.controller import streams
from venice_core.meta.context import metadata
from venice_core.rollout.names import upgrade_dag_id
from venice_core.streams import upgrade
from venice_plugin.error_policy import airflow_errors
from venice_plugin.form_params import form_param

DRAIN, WAIT_DRAINED, OUTCOME, ALERT, DRAINED = "drain", "wait_drained", "drain_outcome", "alert", "drained"
START, WAIT_CONSUMING = "start_new_run", "wait_consuming"
POKE_SECONDS = 2.0
# A backstop over the drain's own timeout (the job stops itself past it) and a spark-submit's start.
SENSOR_TIMEOUT_SECONDS = 900


def next_after_drain(outcome: str, upgrade: bool) -> str:
    """The branch after the drain: a failed drain alerts and starts nothing."""
    if outcome != streams.DRAINED:
        return ALERT
    return START if upgrade else DRAINED


def build_upgrade_dag(pipeline: str) -> DAG:
    with DAG(
        dag_id=upgrade_dag_id(pipeline),
        description=f"Drain stream pipeline '{pipeline}', then (an upgrade) start its new deployment",
        schedule=None,
        start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
        catchup=False,
        max_active_runs=1,
        tags=["venice", "stream"],
        params={
            "upgrade": form_param(False, type="boolean", description="start a new run after the drain"),
            "args": form_param({}, type="object", description="the new job's arguments (transform, confs, ...)"),
            "drain_timeout_seconds": form_param(
                None, type=["number", "null"], description="how long the drain may take (default: the job's)"
            ),
        },
    ) as dag:

        @task(task_id=DRAIN)
        def request(**context: Any) -> str:
            with metadata() as (config, meta), airflow_errors():
                timeout = context["params"].get("drain_timeout_seconds")
                requested = upgrade.request_drain(config, meta, pipeline, timeout)
            print(f"drain of {pipeline} requested: run {requested.run_id}, notification {requested.uuid}")
            return requested.run_id

        @task.sensor(task_id=WAIT_DRAINED, poke_interval=POKE_SECONDS, timeout=SENSOR_TIMEOUT_SECONDS, mode="poke")
        def wait_drained(draining_run: str) -> PokeReturnValue:  # (`run_id` is a name Airflow reserves)
            with metadata() as (config, meta):
                outcome = upgrade.drain_outcome(config, meta, pipeline, draining_run)
                if outcome == streams.DRAINED:
                    report = streams.get_pipeline(meta, pipeline).drain
                    print(f"{pipeline} drained: {upgrade.describe_drain(report)}")
            return PokeReturnValue(is_done=outcome is not None, xcom_value=outcome)

        @task.branch(task_id=OUTCOME)
        def branch(outcome: str, **context: Any) -> str:
            return next_after_drain(outcome, bool(context["params"].get("upgrade")))

        @task(task_id=ALERT)
        def alert(outcome: str) -> None:
            raise AirflowFailException(f"drain of {pipeline} {outcome}; no new run was started")

        @task(task_id=START)
        def start(**context: Any) -> str:
            with metadata() as (config, meta), airflow_errors():
                return upgrade.start_upgraded(config, meta, pipeline, context["params"].get("args") or {}, print)

        @task.sensor(task_id=WAIT_CONSUMING, poke_interval=POKE_SECONDS, timeout=SENSOR_TIMEOUT_SECONDS, mode="poke")
        def wait_consuming(new_run: str) -> bool:
            with metadata() as (config, meta), airflow_errors():
                return upgrade.consuming(config, meta, pipeline, new_run)

        # Each task gets the value of the XCom passed to it, which its typed parameter (str) names.
        outcome = cast(str, wait_drained(cast(str, request())))
        chosen = branch(outcome)
        started = start()
        chosen >> [started, EmptyOperator(task_id=DRAINED), alert(outcome)]
        wait_consuming(cast(str, started))
    return dag
