"""A region-server instance (`venice server --region R [--instance N]`).

It registers itself in the metadata store and renews its lease every second (`leases`). Every second it asks the
metadata store which replicas the region's placement gives it (`controller.placement`; the instance holding the
region's coordinator lease also computes that placement and picks each partition's leader) and which version of each
store is current; it runs an ingestion task per replica it holds (every replica ingests the region's own version
topic; for a hybrid version, after END_OF_PUSH, the region's real-time topics, the partition's leader writing the
winners on), outside the source region a `Replicator` per partition it leads, and drops the storage of replicas
placed elsewhere and of versions killed or retired. Reads go to the store's current version; a partition this
instance holds no ready replica of answers 503 (a routing client asks another), a store with no version in the
region 404.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import shutil
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from venice_core.config import ClusterConfig
from venice_core.controller import instances, placement
from venice_core.controller import versions as controller
from venice_core.controller.placement import Assignment, PartitionKey, RoutingTable
from venice_core.errors import NoCurrentVersion, StoreNotFound, VeniceError
from venice_core.host import gc_settings
from venice_core.ingestion.real_time import HybridIngestion, RealTimeSource
from venice_core.ingestion.replication import Replicator
from venice_core.ingestion.task import PartitionIngestionTask
from venice_core.meta import MetadataStore
from venice_core.model.status import ExecutionStatus
from venice_core.protocol.compression import CompressionStrategy, compressor, decompressor
from venice_core.protocol.envelope import SCHEMA_ID
from venice_core.protocol.partitioner_config import VersionPartitioner
from venice_core.pubsub.control import read_start_of_push, start_of_push_dictionary
from venice_core.server.http import serve
from venice_core.storage.rocksdb import PartitionStorage
from venice_core.utils.metrics import PartitionIngestion

log = logging.getLogger(__name__)
SYNC_INTERVAL_SECONDS = 1.0
SYNC_GAP_SECONDS = 0.05
# A leader stops producing this long before its lease runs out in the metadata store: the clocks of two machines
# and a renewal in flight differ by less.
LEASE_SAFETY_SECONDS = 1.0

VersionKey = tuple[str, int]


class VersionNotHosted(VeniceError):
    http_status = 404


class PartitionNotHosted(VeniceError):
    """This instance holds no ready replica of the partition a read asks for: a routing client asks another."""

    http_status = 503


class InstanceTakenOver(VeniceError):
    """Another process renewed this instance's registration: this one stops."""


@dataclass
class HostedPartition:
    storage: PartitionStorage
    task: PartitionIngestionTask
    thread: threading.Thread
    stop: threading.Event

    @property
    def ready(self) -> bool:
        """Serves reads: END_OF_PUSH committed, and a hybrid partition caught up with the real-time topics."""
        real_time = self.task.real_time
        return self.task.completed and (real_time is None or real_time.ready)


@dataclass
class HostedVersion:
    store: str
    number: int
    partition_count: int
    decompress: Callable[[bytes], bytes] | None  # None: a ZSTD_WITH_DICT version's, made with its dictionary when read
    hybrid: HybridIngestion | None
    min_ready: int
    partitioner: VersionPartitioner  # the version's, loaded at the first read (a class no longer allowed fails reads)
    partitions: dict[int, HostedPartition] = field(default_factory=dict)
    compression: CompressionStrategy = CompressionStrategy.NO_OP


@dataclass
class Leadership:
    """A partition this instance leads outside the source region: its replicator's thread."""

    epoch: int
    stop: threading.Event
    thread: threading.Thread


