"""SQLAlchemy 2 models of the metadata store. A schema change is a new Alembic migration beside these."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any, ClassVar

from sqlalchemy import JSON, BigInteger, Boolean, Float, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from venice_core.model.hybrid import DEFAULT_OFFSET_LAG_THRESHOLD, HybridSettings
from venice_core.protocol.partitioner_config import PartitionerConfig
from venice_core.schedules.push import PushSchedule
from venice_core.schedules.repush import RepushSchedule


def now() -> float:
    return time.time()


class Base(DeclarativeBase):
    pass


class Store(Base):
    __tablename__ = "stores"

    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    key_schema: Mapped[str] = mapped_column(Text)
    partition_count: Mapped[int] = mapped_column(Integer)
    compression: Mapped[str] = mapped_column(String(32), default="NO_OP")
    rollout_order: Mapped[list[str]] = mapped_column(JSON)
    auto_register_schemas: Mapped[bool] = mapped_column(Boolean, default=False)
    versions_to_preserve: Mapped[int] = mapped_column(Integer, default=2)
    hook_configs: Mapped[dict[str, str]] = mapped_column(JSON, default=dict)
    largest_used_version: Mapped[int] = mapped_column(Integer, default=0)
    # Hybrid (nearline writes through real-time topics) when the rewind is set; see `venice_core.model.hybrid`.
    hybrid_rewind_seconds: Mapped[int | None] = mapped_column(Integer, nullable=True)
    hybrid_offset_lag_threshold: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # A scheduled repush (`venice_core.schedules.repush`); NULL: none.
    repush_schedule: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    # A scheduled push (`venice_core.schedules.push`); NULL: none.
    push_schedule: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    # Replicas of every partition in each region (None: min(2, the region's instances)).
    replication_factor: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # `partitioner.class` and `partitioner.params` (`PartitionerConfig.to_json`); NULL: the default partitioner.
    partitioner_config: Mapped[dict[str, Any] | None] = mapped_column("partitioner", JSON, nullable=True)
    created_at: Mapped[float] = mapped_column(Float, default=now)
    updated_at: Mapped[float] = mapped_column(Float, default=now, onupdate=now)

    @property
    def partitioner(self) -> PartitionerConfig:
        return PartitionerConfig.of(self.partitioner_config)

    @property
    def repush(self) -> RepushSchedule | None:
        return RepushSchedule.of(self.repush_schedule)

    @property
    def push(self) -> PushSchedule | None:
        return PushSchedule.of(self.push_schedule)

    @property
    def hybrid(self) -> HybridSettings | None:
        if self.hybrid_rewind_seconds is None:
            return None
        threshold = self.hybrid_offset_lag_threshold
        return HybridSettings(
            self.hybrid_rewind_seconds, DEFAULT_OFFSET_LAG_THRESHOLD if threshold is None else threshold
        )


class StoreReader(Base):
    """A principal that may read a store from the region servers (`venice store acl grant STORE --principal P
    --read`); the platform's own principals read every store."""

    __tablename__ = "store_readers"

    store_name: Mapped[str] = mapped_column(ForeignKey("stores.name", ondelete="CASCADE"), primary_key=True)
    principal: Mapped[str] = mapped_column(String(255), primary_key=True)
    granted_at: Mapped[float] = mapped_column(Float, default=now)


class ValueSchema(Base):
    __tablename__ = "value_schemas"

    store_name: Mapped[str] = mapped_column(ForeignKey("stores.name", ondelete="CASCADE"), primary_key=True)
    schema_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    schema: Mapped[str] = mapped_column(Text)
    created_at: Mapped[float] = mapped_column(Float, default=now)


