"""Version lifecycle: create, report and aggregate status, swap, roll back, kill, retire.

Every function is one transaction on the metadata store. Topic creation and deletion go through a `TopicAdmin`,
Kafka's (`pubsub.admin`) unless the caller passes another.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from venice_core.config import ClusterConfig
from venice_core.controller import da_vinci, push_jobs
from venice_core.controller.stores import get_store
from venice_core.errors import VeniceError
from venice_core.meta import MetadataStore
from venice_core.meta.db import retry_on_conflict, rows_matched
from venice_core.meta.models import (
    PartitionLeader,
    PartitionStatus,
    RegionCurrentVersion,
    Replica,
    Store,
    Version,
    VersionLifecycle,
    VersionRegionStatus,
)
from venice_core.model.hybrid import HybridSettings
from venice_core.model.status import IN_FLIGHT, ExecutionStatus, JobStatus, RegionJobStatus, VersionStatus, aggregate
from venice_core.protocol.compression import CompressionStrategy
from venice_core.protocol.partitioner_config import PartitionerConfig
from venice_core.pubsub import acls, admin
from venice_core.pubsub.admin import TopicAdmin


class PushInProgress(VeniceError):
    http_status = 409


class VersionNotFound(VeniceError):
    http_status = 404


class PushStopped(VeniceError):
    """A step of a push that is already over, or a swap to a version that was superseded: final."""

    http_status = 409
    retryable = False


class NoBackupVersion(VeniceError):
    """A rollback asked of a region that keeps no version to go back to."""

    http_status = 409


def _version_in_flight(session: Any, store_name: str) -> int | None:
    # A push is in flight from version creation until it finishes: while its regions swap one by one the
    # version is PARTIALLY_ONLINE, and still in flight.
    candidates = session.scalars(
        select(Version).where(
            Version.store_name == store_name,
            Version.status.in_([*IN_FLIGHT, VersionStatus.PARTIALLY_ONLINE]),
        )
    )
    return next((v.number for v in candidates if v.status in IN_FLIGHT or not push_finished(v)), None)


def version_of_push(meta: MetadataStore, store_name: str, push_job_id: str) -> Version | None:
    """The version this push job created, while its push is still in flight: a re-run step (after a crash or
    a restart) resumes with it instead of creating another."""
    with meta.session() as session:
        number = _version_in_flight(session, store_name)
        version = session.get(Version, (store_name, number)) if number is not None else None
        return version if version is not None and version.push_job_id == push_job_id else None


def version_in_flight(meta: MetadataStore, store_name: str) -> int | None:
    """The version whose push is in flight, if any."""
    with meta.session() as session:
        return _version_in_flight(session, store_name)


def create_version(
    meta: MetadataStore,
    config: ClusterConfig,
    store_name: str,
    push_job_id: str,
    regions: list[str] | None = None,
    topics: TopicAdmin = admin,
    rewind_seconds: int | None = None,
    replay_after_ms: int | None = None,
    job_confs: dict[str, str] | None = None,
) -> Version:
    """Reserve the next version number (refused while another push of the store is in flight), record it as
    STARTED, and create its topic in every region. `rewind_seconds`: the version's real-time rewind instead of the
    store's, if the store is hybrid (a repush of a hybrid version rewinds a day); `replay_after_ms`: its replay
    starts after this time whatever the rewind (a TTL repush's cut-off); `job_confs`: the confs its job runs with,
    kept so a re-run step runs the job alike (a repush's source and end offsets)."""
    target_regions = regions or list(config.region_names)
    with meta.session() as session:
        store = get_store(session, store_name)
        in_flight = _version_in_flight(session, store_name)
        if in_flight is not None:
            raise PushInProgress(f"a push of '{store_name}' is already in progress (version {in_flight})")
        number = store.largest_used_version + 1
        # Optimistic concurrency: only one of two concurrent pushes moves largest_used_version.
        result = session.execute(
            update(Store)
            .where(Store.name == store_name, Store.largest_used_version == store.largest_used_version)
            .values(largest_used_version=number)
        )
        if rows_matched(result) != 1:
            raise PushInProgress(f"another push of '{store_name}' started at the same time")
        version = Version(
            store_name=store_name,
            number=number,
            status=VersionStatus.STARTED,
            partition_count=store.partition_count,
            compression=store.compression,
            push_job_id=push_job_id,
            details=VersionLifecycle(
                regions=tuple(target_regions),
                hybrid=_hybrid_of(store, rewind_seconds, replay_after_ms),
                job_confs=dict(job_confs or {}),
                partitioner=store.partitioner,  # pinned as the partition count is: every writer and reader agrees
            ).to_json(),
        )
        session.add(version)
        for region in target_regions:
            session.add(
                VersionRegionStatus(
                    store_name=store_name,
                    number=number,
                    region=region,
                    status=ExecutionStatus.NEW,
                    details="",
                    updated_at=time.time(),
                )
            )
    # The source region's topic always (the push writes there, other regions replicate from it); every region's at
    # once: each waits for its partitions' leaders.
    try:
        placed = [config.region(region) for region in dict.fromkeys([config.source_region, *target_regions])]
        if config.security.enabled:  # who writes the topics (the store's push job, each region's leaders), before
            acls.grant_version(config, store_name, number, placed)  # any of them finds a topic to write
        with ThreadPoolExecutor(max_workers=len(placed), thread_name_prefix="create-topic") as pool:
            created = [
                pool.submit(
                    topics.create_topic,
                    region.kafka_bootstrap,
                    region.version_topic(store_name, number),
                    version.partition_count,
                    region.replication_factor,
                    region.min_insync_replicas,
                )
                for region in placed
            ]
            for done in created:
                done.result()
    except VeniceError as exc:
        set_version_status(meta, store_name, number, VersionStatus.ERROR, f"topic creation failed: {exc}")
        raise
    return version


def _hybrid_of(store: Store, rewind_seconds: int | None, replay_after_ms: int | None) -> HybridSettings | None:
    hybrid = store.hybrid
    if hybrid is None:
        return None
    rewind = hybrid.rewind_seconds if rewind_seconds is None else rewind_seconds
    return HybridSettings(rewind, hybrid.offset_lag_threshold, replay_after_ms)


def get_version(meta: MetadataStore, store_name: str, number: int) -> Version:
    with meta.session() as session:
        version = session.get(Version, (store_name, number))
        if version is None:
            raise VersionNotFound(f"store '{store_name}' has no version {number}")
        return version


def set_version_status(
    meta: MetadataStore, store_name: str, number: int, status: VersionStatus, reason: str = ""
) -> None:
    with meta.locked_session() as session:
        version = _locked_version(session, store_name, number)
        version.status = status
        if reason:
            version.update_lifecycle(reason=reason)


def kill_push(meta: MetadataStore, store_name: str, number: int, reason: str) -> None:
    """Stop an in-flight push: region servers drop the version; regions keep serving what they served."""
    with meta.locked_session() as session:
        version = _locked_version(session, store_name, number)
        version.status = VersionStatus.KILLED
        _finished(session, version, reason, stopped=True)


def stop_push(meta: MetadataStore, store_name: str, number: int, reason: str) -> None:
    """End a push that will not finish its rollout. Regions already serving the version keep it: it is ONLINE
    where every region of it serves it (a stop at the very end), else PARTIALLY_ONLINE; if none serves it, it is
    KILLED (servers drop it). Either way another push may start, and the stop and its reason are recorded. One
    transaction that serialises with `swap_region`: a swap is either seen here, or finds the push over."""
    with meta.locked_session() as session:
        version = _locked_version(session, store_name, number)
        serving = set(_regions_serving(session, store_name, number))
        if not serving:
            version.status = VersionStatus.KILLED
        elif set(version.lifecycle.regions) <= serving:
            version.status = VersionStatus.ONLINE
        else:
            version.status = VersionStatus.PARTIALLY_ONLINE
        _finished(session, version, reason, stopped=True)


def end_push_job(meta: MetadataStore, store_name: str, push_job_id: str, reason: str) -> Version | None:
    """The push of `push_job_id` ends for `reason` wherever it got to (its Airflow run ended by an operator, or
    failed): its version's push is stopped if it goes on (`stop_push`), and a job that created no version is
    recorded ended (`push_jobs`). A push already over keeps its own end. Returns the version it stopped, if any."""
    row = version_of_push(meta, store_name, push_job_id)
    if row is None:
        push_jobs.end(meta, store_name, push_job_id, reason)
        return None
    if push_finished(row):
        return None
    stop_push(meta, store_name, row.number, reason)
    return row


def _locked_version(session: Session, store_name: str, number: int) -> Version:
    """The version's row, locked for this transaction (`MetadataStore.locked_session`)."""
    version = session.get(Version, (store_name, number), with_for_update=True)
    if version is None:
        raise VersionNotFound(f"store '{store_name}' has no version {number}")
    return version


def record_operator_stop(meta: MetadataStore, store_name: str, number: int, outcome: str, by: str) -> None:
    """An operator stops this version's push (`venice rollout abort`): recorded first, so that the orchestrator's
    run takes the stop's way at its next step whatever it finds the version's state to be by then."""
    with meta.locked_session() as session:
        _locked_version(session, store_name, number).update_lifecycle(operator_stop={"outcome": outcome, "by": by})


def finish_push(meta: MetadataStore, store_name: str, number: int, stopped: bool = False, reason: str = "") -> None:
    """The push of this version is over (whatever its outcome): another push of the store may start, and no region
    swaps to it any more. `stopped`: it ended short of its rollout, for `reason` (recorded in the same write, so that
    a step beside it never sees the stop without its reason)."""
    with meta.locked_session() as session:
        version = session.get(Version, (store_name, number), with_for_update=True)
        if version is not None:
            _finished(session, version, reason or version.lifecycle.reason, stopped or version.lifecycle.stopped)


def _finished(session: Session, version: Version, reason: str, stopped: bool) -> None:
    """The version's push is over: recorded on it, and its push job recorded ended (`push_jobs`)."""
    version.update_lifecycle(reason=reason, finished=True, stopped=stopped)
    push_jobs.record_ended(session, version.store_name, version.push_job_id or "", reason)


def version_regions(version: Version) -> list[str]:
    """The regions a version was created for (those `pre_store_version_creation` admitted)."""
    return list(version.lifecycle.regions)


def push_finished(version: Version) -> bool:
    """Is the push of this version over (see `finish_push`)?"""
    return version.lifecycle.finished


def record_approval(
    meta: MetadataStore, store_name: str, number: int, region: str, approved: bool, by: str
) -> dict[str, Any]:
    """A person's decision on swapping `region` to this version (read by the ManualApproval hook)."""
    decision = {"approved": approved, "by": by, "at": time.time()}
    with meta.locked_session() as session:
        version = _locked_version(session, store_name, number)
        version.update_lifecycle(approvals={**version.lifecycle.approvals, region: decision})
    return decision


def approvals(meta: MetadataStore, store_name: str, number: int) -> dict[str, dict[str, Any]]:
    return {region: dict(d) for region, d in get_version(meta, store_name, number).lifecycle.approvals.items()}


@retry_on_conflict()
def report_partition(
    meta: MetadataStore,
    store_name: str,
    number: int,
    region: str,
    partition: int,
    status: ExecutionStatus,
    offset: int,
    records: int,
    details: str = "",
) -> None:
    """Record a partition's progress and recompute its region's status. Two reporters inserting the first row
    at once: the loser retries and updates the winner's row."""
    with meta.session() as session:
        _record_partition(session, store_name, number, region, partition, status, offset, records, details)


def _record_partition(
    session: Session,
    store_name: str,
    number: int,
    region: str,
    partition: int,
    status: ExecutionStatus,
    offset: int,
    records: int,
    details: str,
) -> None:
    # The version's row locked first: the reports of one version take turns. Each reads its siblings' statuses to
    # make its region's (a replica's, its partition's), and on PostgreSQL (read committed) two at once each missed
    # the other's: the last two partitions of a region COMPLETED together left the region PROGRESS for good.
    # (SQLite writes one at a time.)
    version = session.get(Version, (store_name, number), with_for_update=True)
    row = session.get(PartitionStatus, (store_name, number, region, partition))
    if row is None:
        session.add(
            PartitionStatus(
                store_name=store_name,
                number=number,
                region=region,
                partition=partition,
                status=status,
                offset=offset,
                records=records,
                details=details,
                updated_at=time.time(),
            )
        )
    else:
        row.status, row.offset, row.records, row.details = status, offset, records, details
        row.updated_at = time.time()
    session.flush()
    if version is None:
        return
    statuses = [
        ExecutionStatus(s)
        for s in session.scalars(
            select(PartitionStatus.status).where(
                PartitionStatus.store_name == store_name,
                PartitionStatus.number == number,
                PartitionStatus.region == region,
            )
        )
    ]
    statuses += [ExecutionStatus.NEW] * (version.partition_count - len(statuses))
    _set_region_status(
        session, store_name, number, region, aggregate(statuses), details if status is ExecutionStatus.ERROR else ""
    )


@retry_on_conflict()
def report_replica(
    meta: MetadataStore,
    store_name: str,
    number: int,
    region: str,
    partition: int,
    instance: int,
    status: ExecutionStatus,
    offset: int,
    records: int,
    details: str,
    min_ready: int,
) -> None:
    """Record one replica's progress, then its partition's status in the region as its replicas make it: COMPLETED
    once `min_ready` replicas are (Venice's ONLINE: the region may swap), ERROR if a replica failed before that,
    else as far as the replicas have got. A replica no longer placed (re-placed meanwhile) reports nothing."""
    with meta.session() as session:  # one transaction: a report read before another's can never be written after it
        # The version's row locked first, as `_record_partition` says: this reads the partition's other replicas.
        session.get(Version, (store_name, number), with_for_update=True)
        replica = session.get(Replica, (store_name, number, region, partition, instance))
        if replica is None:
            return
        replica.status, replica.offset, replica.records, replica.details = status, offset, records, details
        replica.updated_at = time.time()
        session.flush()
        rows = list(
            session.scalars(
                select(Replica).where(
                    Replica.store_name == store_name,
                    Replica.number == number,
                    Replica.region == region,
                    Replica.partition == partition,
                )
            )
        )
        statuses = [ExecutionStatus(r.status) for r in rows]
        ready = statuses.count(ExecutionStatus.COMPLETED)
        if ready >= min_ready:
            partition_status = ExecutionStatus.COMPLETED
        else:  # not enough ready: a ready replica counts as one past END_OF_PUSH, a missing one as NEW
            seen: list[ExecutionStatus] = [
                ExecutionStatus.END_OF_PUSH_RECEIVED if s is ExecutionStatus.COMPLETED else s for s in statuses
            ]
            partition_status = aggregate(seen + [ExecutionStatus.NEW] * max(0, min_ready - len(statuses)))
        failed = next((r.details for r in rows if r.status == ExecutionStatus.ERROR), "")
        best = max(rows, key=lambda r: (r.records, r.offset))
        _record_partition(
            session, store_name, number, region, partition, partition_status, best.offset, best.records, failed
        )


def _set_region_status(
    session: Any, store_name: str, number: int, region: str, status: ExecutionStatus, details: str
) -> None:
    row = session.get(VersionRegionStatus, (store_name, number, region))
    if row is None:
        session.add(
            VersionRegionStatus(
                store_name=store_name,
                number=number,
                region=region,
                status=status,
                details=details,
                updated_at=time.time(),
            )
        )
    elif row.status != status:  # the time a region's status last *changed* (VIP-4)
        row.status, row.details, row.updated_at = status, details, time.time()


def job_status(meta: MetadataStore, store_name: str, number: int) -> JobStatus:
    with meta.session() as session:
        version = session.get(Version, (store_name, number))
        if version is None:
            raise VersionNotFound(f"store '{store_name}' has no version {number}")
        rows = session.scalars(
            select(VersionRegionStatus).where(
                VersionRegionStatus.store_name == store_name, VersionRegionStatus.number == number
            )
        )
        current = {
            c.region: c
            for c in session.scalars(select(RegionCurrentVersion).where(RegionCurrentVersion.store_name == store_name))
        }
        swaps = version.lifecycle.da_vinci_swaps
        regions = {
            r.region: RegionJobStatus(
                ExecutionStatus(r.status),
                r.updated_at,
                r.details,
                serving=r.region in current and current[r.region].current_version == number,
                current_since=current[r.region].updated_at if r.region in current else None,
                da_vinci_swap_at=swaps.get(r.region),
                # Once the region's clients were let swap: the live ones that do not serve the version (yet).
                da_vinci_not_serving=tuple(da_vinci.not_serving(meta, store_name, r.region, number))
                if r.region in swaps
                else (),
            )
            for r in rows
        }
        return JobStatus(
            store_name, number, VersionStatus(version.status), aggregate([r.status for r in regions.values()]), regions
        )


def job_status_before_creation(meta: MetadataStore, store_name: str, number: int, regions: list[str]) -> JobStatus:
    """The job status `pre_store_version_creation` is asked with: version `number` does not exist yet, so every
    region is NOT_CREATED (as of now), with when its current version last changed."""
    now = time.time()
    with meta.session() as session:
        current = {
            c.region: c
            for c in session.scalars(select(RegionCurrentVersion).where(RegionCurrentVersion.store_name == store_name))
        }
        return JobStatus(
            store_name,
            number,
            VersionStatus.NOT_CREATED,
            ExecutionStatus.NOT_CREATED,
            {
                r: RegionJobStatus(
                    ExecutionStatus.NOT_CREATED, now, current_since=current[r].updated_at if r in current else None
                )
                for r in regions
            },
        )


def next_version_number(meta: MetadataStore, store_name: str) -> int:
    """The number the store's next version will get (`create_version` claims it)."""
    with meta.session() as session:
        return get_store(session, store_name).largest_used_version + 1


@dataclass(frozen=True)
class RegionProgress:
    """How far a region's ingestion of a version is: records ingested, of `total` (known once END_OF_PUSH's
    per-partition counts are recorded, else None)."""

    records: int
    total: int | None
    # Ready replicas of all the version's partitions in the region, of how many are placed: set where partitions have
    # more than one replica (0 and 0 otherwise).
    replicas_ready: int = 0
    replicas: int = 0

    @property
    def percent(self) -> float | None:
        if not self.total:
            return None if self.total is None else 100.0
        return min(100.0, 100.0 * self.records / self.total)


def record_push_counts(meta: MetadataStore, store_name: str, number: int, record_counts: dict[str, int]) -> None:
    """The per-partition record counts END_OF_PUSH carries, kept on the version so progress can be shown."""
    with meta.locked_session() as session:
        version = session.get(Version, (store_name, number), with_for_update=True)
        if version is not None:
            version.update_lifecycle(record_counts={str(k): int(v) for k, v in record_counts.items()})


def ingestion_progress(meta: MetadataStore, store_name: str, number: int) -> dict[str, RegionProgress]:
    """Per region of the version: records ingested (summed over its partitions) against END_OF_PUSH's total."""
    version = get_version(meta, store_name, number)
    counts = version.lifecycle.record_counts
    total = sum(counts.values()) if counts is not None else None
    regions = version.lifecycle.regions
    ingested = dict.fromkeys(regions, 0)
    for row in partition_progress(meta, store_name, number):
        ingested[row.region] = ingested.get(row.region, 0) + (row.records or 0)
    readiness = replica_readiness(meta, store_name, number)
    progress = {}
    for region, records in ingested.items():
        ready, placed = readiness.get(region, (0, 0))
        replicated = placed > version.partition_count
        progress[region] = RegionProgress(records, total, ready if replicated else 0, placed if replicated else 0)
    return progress


def replica_readiness(meta: MetadataStore, store_name: str, number: int) -> dict[str, tuple[int, int]]:
    """Per region: the version's ready replicas, and how many are placed."""
    readiness: dict[str, tuple[int, int]] = {}
    with meta.session() as session:
        rows = session.execute(
            select(Replica.region, Replica.status).where(Replica.store_name == store_name, Replica.number == number)
        )
        for region, status in rows:
            ready, placed = readiness.get(region, (0, 0))
            readiness[region] = (ready + (status == ExecutionStatus.COMPLETED), placed + 1)
    return readiness


def partition_progress(meta: MetadataStore, store_name: str, number: int) -> list[PartitionStatus]:
    with meta.session() as session:
        return list(
            session.scalars(
                select(PartitionStatus).where(
                    PartitionStatus.store_name == store_name, PartitionStatus.number == number
                )
            )
        )


def _current_row(session: Session, store_name: str, region: str) -> RegionCurrentVersion:
    row = session.get(RegionCurrentVersion, (store_name, region))
    if row is None:
        row = RegionCurrentVersion(store_name=store_name, region=region, current_version=0, backup_version=0)
        session.add(row)
    return row


def _refresh_version_statuses(session: Any, store: Store) -> None:
    """ONLINE where every region serves a version, PARTIALLY_ONLINE where some do."""
    serving: dict[int, int] = {}
    for row in session.scalars(select(RegionCurrentVersion).where(RegionCurrentVersion.store_name == store.name)):
        serving[row.current_version] = serving.get(row.current_version, 0) + 1
    for version in session.scalars(select(Version).where(Version.store_name == store.name)):
        count = serving.get(version.number, 0)
        regions = version.lifecycle.regions or store.rollout_order
        if count >= len(regions):
            version.status = VersionStatus.ONLINE
        elif count > 0:
            version.status = VersionStatus.PARTIALLY_ONLINE
        elif version.status in (VersionStatus.ONLINE, VersionStatus.PARTIALLY_ONLINE):
            version.status = VersionStatus.ONLINE  # no longer current anywhere: an ONLINE backup


def swap_region(meta: MetadataStore, store_name: str, region: str, number: int) -> None:
    """Make `number` the region's current version; the previous current becomes its backup. Serialised with the
    version's stops (`stop_push`, `kill_push`, `finish_push`): it swaps only a version whose push goes on."""
    with meta.locked_session() as session:
        store = get_store(session, store_name)
        version = session.get(Version, (store_name, number), with_for_update=True)
        if version is None:
            raise VersionNotFound(f"store '{store_name}' has no version {number}")
        if version.lifecycle.finished:  # stopped (or done) meanwhile, by a step beside this one: never swap it in
            raise PushStopped(f"the push of version {number} of '{store_name}' is over; {region} does not swap to it")
        status = session.get(VersionRegionStatus, (store_name, number, region))
        if status is None or status.status != ExecutionStatus.COMPLETED:
            raise VeniceError(f"version {number} of '{store_name}' is not fully ingested in {region}; cannot swap")
        row = _current_row(session, store_name, region)
        if row.current_version > number:  # superseded: a newer version serves (Venice never promotes one again)
            raise PushStopped(
                f"version {number} of '{store_name}' is older than version {row.current_version}, which {region} "
                "serves: it was superseded, and is never swapped in again"
            )
        if row.current_version != number:
            row.backup_version, row.current_version = row.current_version, number
        session.flush()
        _refresh_version_statuses(session, store)


def rollback_region(meta: MetadataStore, store_name: str, region: str, to_no_version: bool = False) -> int:
    """Serve the backup again; the version rolled back from is marked ROLLED_BACK once no region keeps it. Returns
    the version now served. Without a backup it refuses, unless `to_no_version`: then the region serves no version
    (0), as after a store's first version is rolled back, since a rolled-back version must never serve."""
    with meta.session() as session:
        store = get_store(session, store_name)
        row = _current_row(session, store_name, region)
        if row.backup_version == 0 and not (to_no_version and row.current_version):
            raise NoBackupVersion(f"'{store_name}' has no backup version in {region} to roll back to")
        return _roll_back(session, store, row)


def rollback_store(
    meta: MetadataStore, store_name: str, regions: list[str] | None = None
) -> dict[str, tuple[int, int]]:
    """An operator's rollback, outside any rollout: each named region (default: every region of the store) serves
    its backup version again. All or nothing: a region without a backup (or not the store's) refuses the whole
    rollback before any region changes. Returns region -> (version rolled back from, version now served)."""
    with meta.session() as session:
        store = get_store(session, store_name)
        named = list(dict.fromkeys(regions or store.rollout_order))
        unknown = [r for r in named if r not in store.rollout_order]
        if unknown:
            raise VeniceError(
                f"store '{store_name}' has no region {', '.join(repr(r) for r in unknown)} "
                f"(regions: {', '.join(store.rollout_order)})"
            )
        rows = {r: _current_row(session, store_name, r) for r in named}
        missing = [r for r, row in rows.items() if row.backup_version == 0]
        if missing:  # raised inside the transaction: nothing is written, not even the rows _current_row added
            raise NoBackupVersion(
                f"cannot roll back '{store_name}': no backup version in {', '.join(missing)}; nothing was changed"
            )
        return {r: (row.current_version, _roll_back(session, store, row)) for r, row in rows.items()}


def _roll_back(session: Any, store: Store, row: RegionCurrentVersion) -> int:
    rolled_back = row.current_version
    row.current_version, row.backup_version = row.backup_version, 0
    session.flush()
    _refresh_version_statuses(session, store)
    version = session.get(Version, (store.name, rolled_back))
    if version is not None and rolled_back not in _serving(session, store.name):
        version.status = VersionStatus.ROLLED_BACK
    return row.current_version


def regions_serving(meta: MetadataStore, store_name: str, number: int) -> list[str]:
    """The regions whose current version is `number`."""
    with meta.session() as session:
        return _regions_serving(session, store_name, number)


def _regions_serving(session: Session, store_name: str, number: int) -> list[str]:
    rows = session.scalars(
        select(RegionCurrentVersion.region).where(
            RegionCurrentVersion.store_name == store_name, RegionCurrentVersion.current_version == number
        )
    )
    return list(rows)


def _serving(session: Any, store_name: str) -> set[int]:
    rows = session.scalars(select(RegionCurrentVersion).where(RegionCurrentVersion.store_name == store_name))
    return {v for r in rows for v in (r.current_version, r.backup_version) if v}


def current_versions(meta: MetadataStore, region: str) -> dict[str, int]:
    """Store -> current version in a region (what a region server serves)."""
    with meta.session() as session:
        rows = session.scalars(select(RegionCurrentVersion).where(RegionCurrentVersion.region == region))
        return {r.store_name: r.current_version for r in rows if r.current_version}


def store_names(meta: MetadataStore) -> set[str]:
    """Every store's name (a region server tells a store serving no version from an unknown one)."""
    with meta.session() as session:
        return set(session.scalars(select(Store.name)))


@dataclass(frozen=True)
class VersionToHost:
    """A version a region server should hold: in flight, current or backup."""

    store: str
    number: int
    partition_count: int
    compression: CompressionStrategy
    hybrid: HybridSettings | None
    push_over: bool  # no region swaps to it any more (a newer version whose push is over is never served)
    replication_factor: int | None = None  # the store's setting (None: the region's default)
    partitioner: PartitionerConfig = field(default_factory=PartitionerConfig)  # the version's (pinned at creation)
    key_schema: str = ""  # the store's, as JSON text: what a partitioner other than the default is built with


def versions_to_host(meta: MetadataStore, region: str) -> list[VersionToHost]:
    """The versions a region should hold: in flight, current or backup."""
    with meta.session() as session:
        return hostable_versions(session, region)


def hostable_versions(session: Session, region: str) -> list[VersionToHost]:
    from venice_core.model.status import HOSTABLE

    rows = session.execute(
        select(
            Version.store_name,
            Version.number,
            Version.partition_count,
            Version.compression,
            Version.details,
            Store.replication_factor,
            Store.key_schema,
        )
        .join(Store, Store.name == Version.store_name)
        .where(Version.status.in_(list(HOSTABLE)))
    ).all()
    hosted = []
    for store, number, partitions, compression, details, replication_factor, key_schema in rows:
        lifecycle = VersionLifecycle.of(details)
        if region in (lifecycle.regions or [region]):
            hosted.append(
                VersionToHost(
                    store,
                    number,
                    partitions,
                    CompressionStrategy[compression],
                    lifecycle.hybrid,
                    lifecycle.finished,
                    replication_factor,
                    lifecycle.partitioner,
                    key_schema,
                )
            )
    return hosted


def retire_old_versions(
    meta: MetadataStore, config: ClusterConfig, store_name: str, topics: TopicAdmin = admin
) -> list[int]:
    """Delete versions beyond the store's `versions_to_preserve` that no region serves or keeps as backup, and
    every KILLED or ERROR version that is not in flight. Returns the retired numbers."""
    with meta.session() as session:
        store = get_store(session, store_name)
        keep = _serving(session, store_name)
        versions = list(
            session.scalars(select(Version).where(Version.store_name == store_name).order_by(Version.number.desc()))
        )
        retired = []
        kept_online = 0
        for version in versions:
            if version.number in keep or version.status in IN_FLIGHT:
                kept_online += 1
                continue
            failed = version.status in (VersionStatus.KILLED, VersionStatus.ERROR)
            if failed or kept_online >= store.versions_to_preserve:
                retired.append(version.number)
            else:
                kept_online += 1
        for number in retired:
            for model in (PartitionStatus, VersionRegionStatus, Replica, PartitionLeader):
                rows = delete(model).where(model.store_name == store_name, model.number == number)
                session.execute(rows.execution_options(synchronize_session=False))
            session.delete(session.get(Version, (store_name, number)))
    for number in retired:
        for region in config.regions:
            topics.delete_topics(region.kafka_bootstrap, [region.version_topic(store_name, number)])
    return retired
