"""The ingestion loop's batched hot path, fed by a stand-in consumer (no broker): exact data, duplicates skipped,
and the general path for control messages, chunks and deletes in the same batches."""

from __future__ import annotations

import copy
import random
import threading
from itertools import chain
from pathlib import Path

import pytest

from tests.support.kafka_fakes import FakeConsumer, FakeMessage
from venice_core.ingestion import batch_phase
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
from venice_core.protocol.put_run import PutRun
from venice_core.storage.ingestion_checkpoint import IngestionCheckpoint, StartOfPush
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
    task._follow(task._batch_phase(IngestionCheckpoint()), FakeConsumer(feed), threading.Event())
    assert task.completed and task.stats.records == len(puts)
    assert task.stats.duplicates == 7001  # the retry's START_OF_SEGMENT and its first 7000 records
    for key, value in puts:
        assert storage.get(key) == (None if key == b"k00003" else SCHEMA_ID.pack(1) + value)
    saved = storage.checkpoint()
    assert saved.end_of_push and saved.next_offset == len(feed) and saved.records == len(puts)
    storage.close()


class _RecordingStore:
    """A `PartitionStore` in dicts that applies each commit's operations in order; it takes a run of PUTs whole or
    put by put, and ingests sorted pushes through `sst_put` or not."""

    commit_every_messages = 20_000
    commit_every_seconds = 1.0

    def __init__(self, whole_runs: bool, sorted_ingest: bool) -> None:
        self.whole_runs, self.sorted_ingest = whole_runs, sorted_ingest
        self.data: dict[bytes, bytes] = {}
        self.stamps: dict[bytes, bytes] = {}
        self.chunks: dict[bytes, bytes] = {}
        self.sst: list[tuple[bytes, bytes]] = []
        self.checkpoints: list[IngestionCheckpoint] = []

    class Batch:
        def __init__(self) -> None:
            self.ops: list[tuple] = []

        def put(self, key: bytes, value: bytes) -> None:
            self.ops.append(("put", bytes(key), bytes(value)))

        def delete(self, key: bytes) -> None:
            self.ops.append(("delete", bytes(key)))

    def new_batch(self) -> Batch:
        return self.Batch()

    def put_run(self, batch: Batch, run: PutRun) -> None:
        if self.whole_runs:
            batch.ops.extend(("put", k, v) for k, v in zip(run.keys(), run.stored(), strict=True))
        else:
            for key, stored in zip(run.keys(), run.stored(), strict=True):
                batch.put(key, stored)

    def commit(self, batch: Batch, checkpoint: IngestionCheckpoint) -> None:
        for op, key, *value in batch.ops:
            target = {"put": self.data, "delete": self.data, "stamp": self.stamps, "chunk": self.chunks}.get(op)
            if op in ("delete", "drop"):
                (self.chunks if op == "drop" else self.data).pop(key, None)
            else:
                target[key] = value[0]
        self.checkpoints.append(checkpoint)

    def stage_chunk(self, batch: Batch, chunk_key: bytes, value: bytes) -> None:
        batch.ops.append(("chunk", bytes(chunk_key), bytes(value)))

    def drop_chunk(self, batch: Batch, chunk_key: bytes) -> None:
        batch.ops.append(("drop", bytes(chunk_key)))

    def get_chunk(self, chunk_key: bytes) -> bytes | None:
        return self.chunks.get(chunk_key)

    def put_write_stamp(self, batch: Batch, key: bytes, stamp: bytes) -> None:
        batch.ops.append(("stamp", bytes(key), bytes(stamp)))

    def sst_put(self, key: bytes, value: bytes) -> None:
        self.sst.append((bytes(key), bytes(value)))

    def sst_put_run(self, keys: list[bytes], values: list[bytes]) -> None:
        for key, value in zip(keys, values, strict=True):
            self.sst_put(key, value)

    def ingest_sst(self) -> None:
        self.data.update(self.sst)
        self.sst.clear()


