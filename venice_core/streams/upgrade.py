"""Drain and upgrade of a streaming pipeline, as steps: what the `venice_upgrade__<pipeline>` DAG's tasks run
(`venice_plugin.upgrade_dag`) and what `venice stream drain/upgrade --local` runs in one process.

1. `request_drain`: write a drain notification for the pipeline's current run (its job's `DrainMonitor` sees it).
2. `drain_outcome`: has the run stopped cleanly (DRAINED), failed its drain (the timeout passed: FAILED, or the
   job gone), or is it still draining (None)?
3. `start_upgraded`: the new deployment, a new run with the new job's arguments over what the pipeline last ran
   with, fresh state, from exactly the offsets the drained run reached (`control.after_drain`).
4. `consuming`: is the new run's query running?
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from venice_core.config import ClusterConfig
from venice_core.controller import drain, streams
from venice_core.errors import ConfigError, DrainFailed
from venice_core.meta import MetadataStore
from venice_core.spark.submit import StreamJobRequest
from venice_core.streams import control
from venice_core.utils.waiting import poll_until

# What an upgrade may change (the new job's arguments); the pipeline keeps its store, region and source, and the
# new run starts from the drained offsets.
FIXED = {"name", "store", "region", "source_topic", "source_bootstrap", "starting_offsets"}
UPGRADABLE = frozenset(StreamJobRequest.__dataclass_fields__) - FIXED


@dataclass(frozen=True)
class DrainRequested:
    pipeline: str
    run_id: str
    uuid: str


def request_drain(
    config: ClusterConfig, meta: MetadataStore, name: str, timeout_seconds: float | None = None
) -> DrainRequested:
    """Write a drain notification for the pipeline's current run; refused unless that run is starting or
    running (a notification written while it starts drains it at start)."""
    status = control.pipeline_status(config, meta, name)
    if status.state not in streams.ACTIVE:
        raise ConfigError(f"stream pipeline '{name}' is not running ({status.state}): nothing to drain")
    notification = drain.write(meta, name, status.record.run_id, timeout_seconds)
    return DrainRequested(name, status.record.run_id, str(notification.uuid))


def drain_outcome(config: ClusterConfig, meta: MetadataStore, name: str, run_id: str) -> str | None:
    """`drained` (the run stopped cleanly and its job exited), `failed: <cause>`, or None while it drains."""
    status = control.pipeline_status(config, meta, name)
    if status.record.run_id != run_id:
        return f"failed: the pipeline was started again meanwhile (run {status.record.run_id})"
    if status.state == streams.DRAINED:  # stopped cleanly once its process has exited too
        return streams.DRAINED if status.pid is None else None
    if status.state in streams.ACTIVE:
        return None
    return f"failed: {status.state}" + (f": {status.cause}" if status.cause else "")


def upgraded_request(
    meta: MetadataStore, config: ClusterConfig, name: str, args: Mapping[str, Any]
) -> StreamJobRequest:
    """The new deployment's request: what the pipeline last ran with, the new job's arguments over it."""
    unknown = sorted(set(args) - UPGRADABLE)
    if unknown:
        raise ConfigError(f"an upgrade cannot set {', '.join(unknown)} (one of {', '.join(sorted(UPGRADABLE))})")
    streams.get_pipeline(meta, name)  # PipelineNotFound first
    return control.resolve_request(meta, config, name, None, None, None, None, **dict(args))


def start_upgraded(
    config: ClusterConfig,
    meta: MetadataStore,
    name: str,
    args: Mapping[str, Any],
    progress: Callable[[str], None] = lambda _line: None,
) -> str:
    """Start the new deployment after a clean drain; its run id."""
    record = streams.get_pipeline(meta, name)
    if record.state != streams.DRAINED:
        raise ConfigError(f"stream pipeline '{name}' has not drained ({record.state}): not starting a new run")
    request = upgraded_request(meta, config, name, args)
    status = control.start(config, meta, request, wait=False, progress=progress)
    return status.record.run_id


def consuming(config: ClusterConfig, meta: MetadataStore, name: str, run_id: str) -> bool:
    """True once the run's query runs; StreamFailed if it failed or another run replaced it."""
    status = control.pipeline_status(config, meta, name)
    if status.record.run_id != run_id:
        raise control.StreamFailed(f"stream pipeline '{name}' was started again (run {status.record.run_id})")
    if status.state in (streams.FAILED, streams.STOPPED):
        raise control.StreamFailed(f"stream {name} {status.state}: {status.cause or 'stopped'}")
    return status.state == streams.RUNNING


def _until(what: str, check: Callable[[], Any], timeout: float, interval: float = 0.5) -> Any:
    return poll_until(
        check,
        timeout=timeout,
        interval=interval,
        timeout_error=lambda _: DrainFailed(f"{what} did not happen within {timeout:.0f}s"),
    )


def run_local(
    config: ClusterConfig,
    meta: MetadataStore,
    name: str,
    timeout_seconds: float | None = None,
    upgrade_args: Mapping[str, Any] | None = None,
    progress: Callable[[str], None] = print,
    wait_seconds: float = 600.0,
) -> str:
    """`venice stream drain` (`upgrade_args` None) or `upgrade` in this process, the DAG's steps in order: the
    drained run's id, or the new run's."""
    requested = request_drain(config, meta, name, timeout_seconds)
    progress(f"drain of {name} requested (run {requested.run_id}, notification {requested.uuid})")
    outcome = _until(f"the drain of {name}", lambda: drain_outcome(config, meta, name, requested.run_id), wait_seconds)
    if outcome != streams.DRAINED:
        raise DrainFailed(f"drain of {name} {outcome}")
    progress(f"{name} drained (run {requested.run_id})")
    if upgrade_args is None:
        return requested.run_id
    run_id = start_upgraded(config, meta, name, upgrade_args, progress)
    _until(f"the new run of {name} consuming", lambda: consuming(config, meta, name, run_id), wait_seconds)
    progress(f"{name} upgraded: run {run_id} consuming")
    return run_id


def describe_drain(report: Mapping[str, Any] | None) -> str:
    """One line of a drain's record (`spark.jobs.stream_drain.DrainReport`)."""
    if not report:
        return "never drained"
    outcome = report.get("outcome")
    if outcome != "drained":
        return str(outcome)
    return (
        f"offsets {report.get('offsets')} at batch {report.get('last_batch')} in {report.get('total_s')}s "
        f"(waited {report.get('waited_for_batch_s')}s for the batch in flight, "
        f"{report.get('processing_s')}s to the cut, {report.get('committing_s')}s to commit and stop)"
    )
