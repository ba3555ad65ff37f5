"""What a region-server instance hosts: the versions and partitions the region's placement gives it, one ingestion
task per replica (every replica ingests the region's own version topic, but a partition's leader outside the source
region, which takes the source region's and produces it on; for a hybrid version, after END_OF_PUSH, the
region's real-time topics, the partition's leader writing the winners on), each replica's status reported to the
metadata store, the storage of replicas placed elsewhere and of versions killed or retired dropped, and what it has on
disk but does not hold (spare) offered back to the region's coordinator."""

from __future__ import annotations

import functools
import logging
import shutil
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from venice_core.config import ClusterConfig, RegionConfig
from venice_core.controller import instances, placement
from venice_core.controller import versions as controller
from venice_core.controller.placement import PartitionKey
from venice_core.ingestion.leader import Leading
from venice_core.ingestion.real_time import HybridIngestion, Reporter
from venice_core.ingestion.task import PartitionIngestionTask
from venice_core.meta import MetadataStore
from venice_core.model.status import ExecutionStatus
from venice_core.protocol.compression import CompressionStrategy, compressor, decompressor
from venice_core.protocol.partitioner_config import VersionPartitioner
from venice_core.storage.rocksdb import PartitionStorage
from venice_core.utils.metrics import PartitionIngestion

log = logging.getLogger("venice_core.server.region_server")  # the server's one logger: its lines as they were

VersionKey = tuple[str, int]


@dataclass
class HostedPartition:
    storage: PartitionStorage
    task: PartitionIngestionTask[Any]
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


class Hosting:
    """The instance's hosted versions (`hosted`) and its spare partitions. `leads(key)`: whether the instance leads a
    partition now (a hybrid partition's leader writes the winners on); `dictionary(store, number)`: a ZSTD_WITH_DICT
    version's dictionary (what its nearline values are compressed with)."""

    def __init__(
        self,
        config: ClusterConfig,
        region: RegionConfig,
        instance: int,
        meta: MetadataStore,
        owner: str,
        leads: Callable[[PartitionKey], Callable[[], bool]],
        leading: Callable[[PartitionKey], Leading | None],
        dictionary: Callable[[str, int], bytes],
    ) -> None:
        self.config, self.region, self.instance, self.meta, self.owner = config, region, instance, meta, owner
        self._leads, self._leading, self._dictionary = leads, leading, dictionary
        self.hosted: dict[VersionKey, HostedVersion] = {}
        self.started = time.monotonic()
        self.spare: set[PartitionKey] = set()  # partitions with data on disk this instance does not hold (yet)
        self._reported_spare: set[PartitionKey] = set()
        # Each partition's newest status report the metadata store did not take (its database restarting, say): sent
        # again at each sync until it is, unless a newer report is made meanwhile. A replica's last report (its
        # COMPLETED) is followed by no other, and lost it would leave its version in PROGRESS for good.
        self._unsent: dict[PartitionKey, Callable[[], None]] = {}

    @property
    def storage_root(self) -> Path:
        return self.config.instance_dir(self.region.name, self.instance)

    # reporting
    def reporter(self, version: HostedVersion, partition: int) -> Reporter:
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

    def resend_reports(self) -> None:
        """Send again the reports the metadata store did not take (each puts itself back if it fails again)."""
        for key in list(self._unsent):
            resend = self._unsent.pop(key, None)
            if resend is not None:
                resend()

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

    # versions and partitions
    def sync(self, wanted: dict[VersionKey, controller.VersionToHost], assignments: Collection[PartitionKey]) -> None:
        """Host the partitions placed on this instance of the versions the region hosts; drop those placed
        elsewhere now."""
        placed: dict[VersionKey, set[int]] = {}
        for store, number, partition in assignments:
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

    def drop_unwanted(self, wanted: Collection[VersionKey]) -> None:
        """Drop the versions the region no longer hosts, and those with no partition left here."""
        for key in [k for k in self.hosted if k not in wanted or not self.hosted[k].partitions]:
            self._unhost(key, destroy=True)

    def close(self) -> None:
        """Stop every ingestion and close every partition's storage, keeping the data (the server stops)."""
        for key in list(self.hosted):
            self._unhost(key, destroy=False)

    def completed(self, key: PartitionKey) -> bool:
        """Whether this instance holds the partition with END_OF_PUSH committed."""
        hosted = self.hosted.get(key[:2])
        held = None if hosted is None else hosted.partitions.get(key[2])
        return held is not None and held.task.completed

    def _hybrid_ingestion(self, version: controller.VersionToHost) -> HybridIngestion | None:
        if version.hybrid is None:
            return None
        return HybridIngestion.of_region(
            version.hybrid,
            self.config,
            self.region,
            version.store,
            version.partition_count,
            self.region.version_topic(version.store, version.number),
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
                made.append(compressor(strategy, self._dictionary(store, number)))
            return made[0](value)

        return compress

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
            self.reporter(hosted, partition),
            f"venice-{self.region.name}-{self.instance}",
            hybrid=hosted.hybrid,
            leads=self._leads((store, number, partition)),
            leading=self._leading((store, number, partition)),
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

    # spare partitions
    def offer_spare(self) -> None:
        """Tell the coordinator what this instance has on disk, before any placement is made for it (at
        registration): a restarted instance gets those back."""
        self.spare = self._on_disk()
        spare = [placement.spare_name(k) for k in self.spare]
        instances.set_spare(self.meta, self.region.name, self.instance, self.owner, spare)
        self._reported_spare = set(self.spare)

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

    def sync_spare(self, wanted: Collection[VersionKey]) -> None:
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
