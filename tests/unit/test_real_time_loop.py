"""The real-time loop on given messages, without a broker: large values of two writers to one key do not mix, and
one writer's gap is counted and survived (the region keeps taking nearline writes)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from tests.support.kafka_fakes import FakeMessage
from venice_core.ingestion import real_time
from venice_core.ingestion.real_time import HybridIngestion, RealTimeIngestion, RealTimeSource
from venice_core.model.hybrid import HybridSettings
from venice_core.protocol import chunking
from venice_core.protocol.div import SegmentState, Validator
from venice_core.protocol.envelope import (
    CHUNK_SCHEMA_ID,
    MANIFEST_SCHEMA_ID,
    SCHEMA_ID,
    ControlMessageType,
    encode_control,
    encode_put,
)
from venice_core.storage.ingestion_checkpoint import IngestionCheckpoint
from venice_core.storage.rocksdb import PartitionStorage

TOPIC = "dc-0.store_rt"


class Message(FakeMessage):
    __slots__ = ()

    def topic(self) -> str:
        return TOPIC

    def partition(self) -> int:
        return 0


class Feed:
    """A consumer that hands out the messages once, then asks the loop to stop."""

    def __init__(self, encoded: list[tuple[bytes, bytes]], stop: threading.Event) -> None:
        self.messages = [Message(k, v, offset) for offset, (k, v) in enumerate(encoded)]
        self.stop = stop

    def consume(self, num_messages: int, timeout: float) -> list[Message]:
        batch, self.messages = self.messages[:num_messages], self.messages[num_messages:]
        if not batch:
            self.stop.set()
        return batch

    def get_watermark_offsets(self, *_args: Any, **_kwargs: Any) -> tuple[int, int]:
        return 0, 0


class Written:
    """The version-topic writer's calls (what is written on)."""

    def __init__(self) -> None:
        self.puts: list[tuple[bytes, bytes, int]] = []

    def put(self, key: bytes, value: bytes, schema_id: int, partition: int, timestamp_ms: int) -> None:
        self.puts.append((key, value, timestamp_ms))

    def delete(self, *_args: Any, **_kwargs: Any) -> None:
        raise AssertionError("no delete here")

    def flush(self, *_args: Any) -> None:
        pass


def _parts(state: SegmentState, key: bytes, value: bytes, timestamp: int) -> list[tuple[bytes, bytes]]:
    parts = []
    for part_key, part in chunking.split(key, value, 1, 100):
        schema = MANIFEST_SCHEMA_ID if part_key == key else CHUNK_SCHEMA_ID
        parts.append(encode_put(state.next(timestamp), part_key, schema, part))
    return parts


def _run(encoded: list[tuple[bytes, bytes]], tmp_path: Path) -> tuple[RealTimeIngestion, PartitionStorage, Written]:
    storage = PartitionStorage(tmp_path / "p0")
    hybrid = HybridIngestion(
        HybridSettings(60, 0), (RealTimeSource("dc-0", "unused", TOPIC),), "unused", "vt", 1, bytes
    )
    ingestion = RealTimeIngestion(hybrid, 0, storage, lambda *_: None, "test")
    ingestion._positions = {(TOPIC, 0): 0}
    stop = threading.Event()
    written = Written()
    base = IngestionCheckpoint(next_offset=1, end_of_push=True, end_of_push_time_ms=0)
    ingestion._consume(Feed(encoded, stop), written, Validator(join_mid_segment=True), base, stop)
    return ingestion, storage, written


def test_large_values_of_two_writers_to_one_key_do_not_mix(tmp_path: Path) -> None:
    first, second = SegmentState(b"a" * 16), SegmentState(b"b" * 16)
    older, newer = b"o" * 350, b"n" * 420
    encoded = [
        encode_control(first.start_segment(), ControlMessageType.START_OF_SEGMENT, {}),
        encode_control(second.start_segment(), ControlMessageType.START_OF_SEGMENT, {}),
    ]
    mine, theirs = _parts(first, b"k", older, 1_000), _parts(second, b"k", newer, 2_000)
    for pair in zip(mine, theirs, strict=False):  # chunks of the two writers interleaved, manifests last
        encoded.extend(pair)
    encoded.extend(mine[len(theirs) :] + theirs[len(mine) :])
    ingestion, storage, written = _run(encoded, tmp_path)
    try:
        assert storage.get(b"k") == SCHEMA_ID.pack(1) + newer  # the later write, whole
        assert written.puts[-1] == (b"k", newer, 2_000)
        assert ingestion.integrity_errors == 0
    finally:
        storage.close()


def test_a_writers_gap_is_counted_and_the_writes_after_it_applied(tmp_path: Path) -> None:
    writer = SegmentState(b"c" * 16)
    encoded = [encode_control(writer.start_segment(), ControlMessageType.START_OF_SEGMENT, {})]
    encoded.append(encode_put(writer.next(10), b"k1", 1, b"one"))
    writer.next(11)  # a message lost on the way
    encoded.append(encode_put(writer.next(12), b"k3", 1, b"three"))
    encoded.append(encode_put(writer.next(13), b"k4", 1, b"four"))
    ingestion, storage, _ = _run(encoded, tmp_path)
    try:
        assert ingestion.integrity_errors == 1
        assert [storage.get(k) for k in (b"k1", b"k3", b"k4")] == [
            SCHEMA_ID.pack(1) + v for v in (b"one", b"three", b"four")
        ]
    finally:
        storage.close()


def test_a_backlog_commits_every_so_many_writes_and_a_caught_up_loop_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Full batches (a backlog) commit every BACKLOG_COMMIT_EVERY writes; a batch that is not full (caught up)
    commits at once, so what came is readable, and the last commit covers every write."""
    monkeypatch.setattr(real_time, "CONSUME_BATCH", 10)
    monkeypatch.setattr(real_time, "BACKLOG_COMMIT_EVERY", 30)
    monkeypatch.setattr(real_time, "BACKLOG_COMMIT_SECONDS", 3600.0)
    commits: list[int] = []
    original = PartitionStorage.commit

    def commit(self: PartitionStorage, batch: Any, checkpoint: IngestionCheckpoint) -> None:
        commits.append(checkpoint.real_time.offsets[(TOPIC, 0)])
        original(self, batch, checkpoint)

    monkeypatch.setattr(PartitionStorage, "commit", commit)
    writer = SegmentState(b"d" * 16)
    encoded = [encode_control(writer.start_segment(), ControlMessageType.START_OF_SEGMENT, {})]
    encoded += [encode_put(writer.next(100 + i), b"k%03d" % i, 1, b"v%d" % i) for i in range(104)]
    ingestion, storage, _ = _run(encoded, tmp_path)  # 10 full batches of 10, then one of 5
    try:
        assert commits == [30, 60, 90, 105]
        assert ingestion.applied == 104
        assert all(storage.get(b"k%03d" % i) == SCHEMA_ID.pack(1) + b"v%d" % i for i in range(104))
    finally:
        storage.close()