class _RandomBatches(FakeConsumer):
    """A consumer that hands out the feed in batches of random sizes (runs cut anywhere)."""

    def __init__(self, feed: list[FakeMessage], rng: random.Random) -> None:
        super().__init__(feed)
        self.rng = rng

    def consume(self, num_messages: int, timeout: float) -> list[FakeMessage]:
        return super().consume(self.rng.choice([1, 5, 16, 17, 40, 100, num_messages]), timeout)


def _mixed_feed(rng: random.Random) -> list[FakeMessage]:
    """Two producers: stretches of plain PUTs from the first, between them anything from either (PUTs with and
    without write timestamps, schema id 0 to 3, deletes, chunked values); sometimes a retried slice of messages;
    then END_OF_PUSH."""
    states = [SegmentState(deterministic_guid("mixed", i)) for i in range(2)]
    out = [encode_control(s.start_segment(), ControlMessageType.START_OF_SEGMENT, {}) for s in states]

    def data(state: SegmentState, encoded: tuple[bytes, bytes]) -> None:
        state.add(checksum_bytes(*encoded))
        out.append(encoded)

    for stretch in range(rng.randint(2, 6)):
        for i in range(rng.randint(20, 200)):  # a clean stretch: what a push's producer writes
            data(states[0], encode_put(states[0].next(0), b"k%03d" % rng.randint(0, 80), 1, b"v%d.%d" % (stretch, i)))
        for i in range(rng.randint(1, 10)):  # then anything
            state, key = rng.choice(states), b"k%03d" % rng.randint(0, 80)
            timestamp, kind = rng.choice([0, rng.randint(1, 10**6)]), rng.random()
            if kind < 0.3:
                data(state, encode_delete(state.next(timestamp), key, 1))
            elif kind < 0.5:
                for part_key, part in chunking.split(key, b"L" * 250, 1, 100):
                    schema = MANIFEST_SCHEMA_ID if part_key == key else CHUNK_SCHEMA_ID
                    data(state, encode_put(state.next(timestamp), part_key, schema, part))
            else:
                data(state, encode_put(state.next(timestamp), key, rng.randint(0, 3), b"w%d.%d" % (stretch, i)))
    if rng.random() < 0.5:
        at = rng.randint(21, len(out) - 1)
        out[at:at] = out[at - 20 : at]  # a writer's retry re-sends what it sent before
    for state in states:
        out.append(encode_control(state.next(), ControlMessageType.END_OF_SEGMENT, {"checksum": state.checksum}))
    control = SegmentState(deterministic_guid("mixed", "control"))
    out.append(encode_control(control.start_segment(), ControlMessageType.START_OF_SEGMENT, {}))
    out.append(encode_control(control.next(), ControlMessageType.END_OF_PUSH, {}))
    return [FakeMessage(k, v, offset) for offset, (k, v) in enumerate(out)]


@pytest.mark.parametrize("whole_runs", [False, True], ids=["put", "whole_runs"])
@pytest.mark.parametrize("hybrid", [False, True], ids=["batch", "hybrid"])
@pytest.mark.parametrize("sorted_push", [False, True], ids=["unsorted", "sorted"])
def test_runs_of_puts_ingest_exactly_as_one_message_at_a_time(
    monkeypatch: pytest.MonkeyPatch, whole_runs: bool, hybrid: bool, sorted_push: bool
) -> None:
    """The loop with PUT runs (`protocol.put_run`) and without them (every batch one message at a time) leave the same
    data, write stamps, checkpoints, counts and verdicts, over random feeds cut into random batches."""

    def ingest(feed: list[FakeMessage], seed: int, runs: bool) -> tuple:
        monkeypatch.setattr(batch_phase, "RUN_MIN_MESSAGES", 16 if runs else 10**9)
        store = _RecordingStore(whole_runs, sorted_ingest=True)
        task = PartitionIngestionTask(
            "unused", "t", 0, store, lambda *_: None, "test", hybrid=object() if hybrid else None
        )
        checkpoint = IngestionCheckpoint(start_of_push=StartOfPush(sorted=True) if sorted_push else None)
        error = None
        try:
            task._follow(task._batch_phase(checkpoint), _RandomBatches(feed, random.Random(seed)), threading.Event())
        except Exception as exc:  # noqa: BLE001 - a verdict to compare, not a failure of this test
            error = repr(exc)
        stats = (task.stats.records, task.stats.duplicates, task.stats.offset)
        return store.data, store.stamps, store.checkpoints, stats, error

    accepted = []
    monkeypatch.setattr(Validator, "accept_run", _counting(Validator.accept_run, accepted))
    for seed in range(40):
        feed = _mixed_feed(random.Random(seed))
        assert ingest(feed, seed, runs=True) == ingest(feed, seed, runs=False), seed
    assert sum(accepted) >= 40, sum(accepted)  # runs were taken, not only tried


