"""Streaming pipelines in the metadata store: what `venice stream` starts and stops, and what the running job
reports (its state, Spark's query id, the last batch and the source offsets it reached, why it failed).

Every start is a new run (`run_id`); the job's own updates name their run and are ignored once another run has
started, so a job that outlives its run (a stop that raced it) cannot overwrite the state of the next one.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from sqlalchemy import select

from venice_core.controller.stores import check_name
from venice_core.errors import VeniceError
from venice_core.meta.db import MetadataStore
from venice_core.meta.models import StreamPipeline


class PipelineState(StrEnum):
    STARTING = "starting"
    RUNNING = "running"
    STOPPED = "stopped"
    FAILED = "failed"
    # Stopped cleanly by a drain: everything up to the cut processed, windows fired, committed, notification gone.
    DRAINED = "drained"


STARTING, RUNNING, STOPPED, FAILED, DRAINED = PipelineState  # the states by name: `streams.RUNNING`
ACTIVE = frozenset({STARTING, RUNNING})


class PipelineNotFound(VeniceError):
    http_status = 404

    def __init__(self, name: str) -> None:
        super().__init__(f"unknown stream pipeline '{name}'")


class PipelineConflict(VeniceError):
    http_status = 409


@dataclass(frozen=True)
class PipelineRecord:
    """A pipeline as the metadata store has it (the typed read model)."""

    name: str
    store: str
    region: str
    source_topic: str
    args: dict[str, Any]
    state: PipelineState
    run_id: str
    query_id: str | None = None
    last_error: str | None = None
    offsets: dict[str, int] = field(default_factory=dict)
    last_batch_id: int | None = None
    started_at: float = 0.0
    updated_at: float = 0.0
    drain: dict[str, Any] | None = None  # the last drain: cut, phases, outcome (`spark.jobs.stream_drain`)


def _record(row: StreamPipeline) -> PipelineRecord:
    return PipelineRecord(
        row.name,
        row.store_name,
        row.region,
        row.source_topic,
        dict(row.args or {}),
        PipelineState(row.state),
        row.run_id,
        row.query_id,
        row.last_error,
        {str(k): int(v) for k, v in (row.offsets or {}).items()},
        row.last_batch_id,
        row.started_at,
        row.updated_at,
        dict(row.drain) if row.drain else None,
    )


def validate_pipeline_name(name: str) -> str:
    """A store name's rule: the name is also a directory under the data dir."""
    return check_name("pipeline", name)


def new_run(
    meta: MetadataStore, name: str, store: str, region: str, source_topic: str, args: dict[str, Any]
) -> PipelineRecord:
    """Record a start of the pipeline (created on its first start) with a new run id, state STARTING. A pipeline
    keeps its store, region and source topic for life: its checkpoint holds offsets of that topic, and its writes
    go to that store."""
    validate_pipeline_name(name)
    with meta.session() as session:
        row = session.get(StreamPipeline, name, with_for_update=True)
        if row is None:
            row = StreamPipeline(name=name, store_name=store, region=region, source_topic=source_topic, offsets={})
            session.add(row)
        elif (row.store_name, row.region, row.source_topic) != (store, region, source_topic):
            raise PipelineConflict(
                f"stream pipeline '{name}' writes store '{row.store_name}' in {row.region} from topic "
                f"'{row.source_topic}': a pipeline keeps its store, region and source topic"
            )
        row.args = dict(args)
        row.state = STARTING
        row.run_id = uuid.uuid4().hex
        row.last_error = None
        session.flush()
        return _record(row)


def _current(session: Any, name: str, run_id: str) -> StreamPipeline | None:
    row = session.get(StreamPipeline, name, with_for_update=True)
    return row if row is not None and row.run_id == run_id else None


def record_running(meta: MetadataStore, name: str, run_id: str, query_id: str) -> bool:
    """The run's query started. False if the run is no longer the pipeline's current one."""
    with meta.session() as session:
        row = _current(session, name, run_id)
        if row is None:
            return False
        row.state, row.query_id, row.last_error = RUNNING, query_id, None
        return True


def record_batch(meta: MetadataStore, name: str, run_id: str, batch_id: int, offsets: dict[str, int]) -> bool:
    """A micro-batch written: the source offsets it reached (partition -> next offset; partitions it did not read
    keep theirs)."""
    with meta.session() as session:
        row = _current(session, name, run_id)
        if row is None:
            return False
        row.offsets = {**(row.offsets or {}), **{str(k): int(v) for k, v in offsets.items()}}
        row.last_batch_id = batch_id
        return True


def record_drain(
    meta: MetadataStore,
    name: str,
    run_id: str,
    drain: dict[str, Any],
    state: PipelineState | None = None,
    error: str | None = None,
    offsets: dict[str, int] | None = None,
) -> bool:
    """The run's drain as it stands (requested, drained, timed out), and with it, once it ends, the run's state
    (DRAINED, or FAILED and why) and the offsets it reached."""
    with meta.session() as session:
        row = _current(session, name, run_id)
        if row is None:
            return False
        row.drain = dict(drain)
        if state is not None:
            row.state, row.last_error = state, error
        if offsets is not None:
            row.offsets = {**(row.offsets or {}), **{str(k): int(v) for k, v in offsets.items()}}
        return True


def record_failure(meta: MetadataStore, name: str, run_id: str, error: str) -> bool:
    with meta.session() as session:
        row = _current(session, name, run_id)
        if row is None:
            return False
        row.state, row.last_error = FAILED, error
        return True


def record_stopped(meta: MetadataStore, name: str, run_id: str | None = None) -> bool:
    """Stopped on request (`venice stream stop`): any run, or only `run_id`'s."""
    with meta.session() as session:
        row = session.get(StreamPipeline, name, with_for_update=True)
        if row is None or (run_id is not None and row.run_id != run_id):
            return False
        row.state = STOPPED
        return True


def get_pipeline(meta: MetadataStore, name: str) -> PipelineRecord:
    with meta.session() as session:
        row = session.get(StreamPipeline, name)
        if row is None:
            raise PipelineNotFound(name)
        return _record(row)


def find_pipeline(meta: MetadataStore, name: str) -> PipelineRecord | None:
    try:
        return get_pipeline(meta, name)
    except PipelineNotFound:
        return None


def list_pipelines(meta: MetadataStore) -> list[PipelineRecord]:
    with meta.session() as session:
        return [_record(row) for row in session.scalars(select(StreamPipeline).order_by(StreamPipeline.name))]
