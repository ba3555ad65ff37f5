"""The rollout DAG's tasks: thin wrappers over `venice_core.controller.rollout`, one per VIP-4 step.

A hook's WAIT is a sensor in reschedule mode that re-asks every `wait.interval.seconds` (no worker slot held
while waiting) and answers ABORT after `wait.max.seconds`; ABORT and ROLLBACK fail the step (after the rollback, or
with the version's status saying which regions serve it), so every later step is skipped as upstream-failed.
The heavy push is a SparkSubmitOperator over the push job.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pendulum
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.providers.standard.operators.hitl import HITLOperator
from airflow.sdk import DAG, Param, TaskGroup, chain, task
from airflow.sdk.exceptions import AirflowSkipException

from venice_core.config import ClusterConfig, HookSettings, load_config
from venice_core.controller import stores, versions
from venice_core.controller.rollout import Rollout
from venice_core.controller.status import ExecutionStatus
from venice_core.hooks.builtin import ManualApproval
from venice_core.jobs import local_push
from venice_core.jobs.airflow_push import dag_id, push_job_id
from venice_core.meta import MetadataStore
from venice_core.protocol.envelope import ControlMessageType

VERSION = "{{ ti.xcom_pull(task_ids='create_version')['version'] }}"


def result_file(config: ClusterConfig, job_id: str) -> Path:
    return config.home / "push-results" / f"{job_id}.json"


def _rollout(store: str, context: dict[str, Any], version: int | None = None) -> tuple[Rollout, MetadataStore]:
    config = load_config()
    meta = MetadataStore(config.metadata_db_url)
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
    if version:  # regions that already swapped, for a ROLLBACK
        status = versions.job_status(meta, store, version)
        rollout.swapped = [r for r in info["rollout_order"] if status.regions.get(r) and status.regions[r].serving]
    return rollout, meta


def _created(context: dict[str, Any]) -> dict[str, Any]:
    return context["ti"].xcom_pull(task_ids="create_version")


def _ask(store: str, function: str, region: str | None, context: dict[str, Any]) -> bool:
    """One poke of a hook step: True to go on, False to be asked again; ABORT/ROLLBACK stop the rollout."""
    created = _created(context) if function != "pre_start_of_push_job" else None
    rollout, meta = _rollout(store, context, created["version"] if created else None)
    try:
        return rollout.poke(function, region)
    finally:
        rollout.close()
        meta.dispose()


def finish_failed_run(context: dict[str, Any]) -> None:
    """DAG failure callback: a push that stopped on an error is over. Nothing swapped: the version is killed;
    some regions swapped: it stays PARTIALLY_ONLINE. Either way another push may start."""
    dag_run = context["dag_run"]
    store = dag_run.dag_id.removeprefix("venice_push__")
    job_id = push_job_id(store, dag_run.run_id)
    config = load_config()
    meta = MetadataStore(config.metadata_db_url)
    try:
        info = stores.describe_store(meta, store)
        for version in info["versions"]:
            row = versions.get_version(meta, store, version["number"])
            if row.push_job_id != job_id or (row.details or {}).get("finished"):
                continue
            if any(r.get("current") == row.number for r in info["regions"].values()):
                versions.set_version_status(
                    meta, store, row.number, versions.VersionStatus.PARTIALLY_ONLINE, "the rollout run failed"
                )
                versions.finish_push(meta, store, row.number)
            else:
                versions.kill_push(meta, store, row.number, "the rollout run failed")
    finally:
        meta.dispose()


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
        config = load_config()
        rollout, meta = _rollout(self.store, context, _created(context)["version"])
        try:
            hook = ManualApproval(config.hooks.configs)
            ctx = rollout.context(self.region)
            if not hook.needs_approval(ctx) or self.region in ctx.approvals:
                return None
        finally:
            rollout.close()
            meta.dispose()
        return super().execute(context)

    def execute_complete(self, context: Any, event: dict[str, Any]) -> Any:
        result = super().execute_complete(context, event)
        user = event.get("responded_by_user") or {}
        config = load_config()
        meta = MetadataStore(config.metadata_db_url)
        try:
            versions.record_approval(
                meta,
                self.store,
                _created(context)["version"],
                self.region,
                approved=result["chosen_options"] == [self.APPROVE],
                by=user.get("name") or user.get("id") or "an Airflow user",
            )
        finally:
            meta.dispose()
        return result


def build_rollout_dag(store: str, rollout_order: list[str], hooks: HookSettings) -> DAG:
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
        params={
            "input": Param(type="string", description="Avro, Parquet or JSON files"),
            "key_field": Param("key", type="string"),
            "value_field": Param("value", type="string"),
            "conf": Param({}, type="object", description="push configs (allow.duplicate.key, ...)"),
        },
    ) as dag:

        @task(task_id="start_of_push_job")
        def start_of_push_job(**context: Any) -> None:
            rollout, meta = _rollout(store, context)
            try:
                rollout.start_of_push_job()
            finally:
                rollout.close()
                meta.dispose()

        @task(task_id="create_version")
        def create_version(**context: Any) -> dict[str, Any]:
            rollout, meta = _rollout(store, context)
            try:
                info = stores.describe_store(meta, store)
                version = versions.version_of_push(meta, store, rollout.push_job_id)
                if version is not None:  # this step is re-run (Airflow restarted mid-step): resume its version
                    regions = version.details["regions"]
                else:
                    regions = rollout.regions_for_new_version(info["rollout_order"])
                    version = versions.create_version(meta, rollout.config, store, rollout.push_job_id, regions)
                    rollout.version = version.number
                    rollout.inform("post_store_version_creation")
                # START_OF_PUSH has a GUID derived from the push job: sent again, ingestion skips it as a duplicate.
                sop = {"sorted": True, "chunked": True, "compression": info["compression"]}
                local_push.send_control(
                    rollout.config,
                    store,
                    version.number,
                    version.partition_count,
                    rollout.push_job_id,
                    ControlMessageType.START_OF_PUSH,
                    [sop] * version.partition_count,
                )
                source = rollout.config.region(rollout.config.source_region)
                return {
                    "version": version.number,
                    "partitions": version.partition_count,
                    "regions": regions,
                    "push_job_id": rollout.push_job_id,
                    "topic": source.version_topic(store, version.number),
                    "bootstrap": source.kafka_bootstrap,
                    "result_file": str(result_file(rollout.config, rollout.push_job_id)),
                }
            finally:
                rollout.close()
                meta.dispose()

        created = "ti.xcom_pull(task_ids='create_version')"
        spark_push = SparkSubmitOperator(
            task_id="spark_push",
            application=str(local_push.JOB_FILE),
            conn_id="spark_default",
            name=f"venice-push-{store}",
            conf={"spark.pyspark.python": sys.executable, "spark.ui.enabled": "false"},
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
            config = load_config()
            result = json.loads(Path(created_info["result_file"]).read_text())
            partitions = created_info["partitions"]
            local_push.send_control(
                config,
                store,
                created_info["version"],
                partitions,
                push_job_id(store, context["run_id"]),
                ControlMessageType.END_OF_PUSH,
                [{"record_counts": {str(p): result["record_counts"][str(p)]}} for p in range(partitions)],
            )
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
                    return _ask(store, "pre_start_of_store_version_ingestion_for_da_vinci", region, context)

                @task.sensor(task_id="ingestion_complete", poke_interval=2, timeout=3600, mode="reschedule")
                def ingestion_complete(region: str = region, **context: Any) -> bool:
                    config = load_config()
                    meta = MetadataStore(config.metadata_db_url)
                    try:
                        status = versions.job_status(meta, store, _created(context)["version"]).regions[region]
                    finally:
                        meta.dispose()
                    if status.status is ExecutionStatus.ERROR:
                        raise RuntimeError(f"ingestion failed in {region}: {status.details}")
                    return status.status is ExecutionStatus.COMPLETED

                @task(task_id="leader_replication_done")
                def leader_replication(region: str = region, **context: Any) -> None:
                    rollout, meta = _rollout(store, context, _created(context)["version"])
                    try:
                        rollout.inform("post_store_version_leader_replication", region)
                    finally:
                        rollout.close()
                        meta.dispose()

                @task.sensor(task_id="da_vinci_swap", **sensor)
                def da_vinci_swap(region: str = region, **context: Any) -> bool:
                    return _ask(store, "post_start_of_store_version_ingestion_for_da_vinci", region, context)

                approval = (
                    SwapApprovalOperator(task_id="approval", store=store, region=region) if manual_approval else None
                )

                @task.sensor(task_id="pre_swap", **sensor)
                def pre_swap(region: str = region, **context: Any) -> bool:
                    return _ask(store, "pre_store_version_swap", region, context)

                @task(task_id="server_swap")
                def server_swap(region: str = region, **context: Any) -> None:
                    version = _created(context)["version"]
                    config = load_config()
                    meta = MetadataStore(config.metadata_db_url)
                    try:
                        versions.swap_region(meta, store, region, version)
                        local_push.wait_until_served(config, store, version, [region])
                    finally:
                        meta.dispose()

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
            if not _ask(store, "pre_end_of_push_job", None, context):
                return False
            rollout, meta = _rollout(store, context, _created(context)["version"])
            try:
                rollout.inform("post_end_of_push_job")
                versions.finish_push(meta, store, rollout.version)
                versions.retire_old_versions(meta, rollout.config, store)
            finally:
                rollout.close()
                meta.dispose()
            return True

        chain_end >> end_of_push_job()
    return dag
