"""A store on a partitioner other than the default, end to end on the session's broker, region servers and Spark: a
repush moves it from MD5 to the key-field partitioner (through the shuffle) with every key readable after; then,
hybrid, a push and a nearline write of the same key land in the same partition, and the routing client, a plain
GET and a Da Vinci client find every key, while a reader whose allowed classes do not name the partitioner refuses
the version with one clear error."""

from __future__ import annotations

import base64
import json
import urllib.request
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.support.jobs import RecordsJob
from tests.support.platform import SCHEMAS, PlatformEnv
from tests.support.reads import holds, wait_for
from tests.support.topics import read_partition
from venice_core.client import ReadClient
from venice_core.controller import stores
from venice_core.davinci.client import DaVinciClient
from venice_core.nearline.writer import OnlineWriter
from venice_core.protocol import serde
from venice_core.protocol.envelope import MessageType, decode
from venice_core.protocol.partitioner import KEY_FIELD_PARTITIONER_CLASS, VenicePartitioner, partition_for
from venice_core.protocol.partitioner_config import PartitionerConfig, PartitionerNotAllowed, load_partitioner
from venice_core.rollout import local

PARTITIONS = 4
KEY_SCHEMA = {
    "type": "record",
    "name": "MemberItem",
    "fields": [{"name": "member_id", "type": "string"}, {"name": "item", "type": "int"}],
}
BY_MEMBER = PartitionerConfig(KEY_FIELD_PARTITIONER_CLASS, {"key.field": "member_id"})
INPUT_SCHEMA = pa.schema(
    [
        ("key", pa.struct([("member_id", pa.string()), ("item", pa.int32())])),
        ("name", pa.string()),
        ("age", pa.int32()),
        ("score", pa.float64()),
    ]
)


def _value(i: int, name: str = "") -> dict[str, Any]:
    return {"name": name or f"n{i}", "age": i % 90, "score": float(i)}


def _key(member: int, item: int) -> dict[str, Any]:
    return {"member_id": f"member-{member}", "item": item}


def _input(folder: Path, records: list[tuple[dict[str, Any], dict[str, Any]]]) -> Path:
    folder.mkdir(parents=True)
    rows = [{"key": key, **value} for key, value in records]
    pq.write_table(pa.Table.from_pylist(rows, INPUT_SCHEMA), folder / "part-0.parquet")
    return folder


def _placement(env: PlatformEnv, topic: str) -> dict[bytes, set[int]]:
    """Each key written to a topic of the source region (PUTs), with the partitions it was written to."""
    bootstrap = env.config.region(env.config.source_region).kafka_bootstrap
    placed: dict[bytes, set[int]] = {}
    for partition in range(PARTITIONS):
        for kafka_key, kafka_value in read_partition(bootstrap, topic, partition):
            message = decode(kafka_key, kafka_value)
            if message.type is MessageType.PUT:
                placed.setdefault(message.key, set()).add(partition)
    return placed


def _moved(key: bytes, partitioner: VenicePartitioner) -> bool:
    """Whether the partitioner puts the key elsewhere than MD5 does (where the default would tell them apart)."""
    return partitioner.partition(key, PARTITIONS) != partition_for(key, PARTITIONS)


def _reads(env: PlatformEnv, store: str, expected: list[tuple[dict[str, Any], dict[str, Any]]]) -> Any:
    """A check for `eventually`: every region's routing client reads `expected`."""
    clients = [ReadClient.for_region(env.config, region) for region in env.config.region_names]

    def check() -> Any:
        for client in clients:
            wrong = [key for key, value in expected if client.get(store, key) != value]
            if wrong:
                return f"{client.region}: {len(wrong)} keys differ, e.g. {wrong[0]}"
        return True

    return check


