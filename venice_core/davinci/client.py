"""The Da Vinci client: a full local copy of a store in the application's process, ingested from its region's
version topic (and, for a hybrid store, every region's real-time topic) by the same engine region servers run
(`ingestion.task.PartitionIngestionTask`), into RocksDB (no transformer) or DuckDB (`DuckDBRecordTransformer`): a
`backend.LocalBackend`, chosen when the client is built. Checkpoints go where the transformer's
`get_storage_metadata_service` says (seed 002): its checkpoint store, or beside the data.

Every `sync_interval` seconds it asks the metadata store what its region serves, and:
- ingests the region's current version, and a newer version once the rollout opens the region's Da Vinci gate;
- swaps to the newer version once it is ingested and the rollout has let the region's clients swap, before the
  region's servers do (VIP-4), keeping the version the servers serve until they swap too (DuckDB: the store's view
  re-pointed); otherwise serves the region's current version, which is where it goes back to when the rollout
  abandons the newer one (killed, aborted, rolled back), dropping it;
- heartbeats into the rollout's registry (`controller.da_vinci`) with the newest version it holds, whether it is
  ingested, and the version it serves (the rollout holds the region's server swap until every live instance
  serves the new one, or until its timeout).
A restarted client resumes every partition from its checkpoint: nothing is re-read from the start of the topic.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast
from urllib import error as urlerror
from urllib import request as urlrequest

from confluent_kafka import KafkaException

from venice_core.config import ClusterConfig
from venice_core.controller import da_vinci
from venice_core.controller import versions as controller
from venice_core.controller.stores import describe_store
from venice_core.davinci.backend import LocalBackend, VersionStorage
from venice_core.davinci.ingest_worker import IngestWorker
from venice_core.davinci.rocksdb_backend import RocksDBBackend
from venice_core.davinci.schemas import StoreSchemas
from venice_core.errors import ConfigError, VeniceError
from venice_core.ingestion.real_time import HybridIngestion
from venice_core.ingestion.task import PartitionIngestionTask
from venice_core.meta import MetadataStore
from venice_core.model.status import ExecutionStatus
from venice_core.protocol import serde
from venice_core.protocol.compression import CompressionStrategy, compressor, decompressor
from venice_core.protocol.partitioner_config import VersionPartitioner
from venice_core.pubsub import admin
from venice_core.security import tls
from venice_core.security.principals import DAVINCI
from venice_core.storage.api import PartitionStore
from venice_core.storage.ingestion_checkpoint import IngestionCheckpoint
from venice_core.utils.waiting import poll_until

if TYPE_CHECKING:
    from venice_core.davinci.duckdb_store import RecordTransformer

log = logging.getLogger(__name__)

SYNC_INTERVAL_SECONDS = 1.0
# Below this many records to ingest, starting worker processes (half a second of imports each) costs more than
# it saves.
WORKER_MIN_RECORDS = 200_000


class RegionServerUnreachable(VeniceError):
    exit_code = 2


@dataclass
class LocalVersion:
    """One version held locally: its storage, and a partition's storage and ingestion task per subscribed partition."""

    number: int
    topic: str
    hybrid: bool
    partition_count: int
    storage: VersionStorage
    partitioner: VersionPartitioner  # the version's, loaded at the first read that needs it
    stores: dict[int, PartitionStore[Any]] = field(default_factory=dict)
    tasks: dict[int, PartitionIngestionTask[Any]] = field(default_factory=dict)
    threads: list[threading.Thread] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    resumed_from: dict[int, int] = field(default_factory=dict)  # partition -> offset its checkpoint resumed at
    workers: list[IngestWorker] = field(default_factory=list)  # processes ingesting its batch phase, if any

    def close_workers(self) -> None:
        for worker in self.workers:
            worker.close()

    def follow(self, partition: int, offset: int, records: int) -> None:
        """A worker's progress on a partition, into its task's stats (what `status` shows)."""
        task = self.tasks.get(partition)
        if task is not None:
            task.stats.offset, task.stats.records = offset, records

    def partition_ready(self, task: PartitionIngestionTask[Any]) -> bool:
        if not self.hybrid:
            return task.completed
        return task.real_time is not None and task.real_time.ready

    @property
    def ready(self) -> bool:
        return bool(self.tasks) and all(self.partition_ready(t) for t in self.tasks.values())

    @property
    def error(self) -> str | None:
        return next((t.error for t in self.tasks.values() if t.error), None)

    @property
    def records(self) -> int:
        return sum(t.stats.records for t in self.tasks.values())

    @property
    def nearline(self) -> tuple[int, int] | None:
        """Nearline writes applied and the real-time lag, summed over partitions; None before END_OF_PUSH."""
        phases = [t.real_time for t in self.tasks.values() if t.real_time is not None]
        if not phases:
            return None
        return sum(p.applied for p in phases), sum(max(0, p.lag) for p in phases)


