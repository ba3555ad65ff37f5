"""The rollout DAG's tasks: thin wrappers over `venice_core.controller.rollout`, one per VIP-4 step.

A hook's WAIT is a sensor in reschedule mode that re-asks every `wait.interval.seconds` (no worker slot held
while waiting) and answers ABORT after `wait.max.seconds`; ABORT and ROLLBACK fail the step (after the rollback, or
with the version's status saying which regions serve it), so every later step is skipped as upstream-failed.
The heavy push is a SparkSubmitOperator over the push job.

Those deliberate stops, and input the push job refuses, fail their step for good (AirflowFailException). A step
that fails on its own (a broker briefly unreachable, a lost Spark executor, Airflow's stale-event race on
reschedule sensors) is retried `rollout.step.retries` times: every step is idempotent for its push.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pendulum
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.providers.standard.operators.hitl import HITLOperator
from airflow.sdk import DAG, Param, TaskGroup, chain, task
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from venice_core.config import ClusterConfig, load_config
from venice_core.controller import stores, versions
from venice_core.controller.rollout import Rollout, RolloutStopped
from venice_core.hooks.builtin import ManualApproval
from venice_core.jobs import local_push
from venice_core.jobs import push as push_job
from venice_core.jobs.airflow_push import dag_id, push_job_id
from venice_core.meta.context import metadata
from venice_core.status import ExecutionStatus

VERSION = "{{ ti.xcom_pull(task_ids='create_version')['version'] }}"


def result_file(config: ClusterConfig, job_id: str) -> Path:
    return config.home / "push-results" / f"{job_id}.json"


@contextmanager
def _rollout(store: str, context: dict[str, Any], version: int | None = None) -> Iterator[tuple[Rollout, dict]]:
    """This run's rollout (and the store's description) for one task; its hook threads and DB connections are
    released when the task is done."""
    with metadata() as (config, meta):
        info = stores.describe_store(meta, store)
        rollout = Rollout(
            config,
            meta,
            store,
            push_job_id(store, context["run_id"]),
            info["hook_configs"],
            progress=print,
            version=version,
        )
        try:
            rollout.ensure_not_stopped()
            if version:  # regions that already swapped, for a ROLLBACK
                status = versions.job_status(meta, store, version)
                rollout.swapped = [
                    r for r in info["rollout_order"] if r in status.regions and status.regions[r].serving
                ]
            yield rollout, info
        except RolloutStopped as stopped:  # a hook's decision, already applied: retrying would not change it
            raise AirflowFailException(str(stopped)) from stopped
        finally:
            rollout.close()


def _created(context: dict[str, Any]) -> dict[str, Any]:
    return context["ti"].xcom_pull(task_ids="create_version")


def _ask(store: str, function: str, region: str | None, context: dict[str, Any]) -> bool:
    """One poke of a hook step after version creation: True to go on, False to be asked again; ABORT/ROLLBACK
    stop the rollout."""
    with _rollout(store, context, _created(context)["version"]) as (rollout, _):
        return rollout.poke(function, region)


def finish_failed_run(context: dict[str, Any]) -> None:
    """DAG failure callback: a push that stopped on an error is over. Nothing swapped: the version is killed;
    some regions swapped: it stays PARTIALLY_ONLINE. Either way another push may start."""
    dag_run = context["dag_run"]
    store = dag_run.dag_id.removeprefix("venice_push__")
    job_id = push_job_id(store, dag_run.run_id)
    with metadata() as (_, meta):
        for version in stores.describe_store(meta, store)["versions"]:
            row = versions.get_version(meta, store, version["number"])
            if row.push_job_id == job_id and not versions.push_finished(row):
                versions.stop_push(meta, store, row.number, "the rollout run failed")


class SwapApprovalOperator(HITLOperator):
    """A person approves or rejects a region's swap in the Airflow UI (Required Actions), when the ManualApproval
    hook asks for it; the decision is recorded on the version, where the hook reads it at pre_swap. Regions the
    store's `manual.approval.regions` leaves out pass at once."""

    APPROVE, REJECT = "Approve", "Reject"

    def __init__(self, *, store: str, region: str, **kwargs: Any) -> None:
        super().__init__(
            subject=f"Swap '{store}' to its new version in {region}?",
            body=f"Version {VERSION} of '{store}' is ingested in {region}. Approve to let the rollout swap it in; "
            "reject to abort the rollout at this region.",
            options=[self.APPROVE, self.REJECT],
            multiple=False,
            **kwargs,
        )
        self.store, self.region = store, region

    def execute(self, context: Any) -> Any:
        with _rollout(self.store, context, _created(context)["version"]) as (rollout, _):
            ctx = rollout.context(self.region)
            if not ManualApproval(rollout.config.hooks.configs).needs_approval(ctx) or self.region in ctx.approvals:
                return None
        return super().execute(context)

    def execute_complete(self, context: Any, event: dict[str, Any]) -> Any:
        result = super().execute_complete(context, event)
        user = event.get("responded_by_user") or {}
        with metadata() as (_, meta):
            versions.record_approval(
                meta,
                self.store,
                _created(context)["version"],
                self.region,
                approved=result["chosen_options"] == [self.APPROVE],
                by=user.get("name") or user.get("id") or "an Airflow user",
            )
        return result