def test_a_repush_moves_a_store_to_the_key_field_partitioner_and_a_push_and_a_nearline_write_agree_on_it(
    platform_env: PlatformEnv, spark_job: Any, tmp_path: Path
) -> None:
    env, config = platform_env, platform_env.config
    store = f"likes_{uuid.uuid4().hex[:8]}"
    stores.create_store(
        env.meta, config, store, json.dumps(KEY_SCHEMA), (SCHEMAS / "user_value_v1.avsc").read_text(), PARTITIONS
    )
    records = [(_key(member, item), _value(10 * member + item)) for member in range(5) for item in range(8)]
    key_bytes = {json.dumps(key): serde.serialize(serde.parse(KEY_SCHEMA), key) for key, _ in records}
    by_member = load_partitioner(BY_MEMBER, KEY_SCHEMA, config.partitioner_classes)
    assert env.push(store, RecordsJob(records)) == 1  # the default partitioner: MD5

    # The store moves to the key-field partitioner: a repush re-partitions it through the shuffle, and pins it.
    stores.update_store(
        env.meta, config, store, partitioner_class=BY_MEMBER.class_path, partitioner_params=BY_MEMBER.params
    )
    lines: list[str] = []
    assert local.repush(config, env.meta, store, {}, progress=lines.append, run_job=spark_job) == 2
    assert any(f"(shuffled) and wrote {len(records)} records" in line for line in lines), lines
    info = stores.describe_store(env.meta, store)
    assert [(v.number, v.partitioner) for v in info.versions] == [(1, PartitionerConfig()), (2, BY_MEMBER)]
    source = config.region(config.source_region)
    placed = _placement(env, source.version_topic(store, 2))
    assert placed == {k: {by_member.partition(k, PARTITIONS)} for k in key_bytes.values()}
    assert any(_moved(k, by_member) for k in key_bytes.values())
    wait_for("every key of version 2 read in every region", holds(_reads(env, store, records)), 90, 0.1)

    # Hybrid (allowed: no version ingests its real-time topics yet), then a push and a nearline write of one key.
    stores.update_store(env.meta, config, store, hybrid_rewind_seconds=3600, hybrid_offset_lag_threshold=0)
    assert env.push(store, spark_job, _input(tmp_path / "v3", records)) == 3
    moved = next(key for key, _ in records if _moved(key_bytes[json.dumps(key)], by_member))
    added = _key(9, 1)
    with OnlineWriter(store, source.name, config=config, meta=env.meta) as writer:
        writer.put(moved, _value(1, "nearline"))
        writer.put(added, _value(2, "added"))
    moved_bytes = key_bytes[json.dumps(moved)]
    pushed = _placement(env, source.version_topic(store, 3))[moved_bytes]
    written = _placement(env, source.real_time_topic(store))
    assert pushed == written[moved_bytes] == {by_member.partition(moved_bytes, PARTITIONS)}
    added_bytes = serde.serialize(serde.parse(KEY_SCHEMA), added)
    assert written[added_bytes] == {by_member.partition(added_bytes, PARTITIONS)}

    expected = [(key, _value(1, "nearline") if key == moved else value) for key, value in records]
    expected.append((added, _value(2, "added")))
    wait_for("the nearline writes read in every region", holds(_reads(env, store, expected)), 90, 0.1)
    # A plain GET: the region server finds the key's partition itself.
    encoded = base64.urlsafe_b64encode(moved_bytes).decode().rstrip("=")
    with urllib.request.urlopen(f"http://127.0.0.1:{config.server_port('dc-1')}/storage/{store}/{encoded}") as got:
        value_schema = serde.parse(json.loads((SCHEMAS / "user_value_v1.avsc").read_text()))
        assert serde.deserialize(value_schema, got.read()) == _value(1, "nearline")
    # A Da Vinci client (RocksDB: a partition per database) finds each key in the partition the version's gives it.
    da_vinci = DaVinciClient(store, "dc-2", tmp_path / "da-vinci", config=config)
    da_vinci.start(timeout=120)
    try:
        assert all(da_vinci.get(key) == value for key, value in expected)
    finally:
        da_vinci.close()

    # A reader whose allowed classes do not name the version's partitioner refuses it, naming the version.
    refusing = ReadClient.for_region(replace(config, partitioner_classes=()), "dc-0")
    with pytest.raises(PartitionerNotAllowed) as refused:
        refusing.get(store, moved)
    assert str(refused.value).startswith(
        f"store '{store}' version 3: partitioner class '{BY_MEMBER.class_path}' is not in venice.partitioner.classes"
    )