@dataclass(frozen=True)
class VersionLifecycle:
    """What a version's `details` (a JSON column) records of its push, typed: the regions it was created for,
    why it stopped, whether its push is over (and whether it ended short of its rollout), people's swap
    decisions, END_OF_PUSH's record counts, the regions whose Da Vinci clients may ingest it, the regions whose Da Vinci
    clients may serve it (ahead of the region's servers: when the rollout let them), and the hybrid settings and
    partitioner it was created with (None: batch-only; the default partitioner)."""

    regions: tuple[str, ...] = ()
    reason: str = ""
    finished: bool = False
    stopped: bool = False  # the push ended short of its rollout (an ABORT, a ROLLBACK, a failure)
    approvals: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    record_counts: Mapping[str, int] | None = None
    da_vinci_regions: tuple[str, ...] = ()
    da_vinci_swaps: Mapping[str, float] = field(default_factory=dict)  # region -> when its clients were let swap
    hybrid: HybridSettings | None = None
    job_confs: Mapping[str, str] = field(default_factory=dict)  # pinned at creation (a repush's source, end offsets)
    operator_stop: Mapping[str, str] = field(default_factory=dict)  # an operator's ABORT or ROLLBACK: outcome, by
    partitioner: PartitionerConfig = field(default_factory=PartitionerConfig)  # pinned at creation, as the partitions

    @classmethod
    def of(cls, details: Mapping[str, Any] | None) -> VersionLifecycle:
        d = details or {}
        return cls(
            tuple(d.get("regions") or ()),
            str(d.get("reason", "")),
            bool(d.get("finished", False)),
            bool(d.get("stopped", False)),
            dict(d.get("approvals") or {}),
            d.get("record_counts"),
            tuple(d.get("da_vinci_regions") or ()),
            {str(r): float(t) for r, t in (d.get("da_vinci_swaps") or {}).items()},
            HybridSettings.of(d.get("hybrid")),
            dict(d.get("job_confs") or {}),
            dict(d.get("operator_stop") or {}),
            PartitionerConfig.of(d.get("partitioner")),
        )

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["regions"], data["da_vinci_regions"] = list(self.regions), list(self.da_vinci_regions)
        data["da_vinci_swaps"] = dict(self.da_vinci_swaps)
        data["hybrid"] = None if self.hybrid is None else self.hybrid.to_json()
        data["partitioner"] = None if self.partitioner.is_default else self.partitioner.to_json()
        return {k: v for k, v in data.items() if v not in (None, "", False, (), [], {})}


class Version(Base):
    """An immutable store-version: one push's data, in one version topic per region."""

    __tablename__ = "versions"

    store_name: Mapped[str] = mapped_column(ForeignKey("stores.name", ondelete="CASCADE"), primary_key=True)
    number: Mapped[int] = mapped_column(Integer, primary_key=True)
    status: Mapped[str] = mapped_column(String(32))
    partition_count: Mapped[int] = mapped_column(Integer)
    compression: Mapped[str] = mapped_column(String(32))
    push_job_id: Mapped[str | None] = mapped_column(String(128), nullable=True)
    details: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[float] = mapped_column(Float, default=now)
    updated_at: Mapped[float] = mapped_column(Float, default=now, onupdate=now)

    @property
    def lifecycle(self) -> VersionLifecycle:
        return VersionLifecycle.of(self.details)

    def update_lifecycle(self, **changes: Any) -> None:
        """Change recorded lifecycle fields (assigning a new dict, so SQLAlchemy sees the JSON column change). The whole
        column is rewritten: its writers read the row in a locked session (`MetadataStore.locked_session`), so two of
        them never lose each other's changes."""
        self.details = replace(self.lifecycle, **changes).to_json()


class VersionRegionStatus(Base):
    """A version's push status in one region, with the time it last changed (VIP-4's job status extension)."""

    __tablename__ = "version_region_status"

    store_name: Mapped[str] = mapped_column(String(128), primary_key=True)
    number: Mapped[int] = mapped_column(Integer, primary_key=True)
    region: Mapped[str] = mapped_column(String(64), primary_key=True)
    status: Mapped[str] = mapped_column(String(32))
    details: Mapped[str] = mapped_column(Text, default="")
    updated_at: Mapped[float] = mapped_column(Float, default=now)


class RegionCurrentVersion(Base):
    """Which version a region serves (current) and keeps for rollback (backup)."""

    __tablename__ = "region_current_version"

    store_name: Mapped[str] = mapped_column(ForeignKey("stores.name", ondelete="CASCADE"), primary_key=True)
    region: Mapped[str] = mapped_column(String(64), primary_key=True)
    current_version: Mapped[int] = mapped_column(Integer, default=0)
    backup_version: Mapped[int] = mapped_column(Integer, default=0)
    updated_at: Mapped[float] = mapped_column(Float, default=now, onupdate=now)


class PartitionStatus(Base):
    """Ingestion progress of one partition of a version in one region, reported by that region's server."""

    __tablename__ = "partition_status"

    UNANNOUNCED: ClassVar[frozenset[str]] = frozenset(
        {"offset", "records", "details", "updated_at"}
    )  # progress only: not synced (`meta.db._announced`)
    store_name: Mapped[str] = mapped_column(String(128), primary_key=True)
    number: Mapped[int] = mapped_column(Integer, primary_key=True)
    region: Mapped[str] = mapped_column(String(64), primary_key=True)
    partition: Mapped[int] = mapped_column(Integer, primary_key=True)
    status: Mapped[str] = mapped_column(String(32))
    offset: Mapped[int] = mapped_column(Integer, default=-1)
    records: Mapped[int] = mapped_column(Integer, default=0)
    details: Mapped[str] = mapped_column(Text, default="")
    updated_at: Mapped[float] = mapped_column(Float, default=now)


