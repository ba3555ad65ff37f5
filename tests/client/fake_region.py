"""A replicated region in the test's own process, without a broker or RocksDB: instances of the real HTTP front
(`server.http.serve`) over in-memory backends that share one store's data and one routing table, each hosting the
partitions a test gives it, so tests can move replicas, stop, slow down or break instances, and swap versions."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tests.support.platform import SCHEMAS
from venice_core.client.routing import format_address
from venice_core.config import ServerLimits
from venice_core.errors import NoCurrentVersion, StoreNotFound, VeniceError
from venice_core.protocol import serde
from venice_core.protocol.envelope import SCHEMA_ID
from venice_core.protocol.partitioner import partition_for
from venice_core.server.http import ReadServer, serve
from venice_core.utils.metrics import PartitionIngestion

STORE = "users"
REGION = "dc-0"
KEY_SCHEMA = "string"
VALUE_SCHEMA = json.loads((SCHEMAS / "user_value_v1.avsc").read_text())
LIMITS = ServerLimits(idle_timeout_seconds=30.0)


class PartitionNotHosted(VeniceError):
    """As the region server's: the HTTP front answers 503 with the class name as the error kind."""

    http_status = 503


def records(count: int) -> dict[str, dict[str, Any]]:
    return {f"user-{i:04d}": {"name": f"n{i}", "age": i % 90, "score": i / 4} for i in range(count)}


@dataclass
class Region:
    """What every instance shares: the store's current version, its partition count, the routing table each
    instance answers (`table[p]`: the instances listed as ready replicas of partition p) and the data."""

    partition_count: int
    data: dict[bytes, bytes]  # serialised key -> stored record (schema id + value)
    version: int | None = 1  # None: no current version
    table: list[list[Instance]] = field(default_factory=list)
    instances: list[Instance] = field(default_factory=list)

    def partition(self, key: bytes) -> int:
        return partition_for(key, self.partition_count)

    def routing(self) -> dict[str, Any]:
        return {
            "store": STORE,
            "region": REGION,
            "version": self.version,
            "partition_count": self.partition_count,
            "replicas": [[i.name for i in replicas] for replicas in self.table],
        }

    def place(self, placement: Iterable[Iterable[int]]) -> None:
        """`placement[p]`: the instance numbers of partition p's replicas, hosted and listed in the table."""
        self.table = [[self.instances[n] for n in replicas] for replicas in placement]
        for instance in self.instances:
            instance.hosted = {p for p, replicas in enumerate(self.table) if instance in replicas}

    def stop(self) -> None:
        for instance in self.instances:
            instance.stop()


class Instance:
    """One instance's backend (a `RoutedBackend`: `routing_table` and `serving_version`, as the region server's) and
    its HTTP front."""

    def __init__(self, region: Region, routed: bool = True, port: int = 0) -> None:
        self.region = region
        self.hosted: set[int] = set()
        self.delay = 0.0  # seconds each storage read sleeps (on the instance's event loop)
        self.error: VeniceError | None = None  # raised by each storage read
        self.version: int | None = None  # a version of its own (an instance not swapped yet); None: the region's
        self.reads: list[list[int]] = []  # the partitions of each storage read answered 200
        self.not_hosted = 0  # reads answered 503 PartitionNotHosted
        self.asked = 0  # storage reads received
        self.routing_asked = 0
        self.syncs_requested = 0  # `POST /sync`s received
        self.stopped = False
        self._lock = threading.Lock()
        if not routed:  # an older server: no /routing, no version header
            self.routing_table = None  # type: ignore[assignment]
            self.serving_version = None  # type: ignore[assignment]
        self.http: ReadServer = serve(self, "127.0.0.1", port, LIMITS)
        self.address: tuple[str, int] = self.http.server_address[:2]
        self.name = format_address(self.address)

    def stop(self) -> None:
        """Close every connection and stop listening: a killed instance."""
        self.stopped = True
        self.http.shutdown()

    # the backend
    def _check(self, store: str) -> int:
        if store != STORE:
            raise StoreNotFound(store)
        version = self.version or self.region.version
        if version is None:
            raise NoCurrentVersion(f"store '{store}' has no current version in {REGION}")
        return version

    def _read(self, store: str, keys: list[bytes]) -> list[bytes | None]:
        self._check(store)
        with self._lock:
            self.asked += 1
        partitions = sorted({self.region.partition(k) for k in keys})
        if not self.hosted.issuperset(partitions):
            with self._lock:
                self.not_hosted += 1
            raise PartitionNotHosted(f"{self.name} holds no ready replica of partitions {partitions}")
        if self.delay:
            time.sleep(self.delay)
        if self.error is not None:
            raise self.error
        with self._lock:
            self.reads.append(partitions)
        return [self.region.data.get(k) for k in keys]

    def get(self, store: str, key: bytes) -> tuple[int, bytes] | None:
        (record,) = self._read(store, [key])
        return None if record is None else (SCHEMA_ID.unpack_from(record)[0], record[SCHEMA_ID.size :])

    def batch_get_records(self, store: str, keys: list[bytes]) -> list[bytes | None]:
        return self._read(store, keys)

    def batch_get(self, store: str, keys: list[bytes]) -> list[tuple[int, bytes] | None]:
        size = SCHEMA_ID.size
        return [None if r is None else (SCHEMA_ID.unpack_from(r)[0], r[size:]) for r in self._read(store, keys)]

    def routing_table(self, store: str) -> dict[str, Any]:
        self._check(store)
        with self._lock:
            self.routing_asked += 1
        return self.region.routing()

    def serving_version(self, store: str) -> int:
        return self._check(store)

    def schema_document(self, store: str) -> dict[str, Any]:
        if store != STORE:
            raise StoreNotFound(store)
        return {"key_schema": KEY_SCHEMA, "value_schemas": {"1": VALUE_SCHEMA}}

    def dictionary(self, store: str, number: int) -> bytes | None:
        return None

    def health(self) -> dict[str, Any]:
        return {"region": REGION, "status": "ok"}

    def request_sync(self) -> None:
        self.syncs_requested += 1

    def ingestion(self) -> list[PartitionIngestion]:
        return []


def start_region(
    count: int,
    partition_count: int,
    placement: list[list[int]],
    values: dict[str, Any],
    routed: bool = True,
    ports: list[int] | None = None,
) -> Region:
    """`count` instances serving `values` (key -> user record) in `partition_count` partitions placed as given (on
    `ports`, or any free ones)."""
    key_schema, value_schema = serde.parse(KEY_SCHEMA), serde.parse(VALUE_SCHEMA)
    data = {
        serde.serialize(key_schema, k): SCHEMA_ID.pack(1) + serde.serialize(value_schema, v) for k, v in values.items()
    }
    region = Region(partition_count, data)
    try:
        for n in range(count):
            region.instances.append(Instance(region, routed, ports[n] if ports else 0))
    except BaseException:
        region.stop()
        raise
    region.place(placement)
    return region


def key_bytes(key: str) -> bytes:
    return serde.serialize(serde.parse(KEY_SCHEMA), key)
