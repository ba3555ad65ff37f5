"""A region server in the test's own process, without a broker: one store of the example user schemas, its version 1
seeded straight into one RocksDB partition, what the read-path tests serve over HTTP (`server.http.serve`); and a
key as those tests put it in a raw request's URL."""

from __future__ import annotations

import base64
import json
import threading
from pathlib import Path
from typing import Any

from tests.support.metadata import migrated
from tests.support.platform import SCHEMAS, make_platform_env
from venice_core.controller import placement, stores
from venice_core.ingestion.task import PartitionIngestionTask
from venice_core.meta import MetadataStore
from venice_core.protocol import serde
from venice_core.protocol.compression import CompressionStrategy, decompressor
from venice_core.protocol.envelope import SCHEMA_ID
from venice_core.protocol.partitioner_config import PartitionerConfig, VersionPartitioner
from venice_core.server.hosting import HostedPartition, HostedVersion
from venice_core.server.region_server import RegionServer
from venice_core.storage.ingestion_checkpoint import IngestionCheckpoint
from venice_core.storage.rocksdb import PartitionStorage


def seeded_region(home: Path, store: str, records: dict[int, dict[str, Any]]) -> RegionServer:
    """Region dc-0 serving `store` (key `user_key.avsc`, value schemas `user_value_v1.avsc` up to the highest id in
    `records`), its current version 1 holding `records`: value-schema id -> {key: value}. The caller closes the
    partition (`region.hosted[(store, 1)].partitions[0].storage`) and disposes of `region.meta`."""
    config = make_platform_env(home).config
    meta = MetadataStore(config.metadata_db_url)
    migrated(meta)
    key_text = (SCHEMAS / "user_key.avsc").read_text()
    value_texts = {i: (SCHEMAS / f"user_value_v{i}.avsc").read_text() for i in range(1, max(records) + 1)}
    stores.create_store(meta, config, store, key_text, value_texts[1], partitions=1)
    for schema_id in range(2, max(records) + 1):
        assert stores.add_value_schema(meta, config, store, value_texts[schema_id]) == schema_id
    meta.dispose()
    region = RegionServer(config, "dc-0")
    storage = PartitionStorage(home / "storage" / "p0")
    batch = storage.new_batch()
    key_schema = serde.parse(json.loads(key_text))
    for schema_id, values in records.items():
        value_schema = serde.parse(json.loads(value_texts[schema_id]))
        for key, value in values.items():
            stored = SCHEMA_ID.pack(schema_id) + serde.serialize(value_schema, value)
            batch.put(serde.serialize(key_schema, key), stored)
    count = sum(len(values) for values in records.values())
    storage.commit(batch, IngestionCheckpoint(end_of_push=True, records=count))
    no_op = decompressor(CompressionStrategy.NO_OP)
    task = PartitionIngestionTask("127.0.0.1:9", "unused", 0, storage, lambda *_: None, "unused")
    task.completed = True  # what a task that ingested the version through END_OF_PUSH says
    default = VersionPartitioner(PartitionerConfig(), key_text, (), f"store '{store}' version 1")
    hosted = HostedVersion(store, 1, 1, no_op, None, 1, default)
    hosted.partitions[0] = HostedPartition(storage, task, threading.Thread(), threading.Event())
    region.hosted[(store, 1)] = hosted
    region.reads.current = {store: 1}
    region.reads.stores = {store}
    return region


def route_to(region: RegionServer, store: str, address: tuple[str, int]) -> None:
    """The region's routing table for `store`: its one partition on this one server, at `address` (known once it
    listens)."""
    region.reads.routing[store] = placement.RoutingTable(store, "dc-0", 1, 1, ((f"{address[0]}:{address[1]}",),))


def url_key(key: bytes) -> str:
    """A serialised key as the read API carries it in a URL (`GET /storage/<store>/<key>`) and in a JSON batch:
    URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(key).decode().rstrip("=")