class HookInvocationRecord(Base):
    """One call of one hook function, with its outcome and timings (VIP-4's metrics are computed from these)."""

    __tablename__ = "hook_invocations"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    store_name: Mapped[str] = mapped_column(String(128), index=True)
    version: Mapped[int | None] = mapped_column(Integer, nullable=True)
    push_job_id: Mapped[str | None] = mapped_column(String(128), nullable=True)
    hook_class: Mapped[str] = mapped_column(String(256))
    function: Mapped[str] = mapped_column(String(64))
    region: Mapped[str | None] = mapped_column(String(64), nullable=True)
    outcome: Mapped[str | None] = mapped_column(String(16), nullable=True)
    reason: Mapped[str] = mapped_column(Text, default="")
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    timed_out: Mapped[bool] = mapped_column(Boolean, default=False)
    # An outcome the function may not return (WAIT or ROLLBACK from a PROCEED/ABORT-only one), if the hook did.
    invalid_outcome: Mapped[str | None] = mapped_column(String(16), nullable=True)
    queue_wait_seconds: Mapped[float] = mapped_column(Float)
    duration_seconds: Mapped[float] = mapped_column(Float)
    created_at: Mapped[float] = mapped_column(Float, default=now)


class DaVinciInstance(Base):
    """A Da Vinci client materialising a store in one region: its heartbeat, the newest version it has ingested and
    the version it serves. The rollout lets a region's clients swap to a new version, and waits for the live ones to
    serve it, before the region's servers swap (VIP-4's Da Vinci steps)."""

    __tablename__ = "da_vinci_instances"

    store_name: Mapped[str] = mapped_column(ForeignKey("stores.name", ondelete="CASCADE"), primary_key=True)
    region: Mapped[str] = mapped_column(String(64), primary_key=True)
    instance_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    version: Mapped[int] = mapped_column(Integer, default=0)
    status: Mapped[str] = mapped_column(String(32), default="")
    serving: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    heartbeat_at: Mapped[float] = mapped_column(Float, default=now)


class EndedPushJob(Base):
    """A push job that has ended, with or without a version: its rollout run, cleared in Airflow afterwards, runs
    nothing of the push again (`controller.push_jobs`)."""

    __tablename__ = "ended_push_jobs"

    push_job_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    store_name: Mapped[str] = mapped_column(String(128), index=True)
    reason: Mapped[str] = mapped_column(Text, default="", server_default="")
    ended_at: Mapped[float] = mapped_column(Float, default=now)


class StreamPipeline(Base):
    """A nearline streaming pipeline (`venice stream start`): a Spark Structured Streaming job writing a source
    topic's events to a store's real-time topic in one region. Its name is the namespace of what belongs to it (its
    data dir, its drain notifications); every start gets a new `run_id`, and the job's own updates name the run they
    come from, so a run that is no longer current cannot overwrite the state of the one after it."""

    __tablename__ = "stream_pipelines"

    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    store_name: Mapped[str] = mapped_column(String(128))
    region: Mapped[str] = mapped_column(String(64))
    source_topic: Mapped[str] = mapped_column(String(255))
    args: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)  # the job's settings (`spark.jobs.stream`)
    state: Mapped[str] = mapped_column(String(16))  # starting, running, stopped, failed
    run_id: Mapped[str] = mapped_column(String(64))
    query_id: Mapped[str | None] = mapped_column(String(64), nullable=True)  # Spark's, kept in the checkpoint
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    offsets: Mapped[dict[str, int]] = mapped_column(JSON, default=dict)  # source partition -> next offset to read
    last_batch_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    started_at: Mapped[float] = mapped_column(Float, default=now)
    updated_at: Mapped[float] = mapped_column(Float, default=now, onupdate=now)
    # The last drain of the pipeline (`controller.drain.DrainOutcome` as JSON): its cut, phases and outcome.
    drain: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)


class DrainNotificationRecord(Base):
    """A drain notification (`controller.drain.DrainNotification`, serialised as the seed writes it to its
    coordinator stream), namespaced by pipeline. Deleted only after the run it names has stopped cleanly."""

    __tablename__ = "drain_notifications"

    uuid: Mapped[str] = mapped_column(String(36), primary_key=True)
    pipeline: Mapped[str] = mapped_column(String(128), index=True)
    payload: Mapped[str] = mapped_column(Text)  # DrainNotification.to_json()
    # How long the drain may take once the job sees it (None: the job's default); the request's, not the seed's.
    timeout_seconds: Mapped[float | None] = mapped_column(Float, nullable=True)
    created_at: Mapped[float] = mapped_column(Float, default=now)