def _counting(accept_run: object, accepted: list[bool]) -> object:
    def wrapper(self: Validator, *args: object) -> bool:
        result = accept_run(self, *args)  # type: ignore[operator]
        accepted.append(result)
        return result

    return wrapper


def test_a_partitions_first_and_last_batches_go_as_runs() -> None:
    """A batch that opens a segment before its data, or ends it (and the push) after them, is cut into stretches:
    its data still reach the store as runs of PUTs, not one put at a time (which also turned the rest of the
    commit's runs into single puts)."""
    from venice_core.davinci.batch import DuckDBBatch

    guid = deterministic_guid("stretches", 0)
    puts = [(b"k%05d" % i, b"v%d" % i) for i in range(12_000)]
    control = SegmentState(deterministic_guid("stretches", "control"))
    eop = [
        encode_control(control.start_segment(), ControlMessageType.START_OF_SEGMENT, {}),
        encode_control(control.next(), ControlMessageType.END_OF_PUSH, {"record_counts": {"0": len(puts)}}),
    ]
    feed = [FakeMessage(k, v, offset) for offset, (k, v) in enumerate(_writer_messages(guid, puts, []) + eop)]
    commits: list[DuckDBBatch] = []

    class Store(_RecordingStore):
        def new_batch(self) -> DuckDBBatch:
            return DuckDBBatch()

        def put_run(self, batch: DuckDBBatch, run: PutRun) -> None:
            batch.put_run(run)

        def commit(self, batch: DuckDBBatch, checkpoint: IngestionCheckpoint) -> None:
            commits.append(batch)

    task = PartitionIngestionTask("unused", "t", 0, Store(True, False), lambda *_: None, "test")
    task._follow(task._batch_phase(IngestionCheckpoint()), FakeConsumer(feed), threading.Event())  # 3 batches of 5,000
    assert task.completed and task.stats.records == len(puts)
    assert all(not batch.puts for batch in commits)  # nothing went one put at a time
    keys = list(chain.from_iterable(run.keys() for batch in commits for run in batch.runs))
    assert keys == [key for key, _ in puts]


