"""The region server process (`venice server --region R`).

Every second it asks the metadata store which versions the region hosts and which one of each store is current;
it starts an ingestion task per partition of each new version (outside the source region, a leader that consumes
the source region's version topic and mirrors it into the local one; for a hybrid version, after END_OF_PUSH, the
consumer of every region's real-time topic), and drops the storage of versions that are killed or retired. Reads
go to the store's current version; a store with none in the region (none pushed yet, or its only version rolled
back) answers 404 saying so.
"""

from __future__ import annotations

import base64
import json
import logging
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from venice_core import gc_settings
from venice_core.config import ClusterConfig
from venice_core.controller import versions as controller
from venice_core.errors import NoCurrentVersion, StoreNotFound, VeniceError
from venice_core.ingestion.real_time import HybridIngestion, RealTimeSource
from venice_core.ingestion.replication import VersionTopicMirror
from venice_core.ingestion.task import PartitionIngestionTask
from venice_core.meta import MetadataStore
from venice_core.metrics import PartitionIngestion
from venice_core.protocol.compression import CompressionStrategy, compressor, decompressor
from venice_core.protocol.envelope import SCHEMA_ID
from venice_core.protocol.partitioner import partition_for
from venice_core.pubsub.control import read_start_of_push
from venice_core.server.http import serve
from venice_core.status import ExecutionStatus
from venice_core.storage.rocksdb import PartitionStorage

log = logging.getLogger(__name__)
SYNC_INTERVAL_SECONDS = 1.0

VersionKey = tuple[str, int]


class VersionNotHosted(VeniceError):
    http_status = 404


@dataclass
class HostedVersion:
    store: str
    number: int
    partitions: list[PartitionStorage]
    decompress: Callable[[bytes], bytes] | None  # None: a ZSTD version's, resolved with its dictionary at first read
    stop: threading.Event
    tasks: list[PartitionIngestionTask]
    threads: list[threading.Thread]