class RegionInstance(Base):
    """A region-server instance's registration, and its lease on it: `owner` is the running process's token, renewed
    (`heartbeat_at`) every second by an UPDATE that names the owner. A start while another owner's lease runs is
    refused; a lease that ran out is taken over (the process is gone, or paused past it)."""

    __tablename__ = "region_instances"

    region: Mapped[str] = mapped_column(String(64), primary_key=True)
    instance: Mapped[int] = mapped_column(Integer, primary_key=True)
    host: Mapped[str] = mapped_column(String(255))
    port: Mapped[int] = mapped_column(Integer)
    owner: Mapped[str] = mapped_column(String(255))
    pid: Mapped[int] = mapped_column(Integer, default=0)
    started_at: Mapped[float] = mapped_column(Float, default=now)
    heartbeat_at: Mapped[float] = mapped_column(Float, default=now)
    # Partitions whose data the instance has on disk without holding them (["store/version/partition", ...]): the
    # coordinator places replicas there first, so a restarted instance resumes from its checkpoints.
    spare: Mapped[list[str]] = mapped_column(JSON, default=list)


class Replica(Base):
    """One replica of a partition of a version in a region: where the controller placed it (`placement`), and its
    ingestion status as the instance holding it reports it."""

    __tablename__ = "replicas"
    __table_args__ = (Index("ix_replicas_region_instance", "region", "instance"),)

    UNANNOUNCED: ClassVar[frozenset[str]] = frozenset(
        {"offset", "records", "details", "updated_at"}
    )  # progress only: not synced (`meta.db._announced`)
    store_name: Mapped[str] = mapped_column(String(128), primary_key=True)
    number: Mapped[int] = mapped_column(Integer, primary_key=True)
    region: Mapped[str] = mapped_column(String(64), primary_key=True)
    partition: Mapped[int] = mapped_column(Integer, primary_key=True)
    instance: Mapped[int] = mapped_column(Integer, primary_key=True)
    status: Mapped[str] = mapped_column(String(32), default="NEW")
    offset: Mapped[int] = mapped_column(Integer, default=-1)
    records: Mapped[int] = mapped_column(Integer, default=0)
    details: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[float] = mapped_column(Float, default=now)
    updated_at: Mapped[float] = mapped_column(Float, default=now)


class PartitionLeader(Base):
    """The replica leading a partition in a region, and its epoch: a new leader is a new epoch. `progress` is how far
    the leader's replication has been acknowledged in the local version topic (a source offset): a new leader
    resumes from it."""

    __tablename__ = "partition_leaders"

    UNANNOUNCED: ClassVar[frozenset[str]] = frozenset(
        {"progress", "updated_at"}
    )  # progress only: not synced (`meta.db._announced`)
    store_name: Mapped[str] = mapped_column(String(128), primary_key=True)
    number: Mapped[int] = mapped_column(Integer, primary_key=True)
    region: Mapped[str] = mapped_column(String(64), primary_key=True)
    partition: Mapped[int] = mapped_column(Integer, primary_key=True)
    instance: Mapped[int] = mapped_column(Integer)
    epoch: Mapped[int] = mapped_column(Integer, default=1)
    progress: Mapped[int] = mapped_column(Integer, default=0)
    replicated: Mapped[bool] = mapped_column(Boolean, default=False)  # END_OF_PUSH copied and acknowledged
    updated_at: Mapped[float] = mapped_column(Float, default=now)


class RegionCoordinator(Base):
    """Which instance places replicas and picks leaders in a region: a lease, taken by a conditional UPDATE (the
    holder's own, or one that ran out), as Airflow's HA schedulers coordinate through their database."""

    __tablename__ = "region_coordinators"

    region: Mapped[str] = mapped_column(String(64), primary_key=True)
    owner: Mapped[str] = mapped_column(String(255))
    instance: Mapped[int] = mapped_column(Integer)
    expires_at: Mapped[float] = mapped_column(Float)


class MetadataGeneration(Base):
    """One row whose number every committed change bumps, but a lease's renewal (`db.TrackedSession`): a region
    server reads the rest of the metadata store only when it moved (or an instance came or went), rather than every
    second."""

    __tablename__ = "metadata_generation"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    generation: Mapped[int] = mapped_column(BigInteger, default=0)