class DaVinciClient:
    def __init__(
        self,
        store: str,
        region: str,
        base_dir: str | Path,
        transformer: RecordTransformer | None = None,
        *,
        config: ClusterConfig | None = None,
        partitions: Iterable[int] | None = None,
        instance_id: str | None = None,
        sync_interval: float = SYNC_INTERVAL_SECONDS,
        ingest_workers: int | None = None,
        worker_min_records: int = WORKER_MIN_RECORDS,
    ) -> None:
        from venice_core.config import load_config

        self.store = store
        self.config = config or load_config()
        self.region = self.config.region(region)  # an unknown region: ConfigError naming the configured ones
        self._tls = tls.client_context(self.config, DAVINCI)  # its schemas and dictionaries, as a Da Vinci client
        self.base_dir = Path(base_dir)
        self.backend = local_backend(
            transformer, self.store, self.base_dir, lambda number: self.region.version_topic(store, number)
        )
        self.subscribed = None if partitions is None else sorted(set(partitions))
        self.instance_id = instance_id or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.sync_interval = sync_interval
        # Where the backend takes their commits (DuckDB), a version's batch phase of `worker_min_records` or more is
        # ingested by this many processes (`ingest_worker`): the engine's Python off this process's GIL. 0: threads.
        self.ingest_workers = min(os.cpu_count() or 1, 4) if ingest_workers is None else ingest_workers
        self.worker_min_records = worker_min_records
        self.meta: MetadataStore | None = None
        self.local: dict[int, LocalVersion] = {}
        self.serving = 0  # the version reads go to (0: none yet)
        self.schemas: StoreSchemas | None = None  # once started
        self._stop = threading.Event()
        self._wake = threading.Event()  # a partition finished its batch data: sync now, not at the next interval
        self._changed = threading.Event()  # a swap or a failure: `wait_until_serving` looks at once
        self._thread: threading.Thread | None = None
        self._lock = threading.RLock()
        self._dictionaries: dict[int, bytes] = {}

    # start and stop
    def start(self, wait: bool = True, timeout: float = 300.0) -> DaVinciClient:
        """Check everything, open the local storage, subscribe; with `wait`, return once the region's current
        version is ingested and served (at once after a restart that resumes a served version)."""
        meta = MetadataStore(self.config.metadata_db_url)
        try:
            info = describe_store(meta, self.store)  # an unknown store: StoreNotFound
            self.schemas = schemas = StoreSchemas(
                self.store, info.key_schema, info.schemas_by_id(), self._fetch_value_schemas
            )
            self._check_partitions(info.settings.partition_count)
            self.backend.check_key_schema(schemas.key)
            self._check_base_dir()
            self._check_region_server()
            self.base_dir.mkdir(parents=True, exist_ok=True)  # created once every check has passed
            self.serving = self.backend.open(schemas)
        except BaseException:
            meta.dispose()
            raise
        self.meta = meta
        log.info("Da Vinci client %s of %s in %s starting", self.instance_id, self.store, self.region.name)
        self._sync()
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"davinci-{self.store}")
        self._thread.start()
        if wait:
            self.wait_until_serving(timeout)
        return self

    def _check_partitions(self, count: int) -> None:
        bad = [p for p in self.subscribed or [] if not 0 <= p < count]
        if bad:
            raise ConfigError(f"store '{self.store}' has partitions 0-{count - 1}: cannot subscribe to {bad}")

    def _check_base_dir(self) -> None:
        """The base dir, or the nearest folder above it that exists, must be a writable folder (nothing created)."""
        existing = self.base_dir
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        if not existing.is_dir():
            raise ConfigError(f"base dir {self.base_dir} cannot be created: {existing} is not a folder")
        if not os.access(existing, os.W_OK | os.X_OK):
            raise ConfigError(f"base dir {self.base_dir} is not writable ({existing} is not)")

    def _from_region(self, path: str, timeout: float) -> bytes:
        """GET `path` from the region: its instances in turn, the first that answers (an HTTPError is its answer);
        RegionServerUnreachable if none does."""
        tried = []
        for host, port in self.config.server_addresses(self.region.name):
            url = f"{tls.scheme(self.config)}://{host}:{port}{path}"
            try:
                with urlrequest.urlopen(url, timeout=timeout, context=self._tls) as response:
                    return cast(bytes, response.read())
            except urlerror.HTTPError:
                raise
            except (urlerror.URLError, OSError) as exc:
                tried.append(f"{host}:{port} ({getattr(exc, 'reason', exc)})")
        raise RegionServerUnreachable(
            f"region server of {self.region.name} at {', '.join(tried)} is unreachable: start the platform "
            "(`venice up`) or check the region"
        )

    def _check_region_server(self) -> None:
        self._from_region("/health", timeout=3)

    def close(self) -> None:
        """Stop ingestion (each partition commits what it has), heartbeat no more, close the storage."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        with self._lock:
            for number in list(self.local):
                self._unsubscribe(number, destroy=False)
        self.backend.close()
        if self.meta is not None:
            try:
                da_vinci.deregister(self.meta, self.store, self.region.name, self.instance_id)
            except Exception:  # noqa: BLE001 - the metadata store away: the instance counts as gone after LIVE_SECONDS
                log.warning("could not deregister Da Vinci instance %s", self.instance_id)
            self.meta.dispose()
            self.meta = None

    def __enter__(self) -> DaVinciClient:
        return self if self._thread is not None else self.start()

    def __exit__(self, *_: object) -> None:
        self.close()

    # the loop
    def _run(self) -> None:
        while True:
            self._wake.wait(self.sync_interval)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self._sync()
            except Exception:  # noqa: BLE001 - the metadata store or a broker may be back next round
                log.exception("Da Vinci sync of %s failed", self.store)

    def _sync(self) -> None:
        assert self.meta is not None
        region = self.region.name
        hosted = {v.number: v for v in controller.versions_to_host(self.meta, region) if v.store == self.store}
        current = controller.current_versions(self.meta, region).get(self.store, 0)
        # A newer version while its push goes on: ingested once the rollout has opened the region's gate, served
        # once it has let the region's clients swap (before the region's servers do). One whose push is over
        # (rolled back, stopped before this region's servers swapped) is never served here: the clients go back
        # to what the region's servers serve.
        ahead = {n for n, v in hosted.items() if n > current and not v.push_over}
        wanted = ({current} & set(hosted)) | {n for n in ahead if da_vinci.gate_open(self.meta, self.store, n, region)}
        target = max((n for n in ahead if da_vinci.swap_open(self.meta, self.store, n, region)), default=current)
        with self._lock:
            for number in sorted(wanted - set(self.local)):
                try:
                    self._subscribe(hosted[number])
                except VeniceError as exc:  # (a dictionary not served yet, say): the next round tries again
                    log.info("%s v%d not subscribed yet: %s", self.store, number, exc)
            for number in [n for n in self.local if n not in wanted and n != self.serving]:
                log.info("%s v%d retired, or abandoned by the rollout: dropped", self.store, number)
                self._unsubscribe(number, destroy=True)
            unprepared = [v.storage for v in self.local.values() if v.ready and not v.storage.ready_to_serve]
        # What serving an ingested version needs (DuckDB: a bulk-loaded table's primary key): seconds on a large
        # table, so outside the client's lock (reads of the version served go on meanwhile) and before the swap.
        for storage in unprepared:
            storage.prepare_to_serve()
        if self._stop.is_set():
            return  # closed while preparing: close() has taken the versions down
        with self._lock:
            local = self.local.get(target)
            if not (local is not None and local.ready) and not self.serving:
                # A client started while its region's clients swap: it serves what the servers serve meanwhile.
                target, local = current, self.local.get(current)
            if target and target != self.serving and local is not None and local.ready:
                if not local.storage.ready_to_serve:
                    self._wake.set()  # ready since the preparing above: prepared on the next round, not under the lock
                else:
                    # The version the region's servers serve is kept while the clients serve ahead of them: a
                    # rollback returns to it without ingesting it again.
                    self._swap(local, keep_retired=self.serving in wanted)
        self._heartbeat()

    def _heartbeat(self) -> None:
        assert self.meta is not None
        with self._lock:
            newest = max(self.local, default=self.serving)
            local = self.local.get(newest)
        if not newest:
            da_vinci.heartbeat(self.meta, self.store, self.region.name, self.instance_id)
            return
        ready = local.ready if local is not None else newest == self.serving
        status = ExecutionStatus.ERROR if local is not None and local.error else None
        status = status or (ExecutionStatus.COMPLETED if ready else ExecutionStatus.STARTED)
        da_vinci.heartbeat(self.meta, self.store, self.region.name, self.instance_id, newest, status, self.serving)

    # versions
    def _subscribe(self, version: controller.VersionToHost) -> None:
        number = version.number
        strategy = version.compression
        dictionary = self.dictionary(number) if strategy.needs_dictionary else None
        if strategy.needs_dictionary and dictionary is None:  # its START_OF_PUSH not read by the region yet
            raise VeniceError(f"no dictionary of {self.store} v{number} in {self.region.name} yet: asked again later")
        what = f"store '{self.store}' version {number}"
        partitioner = VersionPartitioner(version.partitioner, version.key_schema, self.config.partitioner_classes, what)
        local = LocalVersion(
            number,
            self.region.version_topic(self.store, number),
            version.hybrid is not None,
            version.partition_count,
            self.backend.open_version(number, version.partition_count, decompressor(strategy, dictionary), partitioner),
            partitioner,
        )
        hybrid = self._hybrid(version, strategy, dictionary)
        checkpoints: dict[int, IngestionCheckpoint | None] = {}
        for p in self.subscribed if self.subscribed is not None else range(version.partition_count):
            storage = local.stores[p] = local.storage.open_partition(p)
            checkpoints[p] = checkpoint = storage.checkpoint()
            local.resumed_from[p] = checkpoint.next_offset if checkpoint else 0
        workers = self._start_workers(local, checkpoints)
        try:
            self._start_tasks(local, workers, hybrid)
        except BaseException:
            local.close_workers()
            raise
        self.local[number] = local
        resumed = {p: o for p, o in local.resumed_from.items() if o}
        log.info(
            "%s v%d: ingesting %d partitions%s",
            self.store,
            number,
            len(local.tasks),
            f", resumed from checkpoints at {resumed}" if resumed else "",
        )

    def _start_tasks(
        self, local: LocalVersion, workers: dict[int, IngestWorker], hybrid: HybridIngestion | None
    ) -> None:
        number = local.number
        for p, storage in local.stores.items():
            task = PartitionIngestionTask(
                self.region.kafka_bootstrap,
                local.topic,
                p,
                storage,
                self._reporter(number, p),
                self._consumer_group,
                hybrid=hybrid,
            )
            local.tasks[p] = task
            worker = workers.get(p)
            target, args = (task.run, (local.stop,)) if worker is None else (self._after_worker, (local, p, worker))
            local.threads.append(
                threading.Thread(target=target, args=args, daemon=True, name=f"davinci-v{number}-p{p}")
            )
        for thread in local.threads:
            thread.start()

    @property
    def _consumer_group(self) -> str:
        return f"venice-davinci-{self.instance_id}"

    def _start_workers(
        self, local: LocalVersion, checkpoints: dict[int, IngestionCheckpoint | None]
    ) -> dict[int, IngestWorker]:
        """Ingestion workers (`ingest_worker`) for the partitions still in their batch phase, if the backend takes
        their commits and `worker_min_records` or more records remain to ingest; else none (threads)."""
        batch = [p for p, checkpoint in checkpoints.items() if not (checkpoint and checkpoint.end_of_push)]
        commit_messages = self.backend.worker_commit_messages
        # A hybrid version keeps the write stamps its records carry (a repush's), which takes the hybrid settings a
        # worker does not have: threads.
        if commit_messages is None or local.hybrid or self.ingest_workers < 1 or not batch:
            return {}
        try:
            ends = admin.end_offsets(self.region.kafka_bootstrap, local.topic, batch)
        except KafkaException as exc:
            log.warning("%s: ingesting with threads, the topic's end offsets are unknown (%s)", local.topic, exc)
            return {}
        remaining = sum(end - local.resumed_from[p] for p, end in zip(batch, ends, strict=True))  # from the checkpoints
        if remaining < self.worker_min_records:
            return {}
        count = min(self.ingest_workers, len(batch))
        workers: dict[int, IngestWorker] = {}
        try:
            for group in (batch[i::count] for i in range(count)):
                spec = {
                    "bootstrap": self.region.kafka_bootstrap,
                    "topic": local.topic,
                    "group": self._consumer_group,
                    "partitions": {p: checkpoints[p] for p in group},
                    "commit_every_messages": commit_messages,
                }
                worker = IngestWorker(
                    spec,
                    apply=lambda p, batch_, checkpoint: local.stores[p].commit(batch_, checkpoint),
                    get_chunk=lambda p, key: local.stores[p].get_chunk(key),
                    progress=lambda p, _status, offset, records: local.follow(p, offset, records),
                )
                local.workers.append(worker)
                workers.update(dict.fromkeys(group, worker))
        except OSError as exc:  # a worker that could not start: none of them ingests, threads do
            log.warning("%s: ingesting with threads, a worker process failed to start (%s)", local.topic, exc)
            local.close_workers()
            return {}
        log.info("%s: %d records to ingest, in %d worker processes", local.topic, remaining, count)
        return workers

    def _after_worker(self, local: LocalVersion, partition: int, worker: IngestWorker) -> None:
        """A partition whose batch phase a worker ingests: once END_OF_PUSH is committed, its task goes on here."""
        task = local.tasks[partition]
        error = worker.wait(partition)
        if error:
            task.error = error
            task.report(ExecutionStatus.ERROR, task.stats.offset, task.stats.records, error)
        elif not local.stop.is_set():
            # From the checkpoint: END_OF_PUSH's completes the partition; a worker stopped by someone else before it
            # leaves the rest to this process's task.
            task.run(local.stop)

    def _hybrid(
        self, version: controller.VersionToHost, strategy: CompressionStrategy, dictionary: bytes | None
    ) -> HybridIngestion | None:
        if version.hybrid is None:
            return None
        # local_topic None: a client reads the region's topics and writes to none of them.
        return HybridIngestion.of_region(
            version.hybrid,
            self.config,
            self.region,
            self.store,
            version.partition_count,
            None,
            compressor(strategy, dictionary),
        )

    def _reporter(self, number: int, partition: int) -> Callable[[ExecutionStatus, int, int, str], None]:
        def report(status: ExecutionStatus, offset: int, records: int, details: str) -> None:
            if status is ExecutionStatus.ERROR:
                log.error("%s v%d p%d: %s", self.store, number, partition, details)
                self._changed.set()
            else:
                if status in (ExecutionStatus.COMPLETED, ExecutionStatus.END_OF_PUSH_RECEIVED):
                    self._wake.set()  # the version may be ready: swap to it without waiting for the next sync
                log.debug(
                    "%s v%d p%d: %s at offset %d (%d records)", self.store, number, partition, status, offset, records
                )

        return report

    def _fetch_value_schemas(self) -> dict[int, serde.AvroSchemaJson]:
        assert self.meta is not None
        return describe_store(self.meta, self.store).schemas_by_id()

    def _unsubscribe(self, number: int, destroy: bool) -> None:
        local = self.local.pop(number)
        local.stop.set()
        for worker in local.workers:
            worker.stop()  # all at once: each commits what it has
        for thread in local.threads:
            thread.join(timeout=30)
        local.close_workers()
        for storage in local.stores.values():
            storage.close()
        if destroy:
            self.backend.drop_version(number)

    def _swap(self, target: LocalVersion, keep_retired: bool = False) -> None:
        """Serve `target`; the version served before is dropped, or kept (ingesting on) with `keep_retired`."""
        retired = self.serving
        if retired and retired in self.local and not keep_retired:
            self._unsubscribe(retired, destroy=False)  # its data: the backend's swap drops it
        self.backend.swap(target.storage, drop_retired=not keep_retired)
        self.serving = target.number
        self._changed.set()
        kept = "kept" if keep_retired else "retired"
        log.info("%s: serving v%d%s", self.store, target.number, f" (v{retired} {kept})" if retired else "")

    # what it holds
    def wait_until_serving(self, timeout: float = 300.0) -> int:
        """Block until a version is served (or the region serves none); the version served."""

        def served() -> tuple[int] | None:  # (the version served: 0 if none), as a truthy answer
            self._changed.clear()
            with self._lock:
                failed = next((v.error for v in self.local.values() if v.error), None)
                if self.serving or (not self.local and not self._region_current()):
                    return (self.serving,)
            if failed:
                raise VeniceError(f"Da Vinci ingestion of '{self.store}' failed: {failed}")
            return None

        answer = poll_until(
            served,
            timeout=timeout,
            interval=0.1,
            timeout_error=lambda _: TimeoutError(f"'{self.store}' not ingested within {timeout:.0f}s"),
            clock=_WakeOnChange(self._changed),
        )
        assert answer is not None  # poll_until returns only a truthy answer when given a timeout_error
        return answer[0]

    def _region_current(self) -> int:
        assert self.meta is not None
        return controller.current_versions(self.meta, self.region.name).get(self.store, 0)

    def status(self) -> dict[str, Any]:
        with self._lock:
            return {
                "store": self.store,
                "region": self.region.name,
                "instance": self.instance_id,
                "serving": self.serving,
                "versions": {
                    n: {
                        "ready": v.ready,
                        "records": v.records,
                        "nearline": v.nearline,
                        "partitions": sorted(v.tasks),
                        "resumed_from": dict(v.resumed_from),
                        "error": v.error,
                    }
                    for n, v in sorted(self.local.items())
                },
            }

    def dictionary(self, number: int) -> bytes | None:
        """The version's compression dictionary, from the region (not kept in checkpoints, fetched once); None if
        the region has none for it (yet: a version just created)."""
        if number not in self._dictionaries:
            try:
                self._dictionaries[number] = self._from_region(f"/dictionary/{self.store}/{number}", timeout=10)
            except urlerror.HTTPError as exc:
                if exc.code != 404 or exc.headers.get("X-Venice-Error") != "no-dictionary":
                    detail = exc.read()[:200].decode(errors="replace")
                    raise VeniceError(f"dictionary of {self.store} v{number}: HTTP {exc.code} {detail}") from None
                return None
        return self._dictionaries[number]

    # reads
    def get(self, key: Any) -> Any | None:
        """The value of `key` in the served version (None if absent): a dict of the value's fields for a record
        value, else the value."""
        with self._lock:
            serving = self.serving
            local = self.local.get(serving)
        if not serving:
            raise VeniceError(f"store '{self.store}' has no version served by this client yet")
        assert self.schemas is not None
        key_bytes = serde.serialize(self.schemas.parsed_key, key)
        if self.subscribed is not None and local is not None:
            partition = local.partitioner.partition(key_bytes, local.partition_count)
            if partition not in self.subscribed:
                raise ConfigError(f"key {key!r} is in partition {partition}, which this client does not subscribe to")
        return self.backend.get(key, key_bytes, None if local is None else local.storage)

    def sql(self, query: str, parameters: list[Any] | None = None) -> list[tuple[Any, ...]]:
        """Plain SQL on the client's DuckDB file (the store's view is `"<store>"`); ConfigError without DuckDB."""
        return self.backend.sql(query, parameters or [])


def local_backend(
    transformer: RecordTransformer | None, store: str, base_dir: Path, version_topic: Callable[[int], str]
) -> LocalBackend[Any]:
    """The storage the transformer asks for: DuckDB's file for a `DuckDBRecordTransformer`, else RocksDB under the
    base dir. Either asks the transformer where checkpoints go as it opens each version
    (`get_storage_metadata_service`: a checkpoint store, or None for beside the data). DuckDB is imported only when
    chosen."""
    if transformer is not None:
        from venice_core.davinci.duckdb_backend import DuckDBBackend
        from venice_core.davinci.duckdb_store import DuckDBRecordTransformer

        if isinstance(transformer, DuckDBRecordTransformer):
            return DuckDBBackend(transformer, store, version_topic)
    return RocksDBBackend(store, base_dir, version_topic, transformer)


class _WakeOnChange:
    """A wait's clock whose sleep ends early when `changed` is set (a version swapped in, an ingestion failed)."""

    def __init__(self, changed: threading.Event) -> None:
        self.changed = changed

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        self.changed.wait(seconds)