class PushJobOperator(SparkSubmitOperator):
    """The Spark push job. Input it refuses (it writes why to its result file) ends the push at once: the version
    is killed with the job's reason and the step fails without retries, since the same input would be refused
    again. Any other failure is retried like every step."""

    template_fields = (*SparkSubmitOperator.template_fields, "result_file")

    def __init__(self, *, store: str, result_file: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.store, self.result_file = store, result_file

    def execute(self, context: Any) -> None:
        Path(self.result_file).unlink(missing_ok=True)  # a previous try's result is not this one's
        confs = {str(k): str(v) for k, v in (context["params"].get("conf") or {}).items()}  # `venice push --conf`
        self.conf = {**(self.conf or {}), **local_push.spark_confs(confs)}
        self.application_args = [*self.application_args, *local_push.job_flags(confs)]
        try:
            super().execute(context)
        except Exception as exc:
            refused = push_job.refused_input(Path(self.result_file))
            if not refused:
                raise
            reason = f"the push job refused its input: {refused}"
            with metadata() as (_, meta):
                versions.stop_push(meta, self.store, _created(context)["version"], reason)
            raise AirflowFailException(reason) from exc


def build_rollout_dag(store: str, rollout_order: list[str], config: ClusterConfig) -> DAG:
    hooks = config.hooks
    # The hooks' maximum wait is enforced by Rollout.poke (an explicit ABORT); the sensor timeout is a backstop.
    interval = hooks.wait_interval_seconds
    sensor = {"poke_interval": interval, "timeout": hooks.wait_max_seconds + 3 * interval + 60, "mode": "reschedule"}
    manual_approval = f"{ManualApproval.__module__}.{ManualApproval.__name__}" in hooks.class_paths
    with DAG(
        dag_id=dag_id(store),
        description=f"Push a dataset to '{store}' and roll it out region by region with lifecycle hooks",
        schedule=None,
        start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
        catchup=False,
        max_active_runs=1,
        tags=["venice", "rollout"],
        on_failure_callback=finish_failed_run,
        default_args={
            "retries": config.step_retries,
            "retry_delay": timedelta(seconds=config.step_retry_delay_seconds),
        },
        params={
            "input": Param(type="string", description="Avro, Parquet or JSON files"),
            "key_field": Param("key", type="string"),
            "value_field": Param("value", type="string"),
            "conf": Param({}, type="object", description="push configs (allow.duplicate.key, ...)"),
        },
    ) as dag:

        @task(task_id="start_of_push_job")
        def start_of_push_job(**context: Any) -> None:
            with _rollout(store, context) as (rollout, _):
                rollout.start_of_push_job()

        @task(task_id="create_version")
        def create_version(**context: Any) -> dict[str, Any]:
            with _rollout(store, context) as (rollout, info):
                config, job_id = rollout.config, rollout.push_job_id
                version = versions.version_of_push(rollout.meta, store, job_id)
                if version is not None:  # this step is re-run (Airflow restarted mid-step): resume its version
                    regions = version.details["regions"]
                else:
                    regions = rollout.regions_for_new_version(info["rollout_order"])
                    version = versions.create_version(rollout.meta, config, store, job_id, regions)
                    rollout.version = version.number
                    rollout.inform("post_store_version_creation")
                local_push.send_start_of_push(
                    config, store, version.number, version.partition_count, job_id, info["compression"]
                )
                source = config.region(config.source_region)
                return {
                    "version": version.number,
                    "partitions": version.partition_count,
                    "regions": regions,
                    "push_job_id": job_id,
                    "topic": source.version_topic(store, version.number),
                    "bootstrap": source.kafka_bootstrap,
                    "result_file": str(result_file(config, job_id)),
                }

        created = "ti.xcom_pull(task_ids='create_version')"
        spark_push = PushJobOperator(
            task_id="spark_push",
            store=store,
            result_file="{{ " + created + "['result_file'] }}",
            application=str(local_push.JOB_FILE),
            conn_id="spark_default",
            name=f"venice-push-{store}",
            conf=dict(local_push.DEFAULT_SPARK_CONFS),
            driver_memory="2g",
            application_args=[
                "--store",
                store,
                "--version",
                VERSION,
                "--topic",
                "{{ " + created + "['topic'] }}",
                "--bootstrap",
                "{{ " + created + "['bootstrap'] }}",
                "--input",
                "{{ params.input }}",
                "--key-field",
                "{{ params.key_field }}",
                "--value-field",
                "{{ params.value_field }}",
                "--push-job-id",
                "{{ " + created + "['push_job_id'] }}",
                "--result-file",
                "{{ " + created + "['result_file'] }}",
            ],
        )

        @task(task_id="end_of_push")
        def end_of_push(**context: Any) -> int:
            created_info = _created(context)
            result = json.loads(Path(created_info["result_file"]).read_text())
            local_push.send_end_of_push(
                load_config(),
                store,
                created_info["version"],
                created_info["partitions"],
                created_info["push_job_id"],
                result["record_counts"],
            )
            with metadata() as (_, meta):
                versions.record_push_counts(meta, store, created_info["version"], result["record_counts"])
            return result["records"]

        first = start_of_push_job()
        chain_end = first >> create_version() >> spark_push >> end_of_push()
        for region in rollout_order:
            with TaskGroup(group_id=region.replace("-", "_"), tooltip=f"rollout to {region}") as group:

                @task(task_id="admitted", trigger_rule="none_failed")
                def admitted(region: str = region, **context: Any) -> None:
                    if region not in _created(context)["regions"]:
                        raise AirflowSkipException(f"pre_store_version_creation left {region} out")

                @task.sensor(task_id="da_vinci_ingestion_gate", **sensor)
                def da_vinci_gate(region: str = region, **context: Any) -> bool:
                    with _rollout(store, context, _created(context)["version"]) as (rollout, _):
                        return rollout.poke_da_vinci_gate(region)

                @task.sensor(task_id="ingestion_complete", poke_interval=2, timeout=3600, mode="reschedule")
                def ingestion_complete(region: str = region, **context: Any) -> bool:
                    with metadata() as (_, meta):
                        status = versions.job_status(meta, store, _created(context)["version"]).regions[region]
                    if status.status is ExecutionStatus.ERROR:
                        raise AirflowFailException(f"ingestion failed in {region}: {status.details}")
                    return status.status is ExecutionStatus.COMPLETED

                @task(task_id="leader_replication_done")
                def leader_replication(region: str = region, **context: Any) -> None:
                    with _rollout(store, context, _created(context)["version"]) as (rollout, _):
                        rollout.inform("post_store_version_leader_replication", region)

                @task.sensor(task_id="da_vinci_swap", **sensor)
                def da_vinci_swap(region: str = region, **context: Any) -> bool:
                    with _rollout(store, context, _created(context)["version"]) as (rollout, _):
                        return rollout.poke_da_vinci_swap(region)

                approval = (
                    SwapApprovalOperator(task_id="approval", store=store, region=region) if manual_approval else None
                )

                @task.sensor(task_id="pre_swap", **sensor)
                def pre_swap(region: str = region, **context: Any) -> bool:
                    return _ask(store, "pre_store_version_swap", region, context)

                @task(task_id="server_swap")
                def server_swap(region: str = region, **context: Any) -> None:
                    version = _created(context)["version"]
                    with metadata() as (config, meta):
                        versions.swap_region(meta, store, region, version)
                        local_push.wait_until_served(config, store, version, [region])

                @task.sensor(task_id="post_swap", **sensor)
                def post_swap(region: str = region, **context: Any) -> bool:
                    return _ask(store, "post_store_version_swap", region, context)

                steps = [admitted(), da_vinci_gate(), ingestion_complete(), leader_replication(), da_vinci_swap()]
                steps += [approval] if approval else []
                chain(*steps, pre_swap(), server_swap(), post_swap())
            chain_end >> group
            chain_end = group

        @task.sensor(task_id="end_of_push_job", trigger_rule="none_failed", **sensor)
        def end_of_push_job(**context: Any) -> bool:
            with _rollout(store, context, _created(context)["version"]) as (rollout, _):
                if not rollout.poke("pre_end_of_push_job"):
                    return False
                rollout.inform("post_end_of_push_job")
                versions.finish_push(rollout.meta, store, rollout.version)
                versions.retire_old_versions(rollout.meta, rollout.config, store)
            return True

        chain_end >> end_of_push_job()
    return dag
