"""A push driven from this process (`venice push --local`, `venice repush --local`): the steps of
`rollout.steps`, run in order, with the push (or repush) job run by `spark-submit`. Any failure kills the new
version; the previous one keeps serving.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import IO, Protocol

from venice_core.config import ClusterConfig
from venice_core.controller import repush_config, stores, versions
from venice_core.controller.hook_decisions import HookDecisions
from venice_core.errors import VeniceError
from venice_core.meta import MetadataStore
from venice_core.pubsub import admin
from venice_core.rollout.push_confs import check_push_confs
from venice_core.rollout.steps import CreatedVersion, PushRequest, job_request, run_in_process
from venice_core.spark.inputs.input_schema import check_push_input
from venice_core.spark.specs.job_result import JobResult
from venice_core.spark.submit import PushJobRequest, master_unreachable, push_job_spec, submit_env

log = logging.getLogger(__name__)


class PushFailed(VeniceError):
    pass


class PushJobRunner(Protocol):
    """Runs the push job and returns what it wrote. `run_spark_job` is the real one; tests run the same job on an
    in-process session."""

    def __call__(self, config: ClusterConfig, request: PushJobRequest) -> JobResult: ...


def run_spark_job(config: ClusterConfig, request: PushJobRequest) -> JobResult:
    """The push job through `spark-submit`. Its result once the job has written it: spark-submit then takes a second
    more to stop Spark, which a thread of this process waits for (`_reap`) while the push goes on."""
    job = "repush" if repush_config.is_repush(request.confs) else "push"
    scratch = Path(tempfile.mkdtemp(prefix="venice-push-"))
    result_file = scratch / "result.json"
    with contextlib.ExitStack() as on_failure:  # until spark-submit runs, a failure removes what was made for it
        on_failure.callback(shutil.rmtree, scratch, ignore_errors=True)
        spec = push_job_spec(config, request, result_file)
        unreachable = master_unreachable(spec.master)
        if unreachable:
            raise PushFailed(f"{job} job failed: {unreachable}")
        output = on_failure.enter_context((scratch / "output.log").open("w+"))
        env = {**submit_env(config), **spec.env}
        proc = subprocess.Popen(spec.argv(), env=env, stdout=output, stderr=subprocess.STDOUT, text=True)
        on_failure.pop_all()  # from here `_reap` closes and removes them
    try:
        while proc.poll() is None:
            result = _succeeded(result_file)
            if result is not None:
                threading.Thread(target=_reap, args=(proc, output, scratch), name="spark-submit-reaper").start()
                return result
            time.sleep(RESULT_POLL_SECONDS)
    except BaseException:
        proc.kill()
        _reap(proc, output, scratch)
        raise
    try:
        result = _succeeded(result_file)  # a job that wrote its result succeeded, however its Spark then stopped
        if result is not None:
            return result
        output.seek(0)
        lines = output.read().splitlines()
        errors = [line for line in lines if line.startswith("error: ")]
        reason = errors[-1][len("error: ") :] if errors else ([line for line in lines if line.strip()] or ["?"])[-1]
        raise PushFailed(f"{job} job failed: {reason}")
    finally:
        _reap(proc, output, scratch)


RESULT_POLL_SECONDS = 0.05


def _succeeded(result_file: Path) -> JobResult | None:
    """The job's result if it has written one (whole: `JobResult.write` renames it into place) saying it succeeded."""
    if not result_file.exists():
        return None
    result = JobResult.read(result_file)
    return None if result.refused is not None else result


def _reap(proc: subprocess.Popen[str], output: IO[str], scratch: Path) -> None:
    """Wait for spark-submit to exit, then remove what it left; an exit that is no success after a written result
    (Spark failing as it stops) is logged with the output's last lines."""
    code = proc.wait()
    if code != 0 and _succeeded(scratch / "result.json") is not None:
        output.seek(0)
        tail = "\n".join(output.read().splitlines()[-20:])
        log.warning("spark-submit exited with %d after the job wrote its result:\n%s", code, tail)
    output.close()
    shutil.rmtree(scratch, ignore_errors=True)


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
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Run a whole push in this process, step by step (`rollout.steps`); returns the new version number
    once every region serves it. `sleep` is how the rollout waits between asks (a test's hand-moved clock)."""
    request = PushRequest(store, input_path, key_field, value_field, dict(confs or {}))
    check_push_confs(request.confs)  # before anything is created
    check_push_input(meta, store, input_path, key_field, value_field)
    admin.check_reachable(config.region(config.source_region).kafka_bootstrap)
    return _roll_out(config, meta, request, f"{store}-{uuid.uuid4().hex[:12]}", progress, run_job, sleep)


def _roll_out(
    config: ClusterConfig,
    meta: MetadataStore,
    request: PushRequest,
    push_job_id: str,
    progress: Callable[[str], None],
    run_job: PushJobRunner,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """The push's steps for a checked request, in this process, the job run by `run_job`."""
    settings = stores.store_settings(meta, request.store)
    rollout = HookDecisions(config, meta, request.store, push_job_id, settings.hook_configs, progress, sleep)

    def run(request: PushRequest, created: CreatedVersion) -> JobResult:
        return run_job(config, job_request(request, created))

    return run_in_process(rollout, request, run, sleep)


def prepare_repush(
    config: ClusterConfig, meta: MetadataStore, store: str, confs: dict[str, str], check_in_flight: bool = True
) -> tuple[repush_config.RepushConfig, repush_config.RepushSource, dict[str, str]]:
    """Everything a repush checks before anything is created (each refusal one error): its confs (no unknown key),
    its source (region, topic, broker), TTL on a hybrid store only, no push of the store in flight. The confs
    returned pin the resolved source (`controller.repush_config.resolved_confs`)."""
    as_repush = {**confs, repush_config.SOURCE_KAFKA: "true"}
    check_push_confs(as_repush)
    repush = repush_config.parse(as_repush)
    source = repush_config.resolve(meta, config, store, repush)
    in_flight = versions.version_in_flight(meta, store) if check_in_flight else None
    if in_flight is not None:
        raise versions.PushInProgress(f"a push of '{store}' is already in progress (version {in_flight})")
    return repush, source, repush_config.resolved_confs(confs, source)


def repush(
    config: ClusterConfig,
    meta: MetadataStore,
    store: str,
    confs: dict[str, str] | None = None,
    progress: Callable[[str], None] = print,
    run_job: PushJobRunner = run_spark_job,
) -> int:
    """A repush in this process: the push's steps with the store's own version topic as input (`source.kafka`);
    returns the new version number once every region serves it."""
    repush, source, pinned = prepare_repush(config, meta, store, dict(confs or {}))
    admin.check_reachable(config.region(config.source_region).kafka_bootstrap)
    ttl = f", TTL from {source.ttl_start_ms} ms" if source.ttl_start_ms is not None else ""
    progress(f"repushing '{store}' from version {source.version} in {source.region} ({source.topic}{ttl})")
    request = PushRequest(store, repush_config.REPUSH_INPUT, confs=pinned)
    return _roll_out(config, meta, request, repush_config.repush_job_id(store, repush), progress, run_job)
