"""`venice stream start / status / stop`: a nearline streaming pipeline's job as a managed process.

Each pipeline has a directory under the data dir, `<data.dir>/streams/<name>/`: the job's pid file and log
(`job.pid`, `job.log`) and Spark's checkpoint (`checkpoint/`), which a later start resumes from. The job runs
`spark-submit` in a session (process group) of its own, stopped as a whole like the embedded components
(`embedded.process.ManagedProcess`). The pipeline itself (its settings, state, current run, last error, offsets
reached) is in the metadata store (`controller.streams`).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from venice_core.config import ClusterConfig
from venice_core.controller import streams
from venice_core.embedded.process import ManagedProcess
from venice_core.errors import ConfigError, StreamInputError, VeniceError
from venice_core.meta import MetadataStore
from venice_core.nearline.writer import resolve_target
from venice_core.pubsub import acls
from venice_core.spark.jobs.stream_transforms import TransformSpec
from venice_core.spark.submit import StreamJobRequest, master_of, master_unreachable, stream_job_spec, submit_env
from venice_core.utils.waiting import poll_until

START_TIMEOUT_SECONDS = 180.0


class StreamFailed(VeniceError):
    pass


def pipeline_dir(config: ClusterConfig, name: str) -> Path:
    return config.data_dir / "streams" / streams.validate_pipeline_name(name)


def checkpoint_dir(config: ClusterConfig, name: str) -> Path:
    return pipeline_dir(config, name) / "checkpoint"


def process(config: ClusterConfig, name: str) -> ManagedProcess:
    return ManagedProcess("job", pipeline_dir(config, name))


def check_request(config: ClusterConfig, meta: MetadataStore, request: StreamJobRequest) -> None:
    """What `start` refuses before it starts anything: an unknown region or store, a batch-only store, a mapping no
    event could satisfy."""
    target = resolve_target(request.store, request.region, config=config, meta=meta)
    transform = TransformSpec(
        request.transform,
        request.key_field,
        request.event_time_field,
        request.window_seconds,
        request.watermark_seconds,
    )
    try:
        transform.mapping(target, request.value_fields)
    except StreamInputError as exc:
        raise ConfigError(str(exc)) from None
    if request.trigger_seconds <= 0 or request.max_records_per_batch < 0:
        raise ConfigError("the trigger interval must be positive and the batch limit at least 0")
    if request.drain_timeout_seconds <= 0 or request.drain_poll_seconds <= 0:
        raise ConfigError("the drain timeout and the drain monitor's interval must be positive")


@dataclass(frozen=True)
class PipelineStatus:
    """A pipeline as `status` shows it: its record, and its state as the process says (a job whose process is
    gone without reporting is failed)."""

    record: streams.PipelineRecord
    state: streams.PipelineState
    cause: str | None
    pid: int | None
    log: Path


def _log_error(proc: ManagedProcess) -> str | None:
    lines = [line for line in proc.log_tail(200).splitlines() if line.startswith("error: ")]
    return lines[-1][len("error: ") :] if lines else None


def pipeline_status(config: ClusterConfig, meta: MetadataStore, name: str) -> PipelineStatus:
    record = streams.get_pipeline(meta, name)
    proc = process(config, name)
    pid = proc.pid()
    state, cause = record.state, record.last_error
    if state in streams.ACTIVE and pid is None:
        state = streams.FAILED
        cause = cause or _log_error(proc) or f"the job exited without saying why (see {proc.log_file})"
    return PipelineStatus(record, state, cause, pid, proc.log_file)


def all_statuses(config: ClusterConfig, meta: MetadataStore) -> list[PipelineStatus]:
    return [pipeline_status(config, meta, record.name) for record in streams.list_pipelines(meta)]


def start(
    config: ClusterConfig,
    meta: MetadataStore,
    request: StreamJobRequest,
    wait: bool = True,
    timeout: float = START_TIMEOUT_SECONDS,
    progress: Callable[[str], None] = lambda _line: None,
) -> PipelineStatus:
    """Start a run of the pipeline (created on its first start); with `wait`, return once its query runs, and
    raise StreamFailed with the cause if it fails first."""
    check_request(config, meta, request)
    unreachable = master_unreachable(master_of(config, request.confs))
    if unreachable:
        raise StreamFailed(f"cannot start stream {request.name}: {unreachable}")
    proc = process(config, request.name)
    running = proc.pid()
    if running is not None:
        raise streams.PipelineConflict(f"stream pipeline '{request.name}' is already running (pid {running})")
    previous = streams.find_pipeline(meta, request.name)
    if previous is not None and previous.state == streams.DRAINED:
        request = after_drain(config, request, previous)
        progress(
            f"stream {request.name}: drained by run {previous.run_id}; starting with fresh state from its offsets "
            f"{request.starting_offsets}"
        )
    if config.security.enabled:  # the job runs as the store's nearline principal: it reads its source topic
        acls.grant_source(config, request.source_bootstrap, request.source_topic, request.store)
    record = streams.new_run(meta, request.name, request.store, request.region, request.source_topic, request.to_json())
    spec = stream_job_spec(config, request, record.run_id, checkpoint_dir(config, request.name))
    env = {**submit_env(config), **spec.env, "PYTHONHASHSEED": "0"}
    try:
        pid = proc.start(spec.argv(), env=env)
    except Exception as exc:
        streams.record_failure(meta, request.name, record.run_id, f"cannot start the job: {exc}")
        raise
    progress(f"stream {request.name}: job started (pid {pid}, run {record.run_id}), log {proc.log_file}")
    if not wait:
        return pipeline_status(config, meta, request.name)
    return wait_until_running(config, meta, request.name, record.run_id, timeout)


def after_drain(config: ClusterConfig, request: StreamJobRequest, drained: streams.PipelineRecord) -> StreamJobRequest:
    """A start after a clean drain: the drained run's state is empty (every window fired) and its checkpoint's
    watermark at infinity, so the new run starts with fresh state (the old checkpoint kept aside as
    `checkpoint.drained`) from exactly the offsets the drained run reached. This is what lets an upgrade change the
    state schema. A start after a drain that did not finish (timed out, stopped) resumes the checkpoint, whose job
    first undoes the earlier run's drain markers (`spark.jobs.drain_resume`)."""
    checkpoint = checkpoint_dir(config, request.name)
    if checkpoint.exists():
        kept = checkpoint.with_name("checkpoint.drained")
        shutil.rmtree(kept, ignore_errors=True)
        checkpoint.rename(kept)
    return replace(request, starting_offsets=json.dumps(drained.offsets, sort_keys=True))


