"""A push driven from this process (`venice push --local`): each step is a function the rollout can call too.

create version -> START_OF_PUSH -> Spark job (spark-submit) -> END_OF_PUSH -> wait for every region -> swap each
region in rollout order -> retire old versions. Any failure kills the new version; the previous one keeps serving.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from venice_core.config import ClusterConfig, process_env
from venice_core.controller import versions
from venice_core.controller.rollout import Rollout, RolloutStopped
from venice_core.controller.stores import describe_store
from venice_core.errors import ComponentError, VeniceError
from venice_core.meta import MetadataStore
from venice_core.protocol.div import deterministic_guid
from venice_core.protocol.envelope import ControlMessageType
from venice_core.pubsub import admin
from venice_core.pubsub.writer import VersionTopicWriter
from venice_core.status import ExecutionStatus

JOB_FILE = Path(__file__).with_name("push.py")
INGESTION_TIMEOUT_SECONDS = 1800


class PushFailed(VeniceError):
    pass


# The push job's Spark properties unless a push's `--conf` says otherwise (spark-submit and the DAG's operator alike).
# C1-only JIT: a push runs for seconds to minutes in local mode, where C2's compiler threads take cores from the job
# itself; measured on 2 cores (bench/push_throughput), the job's CPU fell from 37 to 24 core-seconds.
DEFAULT_SPARK_CONFS: dict[str, str] = {
    "spark.pyspark.python": sys.executable,
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "8",
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1",
}


def spark_submit_argv(
    config: ClusterConfig, job_args: list[str], confs: dict[str, str], master: str = "local[2,4]"
) -> list[str]:
    """The `spark-submit` command line (a list, as Airflow's SparkSubmitHook builds it). `local[2,4]` lets a failed
    task be retried up to 4 times, as on a cluster."""
    spark_submit = shutil.which("spark-submit", path=str(Path(sys.executable).parent)) or "spark-submit"
    argv = [spark_submit, "--master", master, "--name", "venice-push", "--driver-memory", "2g"]
    for key, value in {**DEFAULT_SPARK_CONFS, **spark_confs(confs)}.items():
        argv += ["--conf", f"{key}={value}"]
    return [*argv, str(JOB_FILE), *job_args]


def spark_confs(confs: dict[str, str]) -> dict[str, str]:
    """The Spark properties among a push's configs: `spark.*` as given, and the test fault injections (spark-submit
    passes on only `spark.*` properties)."""
    picked = {key: value for key, value in confs.items() if key.startswith("spark.")}
    picked.update({f"spark.{key}": value for key, value in confs.items() if key.startswith("venice.push.test.")})
    return picked


def job_flags(confs: dict[str, str]) -> list[str]:
    """The push job's flags for a push's configs (`allow.duplicate.key`, `allow.empty.input`)."""
    wanted = {"allow.duplicate.key": "--allow-duplicate-key", "allow.empty.input": "--allow-empty"}
    return [flag for key, flag in wanted.items() if str(confs.get(key, "false")).lower() == "true"]


def send_control(
    config: ClusterConfig,
    store: str,
    number: int,
    partitions: int,
    push_job_id: str,
    control_type: ControlMessageType,
    bodies: list[dict[str, Any]],
) -> None:
    source = config.region(config.source_region)
    writer = VersionTopicWriter(
        source.kafka_bootstrap,
        source.version_topic(store, number),
        partitions,
        deterministic_guid(push_job_id, number, control_type.name),
    )
    writer.broadcast(control_type, bodies)
    writer.flush()


def send_start_of_push(
    config: ClusterConfig, store: str, number: int, partitions: int, push_job_id: str, compression: str
) -> None:
    """START_OF_PUSH in every partition: the data comes sorted and chunked, with the store's compression. Its GUID
    derives from the push job, so sending it again (a re-run step) is skipped by ingestion as a duplicate."""
    sop = {"sorted": True, "chunked": True, "compression": compression, "compression_dictionary": None}
    send_control(config, store, number, partitions, push_job_id, ControlMessageType.START_OF_PUSH, [sop] * partitions)


def send_end_of_push(
    config: ClusterConfig, store: str, number: int, partitions: int, push_job_id: str, record_counts: dict[str, int]
) -> None:
    """END_OF_PUSH in every partition, with the count the Spark job wrote to it (ingestion checks it)."""
    bodies = [{"record_counts": {str(p): record_counts[str(p)]}} for p in range(partitions)]
    send_control(config, store, number, partitions, push_job_id, ControlMessageType.END_OF_PUSH, bodies)


@dataclass(frozen=True)
class PushJobRequest:
    """What the push job is asked to do: write `input_path` as version `number` of `store`."""

    store: str
    number: int
    input_path: str
    key_field: str
    value_field: str
    push_job_id: str
    confs: dict[str, str] = field(default_factory=dict)


class PushJobRunner(Protocol):
    """Runs the push job and returns what it wrote (`record_counts` per partition as strings, `schema_id`,
    `records`). `run_spark_job` is the real one; tests run the same job on an in-process session."""

    def __call__(self, config: ClusterConfig, request: PushJobRequest) -> dict[str, Any]: ...


def job_args(config: ClusterConfig, request: PushJobRequest) -> list[str]:
    """The push job's arguments (see `jobs.push.parse_args`), but for its result file."""
    source = config.region(config.source_region)
    return [
        "--store",
        request.store,
        "--version",
        str(request.number),
        "--topic",
        source.version_topic(request.store, request.number),
        "--bootstrap",
        source.kafka_bootstrap,
        "--input",
        request.input_path,
        "--key-field",
        request.key_field,
        "--value-field",
        request.value_field,
        "--push-job-id",
        request.push_job_id,
        *job_flags(request.confs),
    ]


