"""Nearline writes on the session's real broker: what `OnlineWriter` and `venice write`/`venice delete` put on a
region's real-time topic, read back with a plain consumer and decoded with the protocol (DIV framing, write
timestamps, chunking, byte-identical replays under one GUID); the real-time topics made and deleted with the
store."""

from __future__ import annotations

import json
import zlib

from tests.support.platform import PlatformEnv
from tests.support.reads import wait_for
from tests.support.topics import read_partition
from venice_core.controller import stores
from venice_core.errors import InvalidRecord
from venice_core.nearline.writer import OnlineWriter
from venice_core.protocol import chunking, serde
from venice_core.protocol.div import deterministic_guid
from venice_core.protocol.envelope import (
    CHUNK_SCHEMA_ID,
    MANIFEST_SCHEMA_ID,
    ControlMessageType,
    Message,
    MessageType,
    checksum_bytes,
    decode,
)
from venice_core.protocol.partitioner import partition_for
from venice_core.pubsub import admin

PARTITIONS = 2


def _hybrid_store(env: PlatformEnv, prefix: str) -> str:
    store = env.create_user_store(prefix, partitions=PARTITIONS)
    stores.update_store(env.meta, env.config, store, hybrid_rewind_seconds=60)
    return store


def _segments(records: list[tuple[bytes, bytes]]) -> list[list[tuple[Message, bytes, bytes]]]:
    """A partition's messages cut into DIV segments, each checked for its framing: START_OF_SEGMENT at sequence
    0, data numbered on, END_OF_SEGMENT with the CRC32 of the data and the last write's timestamp."""
    segments: list[list[tuple[Message, bytes, bytes]]] = []
    for key, value in records:
        message = decode(key, value)
        if message.control_type is ControlMessageType.START_OF_SEGMENT:
            segments.append([])
        segments[-1].append((message, key, value))
    for segment in segments:
        (first, *_), data, (last, *_) = segment[0], segment[1:-1], segment[-1]
        assert first.producer.sequence == 0 and last.control_type is ControlMessageType.END_OF_SEGMENT
        assert [m.producer.sequence for m, _, _ in segment] == list(range(len(segment)))
        assert len({(m.producer.guid, m.producer.segment) for m, _, _ in segment}) == 1
        checksum = 0
        for _, key, value in data:
            checksum = zlib.crc32(checksum_bytes(key, value), checksum)
        assert last.control == {"checksum": checksum, "final": True}
        assert first.producer.timestamp_ms == data[0][0].producer.timestamp_ms
        assert last.producer.timestamp_ms == data[-1][0].producer.timestamp_ms
    return segments