def test_a_second_start_of_push_turns_a_sorted_partition_unsorted_and_a_replay_from_before_it_ends_the_same(
    tmp_path: Path,
) -> None:
    """What a repush writes when it copied part of a partition sorted and then found it not plain
    (`repush_tasks._amend_partition`): START_OF_PUSH again, unsorted, then writes over copied keys, a delete and a
    key before them all. Real RocksDB: the sorted part goes through an SST file, ingested at the switch. A replica
    that restarts from a checkpoint before the switch ingests the sorted part again into an SST file that overlaps
    what the later writes changed, and ends with the same data."""
    from venice_core.protocol.compression import CompressionStrategy

    guid = deterministic_guid("repush", 0)
    state = SegmentState(guid)
    feed = [encode_control(state.start_segment(), ControlMessageType.START_OF_SEGMENT, {})]

    def data(encoded: tuple[bytes, bytes]) -> None:
        state.add(checksum_bytes(*encoded))
        feed.append(encoded)

    def start_of_push(sorted_push: bool) -> None:
        body = StartOfPush(sorted_push, True, CompressionStrategy.NO_OP).to_json()
        feed.append(encode_control(state.next(), ControlMessageType.START_OF_PUSH, body))

    copied = [(b"k%05d" % i, b"v%d" % i) for i in range(6000)]
    start_of_push(True)
    for key, value in copied:
        data(encode_put(state.next(), key, 1, value))
    start_of_push(False)
    amended = [(b"k04000", b"over"), (b"a", b"before them all")]
    for key, value in amended:
        data(encode_put(state.next(), key, 1, value))
    data(encode_delete(state.next(), b"k05000", 1))
    feed.append(encode_control(state.next(), ControlMessageType.END_OF_SEGMENT, {"checksum": state.checksum}))
    puts = len(copied) + len(amended)
    control = SegmentState(deterministic_guid("repush", "control"))
    feed.append(encode_control(control.start_segment(), ControlMessageType.START_OF_SEGMENT, {}))
    feed.append(encode_control(control.next(), ControlMessageType.END_OF_PUSH, {"record_counts": {"0": puts}}))
    messages = [FakeMessage(k, v, offset) for offset, (k, v) in enumerate(feed)]
    expected = {**dict(copied), **dict(amended)}
    del expected[b"k05000"]

    storage = PartitionStorage(tmp_path / "p0")

    def ingest(checkpoint: IngestionCheckpoint, start: int, until: int | None = None) -> PartitionIngestionTask:
        task = PartitionIngestionTask("unused", "t", 0, storage, lambda *_: None, "test")
        task.stats.records, task.stats.offset = checkpoint.records, checkpoint.next_offset - 1  # as `run` resumes
        consumer = FakeConsumer(messages[start:until])
        task._follow(task._batch_phase(checkpoint), consumer, threading.Event(), until=until)
        return task

    ingest(IngestionCheckpoint(), 0, until=3000)  # stopped mid-copy: its checkpoint is sorted
    before_the_switch = storage.checkpoint()
    assert before_the_switch.sorted_push and before_the_switch.next_offset == 3000
    for replay in range(2):  # on from there; then again from there, over what the first run wrote
        task = ingest(copy.deepcopy(before_the_switch), before_the_switch.next_offset)  # as read from storage
        assert task.completed, replay
        assert len(storage._sst_files) == 2 + replay  # the sorted part went through an SST file a run
        assert {key: storage.get(key) for key in [*expected, b"k05000"]} == {
            **{key: SCHEMA_ID.pack(1) + value for key, value in expected.items()},
            b"k05000": None,
        }
        saved = storage.checkpoint()
        assert saved.end_of_push and not saved.sorted_push
    storage.close()


def test_a_second_start_of_push_that_changes_more_than_the_order_is_refused(tmp_path: Path) -> None:
    from venice_core.protocol.compression import CompressionStrategy
    from venice_core.protocol.div import DataIntegrityError

    state = SegmentState(deterministic_guid("repush", 0))
    feed = [encode_control(state.start_segment(), ControlMessageType.START_OF_SEGMENT, {})]
    for body in (
        StartOfPush(True, True, CompressionStrategy.NO_OP),
        StartOfPush(False, True, CompressionStrategy.GZIP),
    ):
        feed.append(encode_control(state.next(), ControlMessageType.START_OF_PUSH, body.to_json()))
    storage = PartitionStorage(tmp_path / "p0")
    task = PartitionIngestionTask("unused", "t", 0, storage, lambda *_: None, "test")
    messages = FakeConsumer([FakeMessage(k, v, offset) for offset, (k, v) in enumerate(feed)])
    with pytest.raises(DataIntegrityError, match="a second START_OF_PUSH may only say the rest is unsorted"):
        task._follow(task._batch_phase(IngestionCheckpoint()), messages, threading.Event(), until=len(feed))
    storage.close()
