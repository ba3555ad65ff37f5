"""The ingestion loop's batched hot path, fed by a stand-in consumer (no broker): exact data, duplicates skipped,
and the general path for control messages, chunks and deletes in the same batches."""

from __future__ import annotations

import threading
from pathlib import Path

from bench.ingest_hot_path import FakeConsumer, FakeMessage
from venice_core.ingestion.task import PartitionIngestionTask
from venice_core.protocol import chunking
from venice_core.protocol.div import SegmentState, Validator, deterministic_guid
from venice_core.protocol.envelope import (
    CHUNK_SCHEMA_ID,
    MANIFEST_SCHEMA_ID,
    SCHEMA_ID,
    ControlMessageType,
    checksum_bytes,
    encode_control,
    encode_delete,
    encode_put,
)
from venice_core.storage.rocksdb import PartitionStorage


def _writer_messages(guid: bytes, puts: list[tuple[bytes, bytes]], deletes: list[bytes]) -> list[tuple[bytes, bytes]]:
    state = SegmentState(guid)
    out = [encode_control(state.start_segment(), ControlMessageType.START_OF_SEGMENT, {})]

    def data(encoded: tuple[bytes, bytes]) -> None:
        state.add(checksum_bytes(*encoded))
        out.append(encoded)

    for key, value in puts:
        if len(value) > 100:
            for part_key, part in chunking.split(key, value, 1, 100):
                schema = MANIFEST_SCHEMA_ID if part_key == key else CHUNK_SCHEMA_ID
                data(encode_put(state.next(), part_key, schema, part))
        else:
            data(encode_put(state.next(), key, 1, value))
    for key in deletes:
        data(encode_delete(state.next(), key, 1))
    out.append(encode_control(state.next(), ControlMessageType.END_OF_SEGMENT, {"checksum": state.checksum}))
    return out


def test_batched_loop_exact_data_with_a_retried_writer(tmp_path: Path) -> None:
    guid = deterministic_guid("batch", 0)
    puts = [(b"k%05d" % i, b"v%d" % i) for i in range(12_000)] + [(b"big", b"L" * 450)]
    first = _writer_messages(guid, puts[:7000], [])[:-1]  # a task that died before ending its segment
    retry = _writer_messages(guid, puts, [b"k00003"])
    control = SegmentState(deterministic_guid("batch", "control"))
    eop = [
        encode_control(control.start_segment(), ControlMessageType.START_OF_SEGMENT, {}),
        encode_control(control.next(), ControlMessageType.END_OF_PUSH, {"record_counts": {"0": len(puts)}}),
    ]
    feed = [FakeMessage(k, v, offset) for offset, (k, v) in enumerate(first + retry + eop)]
    storage = PartitionStorage(tmp_path / "p0")
    task = PartitionIngestionTask("unused", "t", 0, storage, lambda *_: None, "test")
    checkpoint = {"next_offset": 0, "div": {}, "sop": None, "eop": False, "records": 0}
    task._loop(FakeConsumer(feed), Validator(), checkpoint, threading.Event())
    assert task.completed and task.stats.records == len(puts)
    assert task.stats.duplicates == 7001  # the retry's START_OF_SEGMENT and its first 7000 records
    for key, value in puts:
        assert storage.get(key) == (None if key == b"k00003" else SCHEMA_ID.pack(1) + value)
    saved = storage.checkpoint()
    assert saved["eop"] and saved["next_offset"] == len(feed) and saved["records"] == len(puts)
    storage.close()