def test_online_writer_frames_stamps_and_chunks_and_replays_byte_identical(platform_env: PlatformEnv) -> None:
    env, config = platform_env, platform_env.config
    store = _hybrid_store(env, "nearline")
    region = config.region("dc-1")
    topic = region.real_time_topic(store)
    key_schema = serde.parse("string")
    big = {"name": "x" * (chunking.DEFAULT_MAX_CHUNK_BYTES + 1000), "age": 9, "score": 0.5}
    guid = deterministic_guid("test-query", 7, store)

    def write() -> None:
        with OnlineWriter(store, "dc-1", config=config, meta=env.meta, guid=guid) as writer:
            writer.put("k1", {"name": "a", "age": 1, "score": 1.0}, timestamp=1_000)
            try:
                writer.put("k1", {"name": "a", "age": "one", "score": 1.0}, timestamp=1_500)
                raise AssertionError("a value of the wrong type was written")
            except InvalidRecord as refused:  # nothing produced: the sequence numbers below have no gap
                assert "field demo.UserProfile.age is 'one', not int" in str(refused)
            writer.put("k2", {"name": "b", "age": 2, "score": 2.0}, timestamp=2_000)
            writer.delete("k1", timestamp=3_000)
            writer.put("big", big, timestamp=4_000)

    write()
    first = [read_partition(region.kafka_bootstrap, topic, p) for p in range(PARTITIONS)]
    written: dict[bytes, list[tuple[int, int]]] = {}
    for partition, records in enumerate(first):
        (segment,) = _segments(records)  # one segment per partition written to, ended by close
        for message, _, _ in segment[1:-1]:
            assert message.producer.guid == guid and message.producer.segment == 0
            user_key = message.key.split(chunking.CHUNK_MARKER)[0]
            assert partition_for(user_key, PARTITIONS) == partition
            written.setdefault(message.key, []).append((message.type, message.producer.timestamp_ms))
    k1, k2, big_key = (serde.serialize(key_schema, k) for k in ("k1", "k2", "big"))
    assert written[k1] == [(MessageType.PUT, 1_000), (MessageType.DELETE, 3_000)]
    assert written[k2] == [(MessageType.PUT, 2_000)]
    assert written[big_key] == [(MessageType.PUT, 4_000)]  # the manifest, after its chunks

    # The large value: chunks stamped like the record, then a manifest naming them and the real schema id.
    big_messages = [m for records in first for k, v in records if (m := decode(k, v)).key.startswith(big_key)]
    chunks, manifest = big_messages[:-1], big_messages[-1]
    assert len(chunks) == 2 and {m.schema_id for m in chunks} == {CHUNK_SCHEMA_ID}
    assert manifest.schema_id == MANIFEST_SCHEMA_ID and {m.producer.timestamp_ms for m in big_messages} == {4_000}
    assert chunking.Manifest.decode(manifest.value).chunk_keys == [m.key for m in chunks]
    assert serde.deserialize(serde.parse(_value_schema(env, store)), b"".join(m.value for m in chunks)) == big

    # Another writer under the same GUID making the same calls (a replayed micro-batch) sends the same bytes.
    write()
    for partition, records in enumerate(first):
        again = read_partition(region.kafka_bootstrap, topic, partition)
        assert again == records + records

    for name in ("dc-0", "dc-2"):  # the other regions' real-time topics exist, untouched
        other = config.region(name)
        assert admin.partition_count(other.kafka_bootstrap, other.real_time_topic(store)) == PARTITIONS
        assert read_partition(other.kafka_bootstrap, other.real_time_topic(store), 0) == []


def _value_schema(env: PlatformEnv, store: str) -> object:
    return json.loads(stores.list_value_schemas(env.meta, store)[-1][1])


def test_cli_write_and_delete_and_the_stores_topics(platform_env: PlatformEnv) -> None:
    env, config = platform_env, platform_env.config
    store = env.create_user_store("nearline_cli", partitions=1)
    env.cli("store", "update", store, "--hybrid-rewind-seconds", "30", "--hybrid-offset-lag-threshold", "5", check=True)
    for region in config.regions:
        assert admin.partition_count(region.kafka_bootstrap, region.real_time_topic(store)) == 1
    shown = env.cli("store", "show", store, check=True).stdout
    assert "hybrid:               rewind 30 s, offset lag threshold 5" in shown

    result = env.cli(
        "write",
        store,
        "k",
        '{"name": "a", "age": 1, "score": 1.5}',
        "--region",
        "dc-2",
        "--timestamp",
        "123",
        check=True,
    )
    topic = config.region("dc-2").real_time_topic(store)
    assert result.stdout == f"wrote key k to '{store}' in dc-2 ({topic}, timestamp 123)\n"
    env.cli("delete", store, "k", "--region", "dc-2", "--timestamp", "124", check=True)
    messages = [decode(k, v) for k, v in read_partition(config.region("dc-2").kafka_bootstrap, topic, 0)]
    kinds = [(m.control_type or m.type, m.producer.timestamp_ms) for m in messages]
    assert kinds == [
        (ControlMessageType.START_OF_SEGMENT, 123),
        (MessageType.PUT, 123),
        (ControlMessageType.END_OF_SEGMENT, 123),
        (ControlMessageType.START_OF_SEGMENT, 124),
        (MessageType.DELETE, 124),
        (ControlMessageType.END_OF_SEGMENT, 124),
    ]
    assert messages[1].schema_id == messages[4].schema_id == 1
    assert messages[0].producer.guid != messages[3].producer.guid  # a random GUID per writer

    env.cli("store", "delete", store, check=True)
    region = config.region("dc-2")
    wait_for(  # Kafka deletes topics asynchronously
        f"{topic} to be gone after the store's deletion",
        lambda: admin.partition_count(region.kafka_bootstrap, topic) is None,
        timeout=15,
        interval=0.2,
    )