def wait_until_running(
    config: ClusterConfig, meta: MetadataStore, name: str, run_id: str, timeout: float
) -> PipelineStatus:
    def running() -> PipelineStatus | None:
        status = pipeline_status(config, meta, name)
        if status.record.run_id != run_id:
            raise StreamFailed(f"stream pipeline '{name}' was started again meanwhile (run {status.record.run_id})")
        if status.state == streams.RUNNING:
            return status
        if status.state in (streams.FAILED, streams.STOPPED):
            raise StreamFailed(f"stream {name} {status.state}: {status.cause or 'stopped'}")
        seen[:] = [status]
        return None

    seen: list[PipelineStatus] = []  # the last status read, whose log a timeout names
    started = poll_until(
        running,
        timeout=timeout,
        interval=0.3,
        timeout_error=lambda _: StreamFailed(f"stream {name} did not start within {timeout:.0f}s (see {seen[0].log})"),
    )
    assert started is not None  # poll_until returns only a truthy answer when given a timeout_error
    return started


def stop(config: ClusterConfig, meta: MetadataStore, name: str, timeout: float = 30.0) -> bool:
    """Stop the pipeline's job (its whole process group). False if it was not running."""
    record = streams.get_pipeline(meta, name)
    stopped = process(config, name).stop(timeout=timeout)
    if stopped or record.state in streams.ACTIVE:
        streams.record_stopped(meta, name, record.run_id)
    return stopped


def resolve_request(
    meta: MetadataStore,
    config: ClusterConfig,
    name: str,
    store: str | None,
    source_topic: str | None,
    region: str | None,
    key_field: str | None,
    **options: object,
) -> StreamJobRequest:
    """The request of `venice stream start NAME ...`: options given, else what the pipeline last ran with (a
    pipeline started before may be started again by name alone)."""
    previous = streams.find_pipeline(meta, name)
    recorded = dict(previous.args) if previous is not None else {}
    given = {k: v for k, v in options.items() if v is not None}
    merged = {
        **recorded,
        **given,
        "name": name,
        "store": store or recorded.get("store"),
        "source_topic": source_topic or recorded.get("source_topic"),
        "region": region or recorded.get("region"),
        "key_field": key_field or recorded.get("key_field"),
    }
    missing = [flag for flag in ("store", "source_topic", "region", "key_field") if not merged.get(flag)]
    if missing:
        flags = ", ".join("--" + flag.replace("_", "-") for flag in missing)
        raise ConfigError(f"a new stream pipeline needs {flags}")
    if not merged.get("source_bootstrap"):
        merged["source_bootstrap"] = config.region(str(merged["region"])).kafka_bootstrap
    return StreamJobRequest.of(merged)
