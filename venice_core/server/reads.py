"""A region-server instance's read path: reads go to each store's current version in the region (as of the last
sync); a partition this instance holds no ready replica of answers 503 (a routing client asks another), a store with
no version in the region 404. Also what any instance answers for the region: the routing tables, a version's
compression dictionary, a store's schemas."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from venice_core.config import RegionConfig
from venice_core.controller.placement import RoutingTable
from venice_core.errors import NoCurrentVersion, StoreNotFound, VeniceError
from venice_core.meta import MetadataStore
from venice_core.protocol.compression import CompressionStrategy, decompressor
from venice_core.protocol.envelope import SCHEMA_ID
from venice_core.pubsub.control import read_start_of_push, start_of_push_dictionary
from venice_core.server.hosting import HostedVersion, VersionKey
from venice_core.storage.rocksdb import PartitionStorage


class VersionNotHosted(VeniceError):
    http_status = 404


class PartitionNotHosted(VeniceError):
    """This instance holds no ready replica of the partition a read asks for: a routing client asks another."""

    http_status = 503


class Reads:
    """The reads of one instance, over its hosted versions (`hosted`, shared with its `Hosting`), and what the region
    serves as of the last sync (`update`)."""

    def __init__(
        self, region: RegionConfig, instance: int, meta: MetadataStore, hosted: dict[VersionKey, HostedVersion]
    ) -> None:
        self.region, self.instance, self.meta, self.hosted = region, instance, meta, hosted
        self.current: dict[str, int] = {}
        self.stores: set[str] = set()  # every store, served here or not
        self.routing: dict[str, RoutingTable] = {}
        self.wanted: set[VersionKey] = set()  # the versions the region hosts, on this instance or others
        self._dictionaries: dict[VersionKey, bytes | None] = {}
        self._lock = threading.Lock()

    def update(
        self, current: dict[str, int], stores: set[str], routing: dict[str, RoutingTable], wanted: set[VersionKey]
    ) -> None:
        """What the region serves, as a sync read it."""
        with self._lock:
            self.current, self.stores, self.routing, self.wanted = current, stores, routing, wanted

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

    def routing_table(self, store: str) -> dict[str, Any]:
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
        hosted.decompress = decompressor(hosted.compression, self.required_dictionary(hosted.store, hosted.number))
        return hosted.decompress

    def required_dictionary(self, store: str, number: int) -> bytes:
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

    def schema_document(self, store: str) -> dict[str, Any]:
        from venice_core.controller.stores import describe_store

        info = describe_store(self.meta, store)
        return {
            "key_schema": info.key_schema,
            "value_schemas": {str(entry.id): entry.schema for entry in info.value_schemas},
        }