class RegionServer:
    def __init__(self, config: ClusterConfig, region: str, instance: int = 0) -> None:
        self.config = config
        self.region = config.region(region)
        self.instance = config.check_instance(region, instance)
        self.owner = instances.owner_token()  # this process's token on the instance's lease
        self.meta = MetadataStore(config.metadata_db_url)
        self.hosted: dict[VersionKey, HostedVersion] = {}
        self.current: dict[str, int] = {}
        self.stores: set[str] = set()  # every store, served here or not
        self.routing: dict[str, RoutingTable] = {}
        self.wanted: set[VersionKey] = set()  # the versions the region hosts, on this instance or others
        self.assignments: dict[PartitionKey, Assignment] = {}
        self.leading: dict[PartitionKey, Leadership] = {}
        self.schemas: dict[str, dict] = {}
        self._dictionaries: dict[VersionKey, bytes | None] = {}
        self.lease_until = 0.0  # monotonic: a leader produces only before it
        self._lapsed = threading.Event()  # the lease ran out, then was renewed: leaderships unknown until resynced
        self.started = time.monotonic()
        self.spare: set[PartitionKey] = set()  # partitions with data on disk this instance does not hold (yet)
        self._reported_spare: set[PartitionKey] = set()
        self.stopping = threading.Event()
        self._wake = threading.Event()  # a sync asked for now (`POST /sync`), not at the next interval
        self._lock = threading.Lock()
        # Each partition's newest status report the metadata store did not take (its database restarting, say): sent
        # again at each sync until it is, unless a newer report is made meanwhile. A replica's last report (its
        # COMPLETED) is followed by no other, and lost it would leave its version in PROGRESS for good.
        self._unsent: dict[PartitionKey, Callable[[], None]] = {}

    @property
    def storage_root(self) -> Path:
        return self.config.instance_dir(self.region.name, self.instance)

    @property
    def is_source(self) -> bool:
        return self.region.name == self.config.source_region

    # the lease
    def register(self, host: str, port: int) -> None:
        started = time.monotonic()
        instances.register(
            self.meta,
            self.region.name,
            self.instance,
            host,
            port,
            self.owner,
            os.getpid(),
            self.config.server.instance_lease_seconds,
        )
        self._extend_lease(started)
        # What it has on disk, before any placement is made for it: a restarted instance gets those back.
        self.spare = self._on_disk()
        spare = [placement.spare_name(k) for k in self.spare]
        instances.set_spare(self.meta, self.region.name, self.instance, self.owner, spare)
        self._reported_spare = set(self.spare)

    def renew_lease(self) -> None:
        """Renew the instance's lease; a renewal that fails leaves it to run out (leaders stop producing)."""
        started = time.monotonic()
        try:
            renewed = instances.renew(self.meta, self.region.name, self.instance, self.owner)
        except Exception:  # noqa: BLE001 - the metadata store may be back at the next renewal
            log.exception("cannot renew the lease of instance %d", self.instance)
            return
        if not renewed:
            log.error("instance %d of %s was taken over by another process: stopping", self.instance, self.region.name)
            self._stop()
            return
        if time.monotonic() >= self.lease_until and not self._lapsed.is_set():
            # Renewed after the lease ran out (a pause, a stalled database): leaderships may have moved meanwhile.
            # None is trusted again until the next sync has read them afresh.
            log.warning(
                "instance %d's lease ran out before this renewal: leading nothing until resynced", self.instance
            )
            self._lapsed.set()
        self._extend_lease(started)

    def _extend_lease(self, renewed_at: float) -> None:
        """The lease as this process counts it: from when its renewal started, a margin short of the database's."""
        self.lease_until = renewed_at + self.config.server.instance_lease_seconds - LEASE_SAFETY_SECONDS

    def _heartbeat(self) -> None:
        while not self.stopping.wait(SYNC_INTERVAL_SECONDS):
            self.renew_lease()

    def holds_lease(self) -> bool:
        return time.monotonic() < self.lease_until and not self._lapsed.is_set()

    # hosting
    def _reporter(self, version: HostedVersion, partition: int):
        store, number = version.store, version.number
        key = (store, number, partition)
        lock = threading.Lock()  # one send at a time: a resent report never lands after a newer one
        newest = [0]  # the number of the newest report made

        def send(sequence: int, status: ExecutionStatus, offset: int, records: int, details: str) -> None:
            with lock:
                if sequence != newest[0]:
                    return  # a newer report was made: it says more
                try:
                    controller.report_replica(
                        self.meta,
                        store,
                        number,
                        self.region.name,
                        partition,
                        self.instance,
                        status,
                        offset,
                        records,
                        details,
                        version.min_ready,
                    )
                except Exception:  # noqa: BLE001 - sent again at the next sync (or replaced by a newer report)
                    log.exception("cannot report status of %s v%d p%d", store, number, partition)
                    self._unsent[key] = functools.partial(send, sequence, status, offset, records, details)
                    return
                self._unsent.pop(key, None)

        def report(status: ExecutionStatus, offset: int, records: int, details: str) -> None:
            newest[0] += 1
            send(newest[0], status, offset, records, details)

        return report

    def _resend_reports(self) -> None:
        """Send again the reports the metadata store did not take (each puts itself back if it fails again)."""
        for key in list(self._unsent):
            resend = self._unsent.pop(key, None)
            if resend is not None:
                resend()

    def _hybrid_ingestion(self, version: controller.VersionToHost) -> HybridIngestion | None:
        if version.hybrid is None:
            return None
        sources = tuple(
            RealTimeSource(region.name, region.kafka_bootstrap, region.real_time_topic(version.store))
            for region in self.config.regions
        )
        return HybridIngestion(
            version.hybrid,
            sources,
            self.region.kafka_bootstrap,
            self.region.version_topic(version.store, version.number),
            version.partition_count,
            self._nearline_compressor(version),
        )

    def _nearline_compressor(self, version: controller.VersionToHost) -> Callable[[bytes], bytes]:
        """What a hybrid version's nearline values are stored with: its compression, with a ZSTD_WITH_DICT version's
        dictionary read from its START_OF_PUSH at the first write (nearline writes apply after END_OF_PUSH)."""
        strategy, store, number = version.compression, version.store, version.number
        if not strategy.needs_dictionary:
            return compressor(strategy)
        made: list[Callable[[bytes], bytes]] = []

        def compress(value: bytes) -> bytes:
            if not made:
                made.append(compressor(strategy, self._required_dictionary(store, number)))
            return made[0](value)

        return compress

    def _leads(self, key: PartitionKey, epoch: int | None = None) -> Callable[[], bool]:
        """Whether this instance leads the partition now (under `epoch`, if given), its lease running."""

        def leads() -> bool:
            assignment = self.assignments.get(key)
            return (
                assignment is not None
                and assignment.leader
                and (epoch is None or assignment.epoch == epoch)
                and self.holds_lease()
            )

        return leads

    def _version(self, version: controller.VersionToHost) -> HostedVersion:
        key = (version.store, version.number)
        hosted = self.hosted.get(key)
        if hosted is None:
            strategy = version.compression
            hosted = self.hosted[key] = HostedVersion(
                version.store,
                version.number,
                version.partition_count,
                None if strategy.needs_dictionary else decompressor(strategy),
                self._hybrid_ingestion(version),
                placement.min_ready(self.config, version.replication_factor, self.region.name),
                VersionPartitioner(
                    version.partitioner,
                    version.key_schema,
                    self.config.partitioner_classes,
                    f"store '{version.store}' version {version.number}",
                ),
                compression=strategy,
            )
            log.info("hosting %s v%d", *key)
        return hosted

    def _host_partition(self, hosted: HostedVersion, partition: int) -> None:
        store, number = hosted.store, hosted.number
        storage = PartitionStorage(self.storage_root / f"{store}_v{number}" / f"p{partition}")
        task = PartitionIngestionTask(
            self.region.kafka_bootstrap,
            self.region.version_topic(store, number),
            partition,
            storage,
            self._reporter(hosted, partition),
            f"venice-{self.region.name}-{self.instance}",
            hybrid=hosted.hybrid,
            leads=self._leads((store, number, partition)),
        )
        stop = threading.Event()
        thread = threading.Thread(
            target=task.run, args=(stop,), daemon=True, name=f"ingest-{store}-v{number}-p{partition}"
        )
        hosted.partitions[partition] = HostedPartition(storage, task, thread, stop)
        thread.start()

    def _unhost_partition(self, hosted: HostedVersion, partition: int, destroy: bool) -> None:
        held = hosted.partitions.pop(partition)
        held.stop.set()
        held.thread.join(timeout=30)
        if destroy:
            held.storage.destroy()
            shutil.rmtree(self.storage_root / f"{hosted.store}_v{hosted.number}" / f"p{partition}", ignore_errors=True)
        else:
            held.storage.close()

    def _unhost(self, key: VersionKey, destroy: bool) -> None:
        hosted = self.hosted.pop(key)
        for partition in list(hosted.partitions):
            hosted.partitions[partition].stop.set()  # all stop at once, then each is waited for
        for partition in list(hosted.partitions):
            self._unhost_partition(hosted, partition, destroy)
        if destroy:
            shutil.rmtree(self.storage_root / f"{key[0]}_v{key[1]}", ignore_errors=True)
        log.info("%s %s v%d", "dropped" if destroy else "closed", *key)

    # leadership
    def _lead(self, assignment: Assignment) -> None:
        """Replicate a partition this instance leads outside the source region, from its predecessor's progress."""
        key = (assignment.store, assignment.number, assignment.partition)
        source = self.config.region(self.config.source_region)
        epoch = assignment.epoch

        def record(position: int, replicated: bool) -> bool:
            return placement.record_progress(self.meta, *key[:2], self.region.name, key[2], epoch, position, replicated)

        replicator = Replicator(
            source.kafka_bootstrap,
            source.version_topic(assignment.store, assignment.number),
            self.region.kafka_bootstrap,
            self.region.version_topic(assignment.store, assignment.number),
            assignment.partition,
            assignment.progress,
            self._leads(key, epoch),
            record,
        )
        stop = threading.Event()

        def run() -> None:
            try:
                replicator.run(stop)
            except Exception as exc:  # noqa: BLE001 - a ReplicationError or any other: led again from its progress
                log.error("replication of %s v%d p%d failed: %s", *key, exc)

        thread = threading.Thread(target=run, daemon=True, name=f"lead-{key[0]}-v{key[1]}-p{key[2]}")
        self.leading[key] = Leadership(epoch, stop, thread)
        thread.start()

    def _sync_leadership(self) -> None:
        for key, leadership in list(self.leading.items()):
            assignment = self.assignments.get(key)
            over = not leadership.thread.is_alive()
            if over or assignment is None or not assignment.leader or assignment.epoch != leadership.epoch:
                if not over:
                    log.warning(
                        "no longer leading %s v%d p%d (epoch %d): its replication stops", *key, leadership.epoch
                    )
                leadership.stop.set()
                if not over:
                    leadership.thread.join(timeout=10)
                del self.leading[key]
        if self.is_source:
            return  # the push writes the source region's version topic: its leaders replicate nothing
        for key, assignment in self.assignments.items():
            hosted = self.hosted.get(key[:2])
            if assignment.leader and not assignment.replicated and key not in self.leading and hosted is not None:
                self._lead(assignment)

    def _on_disk(self) -> set[PartitionKey]:
        """The partitions whose storage is on this instance's disk (`<store>_v<n>/p<k>`)."""
        found: set[PartitionKey] = set()
        if not self.storage_root.is_dir():
            return found
        for version_dir in self.storage_root.iterdir():
            store, _, number = version_dir.name.rpartition("_v")
            if not store or not number.isdigit() or not version_dir.is_dir():
                continue
            for partition_dir in version_dir.iterdir():
                if partition_dir.name[:1] == "p" and partition_dir.name[1:].isdigit():
                    found.add((store, int(number), int(partition_dir.name[1:])))
        return found

    def _sync_spare(self, wanted: set[VersionKey]) -> None:
        """Tell the coordinator which partitions this instance could resume from disk, and drop their data once
        nothing placed them back within the grace period (or their version is gone)."""
        held = {(h.store, h.number, p) for h in self.hosted.values() for p in h.partitions}
        self.spare = {key for key in self._on_disk() if key not in held}
        expired = time.monotonic() - self.started > self.config.server.instance_offline_grace_seconds
        for key in [k for k in self.spare if expired or k[:2] not in wanted]:
            shutil.rmtree(self.storage_root / f"{key[0]}_v{key[1]}" / f"p{key[2]}", ignore_errors=True)
            self.spare.discard(key)
        if self.spare != self._reported_spare:
            instances.set_spare(
                self.meta, self.region.name, self.instance, self.owner, [placement.spare_name(k) for k in self.spare]
            )
            self._reported_spare = set(self.spare)

    def sync_once(self) -> None:
        region = self.region.name
        self._resend_reports()
        if instances.hold_coordinator(
            self.meta, region, self.instance, self.owner, self.config.server.instance_lease_seconds
        ):
            placement.rebalance(self.meta, self.config, region, coordinator=self.owner)
        wanted = {(v.store, v.number): v for v in controller.versions_to_host(self.meta, region)}
        lapsed = self._lapsed.is_set()  # read before the assignments: a lapse after this waits for the next sync
        self.assignments = placement.assignments(self.meta, region, self.instance)
        if lapsed:
            self._lapsed.clear()
        placed: dict[VersionKey, set[int]] = {}
        for store, number, partition in self.assignments:
            placed.setdefault((store, number), set()).add(partition)
        for key, version in wanted.items():
            partitions = placed.get(key, set())
            if not partitions and key not in self.hosted:
                continue
            hosted = self._version(version)
            for partition in sorted(partitions - hosted.partitions.keys()):
                self._host_partition(hosted, partition)
            for partition in sorted(hosted.partitions.keys() - partitions):  # placed elsewhere now
                self._unhost_partition(hosted, partition, destroy=True)
        self._sync_leadership()
        if self.spare:  # until placed back or dropped
            self._sync_spare(set(wanted))
        current = controller.current_versions(self.meta, region)
        known = controller.store_names(self.meta)
        routing = placement.routing_tables(self.meta, self.config, region)
        with self._lock:
            self.current, self.stores, self.routing, self.wanted = current, known, routing, set(wanted)
        for key in [k for k in self.hosted if k not in wanted or not self.hosted[k].partitions]:
            self._unhost(key, destroy=True)

    def run(self) -> None:
        gc_settings.tune_for_throughput()
        host, port = self.config.server.host, self.config.server_port(self.region.name, self.instance)
        self.register(
            self.config.advertised_host, port
        )  # refused, before anything is bound, while another process runs this instance
        try:
            http_server = serve(self, host, port, self.config.server.limits)
        except OSError:
            instances.release(
                self.meta, self.region.name, self.instance, self.owner, self.config.server.instance_lease_seconds
            )
            raise
        signal.signal(signal.SIGTERM, lambda *_: self._stop())
        signal.signal(signal.SIGINT, lambda *_: self._stop())
        heartbeat = threading.Thread(target=self._heartbeat, daemon=True, name="lease")
        heartbeat.start()
        log.info("region %s instance %d serving on %s:%d", self.region.name, self.instance, *http_server.server_address)
        try:
            while not self.stopping.is_set():
                try:
                    self.sync_once()
                except Exception:  # noqa: BLE001 - the metadata store or broker may be back next round
                    log.exception("sync failed")
                self._wake.wait(SYNC_INTERVAL_SECONDS)
                self._wake.clear()
                self.stopping.wait(SYNC_GAP_SECONDS)  # a burst of `POST /sync`s: one sync per gap at most
        finally:
            http_server.shutdown()
            for leadership in self.leading.values():
                leadership.stop.set()
            for key in list(self.hosted):
                self._unhost(key, destroy=False)
            try:
                instances.release(
                    self.meta, self.region.name, self.instance, self.owner, self.config.server.instance_lease_seconds
                )
            except Exception:  # noqa: BLE001 - the lease then runs out on its own
                log.exception("cannot release the lease of instance %d", self.instance)
            self.meta.dispose()

    def _stop(self) -> None:
        self.stopping.set()
        self._wake.set()

    def request_sync(self) -> None:
        """`POST /sync`: read the metadata store now rather than at the next interval (a swap waits for it)."""
        self._wake.set()

    # reads
    def _version_for(self, store: str) -> HostedVersion:
        with self._lock:
            number = self.current.get(store)
        hosted = self.hosted.get((store, number)) if number else None
        if hosted is None:
            if store in self.stores:  # it exists, but no version serves here (e.g. its only one was rolled back)
                raise NoCurrentVersion(f"store '{store}' has no current version in {self.region.name}")
            raise StoreNotFound(store)
        return hosted

    def _partition(self, hosted: HostedVersion, partition: int) -> PartitionStorage:
        held = hosted.partitions.get(partition)
        if held is None or not held.ready:
            raise PartitionNotHosted(
                f"instance {self.instance} of {self.region.name} holds no ready replica of partition {partition} of "
                f"{hosted.store} v{hosted.number}"
            )
        return held.storage

    def serving_version(self, store: str) -> int:
        """The version this instance answers reads of `store` from (StoreNotFound, NoCurrentVersion)."""
        return self._version_for(store).number

    def routing_table(self, store: str) -> dict:
        """`GET /routing/<store>`: the store's routing table in the region, as of the last sync."""
        with self._lock:
            table, known = self.routing.get(store), store in self.stores
        if table is None:
            if known:
                raise NoCurrentVersion(f"store '{store}' has no current version in {self.region.name}")
            raise StoreNotFound(store)
        return table.to_json()

    def get(self, store: str, key: bytes) -> tuple[int, bytes] | None:
        hosted = self._version_for(store)
        raw = self._partition(hosted, hosted.partitioner.partition(key, hosted.partition_count)).get(key)
        return None if raw is None else self._decode(hosted, raw)

    def get_stored(self, store: str, key: bytes) -> tuple[int, CompressionStrategy, tuple[int, bytes] | None]:
        """A get for a reader that decompresses ZSTD_WITH_DICT itself: the version read, the compression of the value
        returned, and the record (schema id, value). A ZSTD_WITH_DICT version's value comes as stored, compressed
        with the version's dictionary; any other version's decompressed, as `get` returns it (NO_OP)."""
        hosted = self._version_for(store)
        raw = self._partition(hosted, hosted.partitioner.partition(key, hosted.partition_count)).get(key)
        if not hosted.compression.needs_dictionary:
            return hosted.number, CompressionStrategy.NO_OP, None if raw is None else self._decode(hosted, raw)
        record = None if raw is None else (SCHEMA_ID.unpack_from(raw)[0], raw[SCHEMA_ID.size :])
        return hosted.number, hosted.compression, record

    def batch_get_stored(self, store: str, keys: list[bytes]) -> tuple[int, CompressionStrategy, list[bytes | None]]:
        """`batch_get_records` for a reader that decompresses ZSTD_WITH_DICT itself (as `get_stored`): the version
        read, the compression of the values, the records."""
        hosted = self._version_for(store)
        records = self._records(hosted, keys)
        if not hosted.compression.needs_dictionary:
            return hosted.number, CompressionStrategy.NO_OP, self._decompressed(hosted, records)
        return hosted.number, hosted.compression, records

    def batch_get_records(self, store: str, keys: list[bytes]) -> list[bytes | None]:
        """The stored records of the keys, in order (schema id + decompressed value), None where a key is absent.
        Every key's partition must have a ready replica here (a routing client splits a batch so)."""
        hosted = self._version_for(store)
        return self._decompressed(hosted, self._records(hosted, keys))

    def _records(self, hosted: HostedVersion, keys: list[bytes]) -> list[bytes | None]:
        """The keys' records as stored (schema id + value, compressed), in order, None where a key is absent."""
        count = hosted.partition_count
        partition_of = hosted.partitioner.loaded().partition  # a class no longer allowed is refused, as by `get`
        if count == 1:
            records = self._partition(hosted, 0).multi_get(keys)
        else:
            by_partition: list[list[int]] = [[] for _ in range(count)]
            for index, key in enumerate(keys):
                by_partition[partition_of(key, count)].append(index)
            records = [None] * len(keys)
            for partition, indexes in enumerate(by_partition):
                if indexes:
                    found = self._partition(hosted, partition).multi_get([keys[i] for i in indexes])
                    for index, raw in zip(indexes, found, strict=True):
                        records[index] = raw
        return records

    def _decompressed(self, hosted: HostedVersion, records: list[bytes | None]) -> list[bytes | None]:
        decompress = hosted.decompress or self._zstd_decompressor(hosted)
        if decompress is not bytes:  # a compressed version (NO_OP's decompressor is `bytes`)
            size = SCHEMA_ID.size
            records = [None if r is None else r[:size] + decompress(r[size:]) for r in records]
        return records

    def batch_get(self, store: str, keys: list[bytes]) -> list[tuple[int, bytes] | None]:
        size = SCHEMA_ID.size
        return [
            None if r is None else (SCHEMA_ID.unpack_from(r)[0], r[size:]) for r in self.batch_get_records(store, keys)
        ]

    def _decode(self, hosted: HostedVersion, raw: bytes) -> tuple[int, bytes]:
        (schema_id,) = SCHEMA_ID.unpack_from(raw)
        decompress = hosted.decompress or self._zstd_decompressor(hosted)
        return schema_id, decompress(raw[SCHEMA_ID.size :])

    def _zstd_decompressor(self, hosted: HostedVersion) -> Callable[[bytes], bytes]:
        """A ZSTD_WITH_DICT version decompresses with the dictionary its START_OF_PUSH carries (read once)."""
        hosted.decompress = decompressor(hosted.compression, self._required_dictionary(hosted.store, hosted.number))
        return hosted.decompress

    def _required_dictionary(self, store: str, number: int) -> bytes:
        dictionary = self.dictionary(store, number)
        if dictionary is None:
            raise VeniceError(f"version {number} of '{store}' is ZSTD_WITH_DICT, its START_OF_PUSH has no dictionary")
        return dictionary

    def dictionary(self, store: str, number: int) -> bytes | None:
        """The version's compression dictionary, as its START_OF_PUSH carried it (None: it has none). What Da Vinci
        clients fetch (`GET /dictionary/<store>/<version>`): checkpoints do not copy it."""
        key = (store, number)
        if key not in self.wanted:  # any instance answers for a version of the region, whichever replicas it holds
            if store not in self.stores:
                raise StoreNotFound(store)
            raise VersionNotHosted(f"store '{store}' has no version {number} in {self.region.name}")
        if key not in self._dictionaries:
            sop = read_start_of_push(self.region.kafka_bootstrap, self.region.version_topic(store, number))
            if sop is None:
                return None  # not pushed yet: asked again later
            self._dictionaries[key] = start_of_push_dictionary(sop)
        return self._dictionaries[key]

    def schema_document(self, store: str) -> dict:
        from venice_core.controller.stores import describe_store

        info = describe_store(self.meta, store)
        return {
            "key_schema": info.key_schema,
            "value_schemas": {str(entry.id): entry.schema for entry in info.value_schemas},
        }

    def ingestion(self) -> list[PartitionIngestion]:
        """Each hosted partition's ingestion figures (the `/metrics` endpoint's)."""
        figures = []
        for (store, number), hosted in list(self.hosted.items()):
            for partition, held in sorted(hosted.partitions.items()):
                task = held.task
                stats, real_time = task.stats, task.real_time
                if real_time is not None:  # a hybrid version past END_OF_PUSH: behind the real-time topics
                    lag, applied, superseded = max(0, real_time.lag), real_time.applied, real_time.superseded
                else:
                    lag, applied, superseded = 0 if task.completed else stats.lag, None, None
                figures.append(
                    PartitionIngestion(
                        store,
                        number,
                        partition,
                        self.region.name,
                        stats.records,
                        stats.duplicates,
                        lag,
                        applied,
                        superseded,
                    )
                )
        return figures

    def health(self) -> dict:
        return {
            "region": self.region.name,
            "instance": self.instance,
            "pid": os.getpid(),
            "status": "ok",
            "stores": dict(self.current),
            "hosted": [f"{s}_v{n}" for s, n in self.hosted],
            "replicas": len(self.assignments),
            "leads": sum(1 for a in self.assignments.values() if a.leader),
        }


def dumps(data: object) -> bytes:
    return json.dumps(data).encode()


def now() -> float:
    return time.perf_counter()