class RegionServer:
    def __init__(self, config: ClusterConfig, region: str) -> None:
        self.config = config
        self.region = config.region(region)
        self.meta = MetadataStore(config.metadata_db_url)
        self.hosted: dict[VersionKey, HostedVersion] = {}
        self.current: dict[str, int] = {}
        self.stores: set[str] = set()  # every store, served here or not
        self.schemas: dict[str, dict] = {}
        self._dictionaries: dict[VersionKey, bytes | None] = {}
        self.stopping = threading.Event()
        self._lock = threading.Lock()

    @property
    def storage_root(self) -> Path:
        return self.config.home / "regions" / self.region.name

    # hosting
    def _reporter(self, store: str, number: int, partition: int):
        def report(status: ExecutionStatus, offset: int, records: int, details: str) -> None:
            try:
                controller.report_partition(
                    self.meta, store, number, self.region.name, partition, status, offset, records, details
                )
            except Exception:  # noqa: BLE001 - a report lost now is repeated by the next one
                log.exception("cannot report status of %s v%d p%d", store, number, partition)

        return report

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
            compressor(version.compression),
        )

    def _host(self, version: controller.VersionToHost) -> None:
        store, number, partition_count = version.store, version.number, version.partition_count
        stop = threading.Event()
        local_topic = self.region.version_topic(store, number)
        strategy = version.compression
        decompress = None if strategy is CompressionStrategy.ZSTD else decompressor(strategy)
        hosted = HostedVersion(store, number, [], decompress, stop, [], [])
        source = self.config.region(self.config.source_region)
        hybrid = self._hybrid_ingestion(version)
        for p in range(partition_count):
            storage = PartitionStorage(self.storage_root / f"{store}_v{number}" / f"p{p}")
            hosted.partitions.append(storage)
            report = self._reporter(store, number, p)
            leader = self.region.name != source.name
            task = PartitionIngestionTask(
                source.kafka_bootstrap if leader else self.region.kafka_bootstrap,
                source.version_topic(store, number) if leader else local_topic,
                p,
                storage,
                report,
                f"venice-{self.region.name}",
                mirror=VersionTopicMirror(self.region.kafka_bootstrap, local_topic, p) if leader else None,
                hybrid=hybrid,
            )
            hosted.tasks.append(task)
            hosted.threads.append(
                threading.Thread(target=task.run, args=(stop,), daemon=True, name=f"ingest-{store}-v{number}-p{p}")
            )
        for thread in hosted.threads:
            thread.start()
        self.hosted[(store, number)] = hosted
        log.info("hosting %s v%d (%d partitions)", store, number, partition_count)

    def _unhost(self, key: VersionKey, destroy: bool) -> None:
        hosted = self.hosted.pop(key)
        hosted.stop.set()
        for thread in hosted.threads:
            thread.join(timeout=30)
        for storage in hosted.partitions:
            storage.destroy() if destroy else storage.close()
        if destroy:
            import shutil

            shutil.rmtree(self.storage_root / f"{key[0]}_v{key[1]}", ignore_errors=True)
        log.info("%s %s v%d", "dropped" if destroy else "closed", *key)

    def sync_once(self) -> None:
        wanted = {(v.store, v.number): v for v in controller.versions_to_host(self.meta, self.region.name)}
        for key, version in wanted.items():
            if key not in self.hosted:
                self._host(version)
        current = controller.current_versions(self.meta, self.region.name)
        known = controller.store_names(self.meta)
        with self._lock:
            self.current, self.stores = current, known
        for key in [k for k in self.hosted if k not in wanted]:
            self._unhost(key, destroy=True)

    def run(self) -> None:
        gc_settings.tune_for_throughput()
        host, port = self.config.server_host, self.config.server_port(self.region.name)
        http_server = serve(self, host, port, self.config.server_limits)
        signal.signal(signal.SIGTERM, lambda *_: self.stopping.set())
        signal.signal(signal.SIGINT, lambda *_: self.stopping.set())
        log.info("region %s serving on %s:%d", self.region.name, *http_server.server_address)
        try:
            while not self.stopping.is_set():
                try:
                    self.sync_once()
                except Exception:  # noqa: BLE001 - the metadata store or broker may be back next round
                    log.exception("sync failed")
                self.stopping.wait(SYNC_INTERVAL_SECONDS)
        finally:
            http_server.shutdown()
            for key in list(self.hosted):
                self._unhost(key, destroy=False)
            self.meta.dispose()

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

    def get(self, store: str, key: bytes) -> tuple[int, bytes] | None:
        hosted = self._version_for(store)
        raw = hosted.partitions[partition_for(key, len(hosted.partitions))].get(key)
        return None if raw is None else self._decode(hosted, raw)

    def batch_get_records(self, store: str, keys: list[bytes]) -> list[bytes | None]:
        """The stored records of the keys, in order (schema id + decompressed value), None where a key is absent."""
        hosted = self._version_for(store)
        partitions = hosted.partitions
        count = len(partitions)
        if count == 1:
            records = partitions[0].multi_get(keys)
        else:
            by_partition: list[list[int]] = [[] for _ in range(count)]
            for index, key in enumerate(keys):
                by_partition[partition_for(key, count)].append(index)
            records = [None] * len(keys)
            for partition, indexes in enumerate(by_partition):
                if indexes:
                    found = partitions[partition].multi_get([keys[i] for i in indexes])
                    for index, raw in zip(indexes, found, strict=True):
                        records[index] = raw
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
        """A ZSTD version decompresses with its dictionary, if START_OF_PUSH carried one (read once)."""
        hosted.decompress = decompressor(CompressionStrategy.ZSTD, self.dictionary(hosted.store, hosted.number))
        return hosted.decompress

    def dictionary(self, store: str, number: int) -> bytes | None:
        """The version's compression dictionary, as its START_OF_PUSH carried it (None: it has none). What Da Vinci
        clients fetch (`GET /dictionary/<store>/<version>`): checkpoints do not copy it."""
        key = (store, number)
        if key not in self.hosted:
            if store not in self.stores:
                raise StoreNotFound(store)
            raise VersionNotHosted(f"store '{store}' has no version {number} in {self.region.name}")
        if key not in self._dictionaries:
            sop = read_start_of_push(self.region.kafka_bootstrap, self.region.version_topic(store, number))
            encoded = (sop or {}).get("compression_dictionary")
            if sop is None:
                return None  # not pushed yet: asked again later
            self._dictionaries[key] = base64.b64decode(encoded) if encoded else None
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
            for partition, task in enumerate(hosted.tasks):
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
            "status": "ok",
            "stores": dict(self.current),
            "hosted": [f"{s}_v{n}" for s, n in self.hosted],
        }


def dumps(data: object) -> bytes:
    return json.dumps(data).encode()


def now() -> float:
    return time.perf_counter()