def run_spark_job(config: ClusterConfig, request: PushJobRequest) -> dict[str, Any]:
    """The push job through `spark-submit`."""
    with tempfile.TemporaryDirectory(prefix="venice-push-") as tmp:
        result_file = Path(tmp) / "result.json"
        args = [*job_args(config, request), "--result-file", str(result_file)]
        env = {**process_env(config), "PYSPARK_PYTHON": sys.executable}
        confs = request.confs
        argv = spark_submit_argv(config, args, confs, confs.get("spark.master", "local[2,4]"))
        proc = subprocess.run(argv, env=env, capture_output=True, text=True)
        if proc.returncode != 0 or not result_file.exists():
            errors = [line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith("error: ")]
            reason = errors[-1][len("error: ") :] if errors else (proc.stderr.strip().splitlines() or ["?"])[-1]
            raise PushFailed(f"push job failed: {reason}")
        return json.loads(result_file.read_text())


def wait_for_ingestion(
    meta: MetadataStore,
    store: str,
    number: int,
    regions: list[str],
    progress: Callable[[str], None],
    timeout: float = INGESTION_TIMEOUT_SECONDS,
) -> None:
    """Until every given region has ingested the version (an ERROR anywhere fails the push)."""
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        status = versions.job_status(meta, store, number)
        line = ", ".join(f"{r}={s.status.value}" for r, s in sorted(status.regions.items()))
        if line != last:
            progress(f"ingestion: {line}")
            last = line
        errors = [f"{r}: {s.details}" for r, s in status.regions.items() if s.status is ExecutionStatus.ERROR]
        if errors:
            raise PushFailed(f"ingestion failed: {'; '.join(errors)}")
        if all(status.regions[r].status is ExecutionStatus.COMPLETED for r in regions if r in status.regions):
            return
        time.sleep(0.5)
    raise PushFailed(f"ingestion did not complete within {timeout:.0f}s")


def wait_until_served(config: ClusterConfig, store: str, number: int, regions: list[str], timeout: float = 30) -> None:
    """Region servers pick up a swap within a second; wait so a read right after the push sees the new data."""
    import http.client

    for region in regions:
        deadline = time.monotonic() + timeout
        while True:
            try:
                conn = http.client.HTTPConnection(
                    config.server_host if config.server_host != "0.0.0.0" else "127.0.0.1",
                    config.server_port(region),
                    timeout=5,
                )
                conn.request("GET", "/health")
                if json.loads(conn.getresponse().read()).get("stores", {}).get(store) == number:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise ComponentError(f"region {region} did not start serving {store} v{number} within {timeout}s")
            time.sleep(0.2)


def write_version(
    config: ClusterConfig,
    store: str,
    number: int,
    partitions: int,
    push_job_id: str,
    info: dict[str, Any],
    input_path: str,
    key_field: str,
    value_field: str,
    confs: dict[str, str],
    progress: Callable[[str], None],
    meta: MetadataStore,
    run_job: PushJobRunner = run_spark_job,
) -> None:
    """START_OF_PUSH, the push job (`run_job`: spark-submit unless a caller gives another), END_OF_PUSH with the
    job's per-partition counts."""
    send_start_of_push(config, store, number, partitions, push_job_id, info["compression"])
    started = time.monotonic()
    result = run_job(config, PushJobRequest(store, number, input_path, key_field, value_field, push_job_id, confs))
    progress(
        f"spark job wrote {result['records']} records with value schema {result['schema_id']} "
        f"in {time.monotonic() - started:.1f}s"
    )
    send_end_of_push(config, store, number, partitions, push_job_id, result["record_counts"])
    versions.record_push_counts(meta, store, number, result["record_counts"])


def push(
    config: ClusterConfig,
    meta: MetadataStore,
    store: str,
    input_path: str,
    key_field: str = "key",
    value_field: str = "value",
    confs: dict[str, str] | None = None,
    progress: Callable[[str], None] = print,
    run_job: PushJobRunner = run_spark_job,
) -> int:
    """Run a whole push; returns the new version number once every region serves it."""
    confs = dict(confs or {})
    info = describe_store(meta, store)  # unknown store: StoreNotFound before anything is created
    if "://" not in input_path and not Path(input_path).exists():
        raise PushFailed(f"input path {input_path} does not exist")
    admin.check_reachable(config.region(config.source_region).kafka_bootstrap)
    push_job_id = f"{store}-{uuid.uuid4().hex[:12]}"
    rollout = Rollout(config, meta, store, push_job_id, info["hook_configs"], progress)
    try:
        rollout.start_of_push_job()
        regions = rollout.regions_for_new_version(info["rollout_order"])
        version = versions.create_version(meta, config, store, push_job_id, regions)
        number, partitions = version.number, version.partition_count
        rollout.version = number
        progress(
            f"created version {number} of '{store}' ({partitions} partitions, regions {', '.join(regions)}, "
            f"push job {push_job_id})"
        )
        rollout.inform("post_store_version_creation")
        try:
            write_version(
                config,
                store,
                number,
                partitions,
                push_job_id,
                info,
                input_path,
                key_field,
                value_field,
                confs,
                progress,
                meta,
                run_job,
            )
            for region in regions:
                rollout.swap_region(
                    region,
                    wait_for_ingestion=lambda r: wait_for_ingestion(meta, store, number, [r], progress),
                    wait_until_served=lambda r: wait_until_served(config, store, number, [r]),
                )
            rollout.end_of_push_job()
            versions.finish_push(meta, store, number)
        except RolloutStopped:
            raise
        except BaseException as exc:
            versions.stop_push(meta, store, number, str(exc))
            raise
    finally:
        rollout.close()
    retired = versions.retire_old_versions(meta, config, store)
    if retired:
        progress(f"retired versions {retired}")
    return number
