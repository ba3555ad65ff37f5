"""The protocol writer and the ingestion engine against the real broker and real RocksDB storage."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from pathlib import Path

from tests.support.platform import PlatformEnv
from tests.support.topics import read_partition, read_records, through_end_of_push
from venice_core.ingestion.leader import Leading, Upstream
from venice_core.ingestion.task import PartitionIngestionTask
from venice_core.model.status import ExecutionStatus
from venice_core.protocol.div import deterministic_guid
from venice_core.protocol.envelope import KEY_TYPE_CONTROL, SCHEMA_ID, ControlMessageType
from venice_core.pubsub import admin
from venice_core.pubsub.writer import VersionTopicWriter
from venice_core.storage.rocksdb import PartitionStorage
from venice_core.utils.waiting import poll_until


def _ingest(
    bootstrap: str,
    topic: str,
    storage: PartitionStorage,
    until: Callable[[PartitionIngestionTask], bool] = lambda _task: False,
) -> tuple[PartitionIngestionTask, list]:
    """Run a task until it ends by itself or `until(task)` holds, at most a minute."""
    reports: list = []
    task = PartitionIngestionTask(bootstrap, topic, 0, storage, lambda *r: reports.append(r), "test")
    stop = threading.Event()
    thread = threading.Thread(target=task.run, args=(stop,))
    thread.start()
    poll_until(lambda: not thread.is_alive() or until(task), timeout=60, interval=0.05)
    stop.set()
    thread.join()
    return task, reports


def test_retried_writer_chunked_values_exact_data(platform_env: PlatformEnv, tmp_path: Path) -> None:
    bootstrap = platform_env.config.kafka.bootstrap
    topic = f"ingest-{uuid.uuid4().hex[:8]}"
    admin.create_topic(bootstrap, topic, 1)
    control = VersionTopicWriter(bootstrap, topic, 1, deterministic_guid("t", "control"))
    control.broadcast(ControlMessageType.START_OF_PUSH, [{"sorted": True}])
    control.flush()
    records = {f"k{i:05d}".encode(): (b"v%d" % i) * (1 + i % 5) for i in range(3000)}
    records[b"k99999"] = b"L" * 2_500_000  # chunked: above the Kafka message limit

    # First attempt dies after half the records; the retry re-sends all of them with the same identity.
    guid = deterministic_guid("t", "data", 0)
    first = VersionTopicWriter(bootstrap, topic, 1, guid)
    first.start_segment(0)
    for key in sorted(records)[:1500]:
        first.put(key, records[key], 1, partition=0)
    first.flush()
    retry = VersionTopicWriter(bootstrap, topic, 1, guid)
    retry.start_segment(0)
    for key in sorted(records):
        retry.put(key, records[key], 1, partition=0)
    retry.end_segment(0)
    retry.flush()
    control.broadcast(ControlMessageType.END_OF_PUSH, [{"record_counts": {"0": len(records)}}])
    control.flush()

    storage = PartitionStorage(tmp_path / "p0")
    task, reports = _ingest(bootstrap, topic, storage)
    assert task.error is None and task.completed
    assert reports[-1][0] is ExecutionStatus.COMPLETED and reports[-1][2] == len(records)
    assert task.stats.duplicates >= 1500
    for key, value in records.items():
        assert storage.get(key) == SCHEMA_ID.pack(1) + value
    assert storage.checkpoint().end_of_push is True
    storage.close()


def test_gap_fails_the_partition_with_a_clear_error(platform_env: PlatformEnv, tmp_path: Path) -> None:
    bootstrap = platform_env.config.kafka.bootstrap
    topic = f"gap-{uuid.uuid4().hex[:8]}"
    admin.create_topic(bootstrap, topic, 1)
    writer = VersionTopicWriter(bootstrap, topic, 1, deterministic_guid("gap"))
    writer.start_segment(0)
    writer.put(b"a", b"1", 1, partition=0)
    writer._segments[0].sequence += 5  # lose five messages
    writer.put(b"b", b"2", 1, partition=0)
    writer.flush()
    storage = PartitionStorage(tmp_path / "p0")
    task, reports = _ingest(bootstrap, topic, storage)
    assert task.error is not None and "missing data" in task.error
    assert reports[-1][0] is ExecutionStatus.ERROR
    storage.close()


def _write_push(bootstrap: str, topic: str, records: dict[bytes, bytes], end: bool) -> None:
    writer = VersionTopicWriter(bootstrap, topic, 1, deterministic_guid(topic))
    writer.start_segment(0)
    for key in sorted(records):
        writer.put(key, records[key], 1, partition=0)
    if end:
        writer.end_segment(0)
        writer.broadcast(ControlMessageType.END_OF_PUSH, [{"record_counts": {"0": len(records)}}])
    writer.flush()


def _lead(
    bootstrap: str,
    source: str,
    local: str,
    storage: PartitionStorage,
    recorded: int = 0,
    epochs: Callable[[], int | None] = lambda: 1,
    until: Callable[[list[tuple[int, int, bool]]], bool] = lambda _recorded: False,
) -> tuple[PartitionIngestionTask, list[tuple[int, int, bool]]]:
    """Run a task as a replica outside the source region, leading (under `epochs()`) the partition of `local`
    whose source is `source`, until it ends by itself or `until(what it recorded)` holds, at most a minute."""
    recorded_by: list[tuple[int, int, bool]] = []

    def record(epoch: int, position: int, replicated: bool) -> bool:
        recorded_by.append((epoch, position, replicated))
        return True

    leading = Leading(
        Upstream(bootstrap, source), epochs, lambda epoch: recorded if epochs() == epoch else None, record
    )
    task = PartitionIngestionTask(bootstrap, local, 0, storage, lambda *_r: None, "test", leading=leading)
    stop = threading.Event()
    thread = threading.Thread(target=task.run, args=(stop,))
    thread.start()

    assert poll_until(lambda: not thread.is_alive() or until(recorded_by), timeout=60, interval=0.05)
    stop.set()
    thread.join()
    return task, recorded_by


def test_a_leader_takes_the_source_topic_produces_it_on_and_a_new_one_resumes_from_the_recorded_position(
    platform_env: PlatformEnv, tmp_path: Path
) -> None:
    """Outside the source region the partition's leader ingests the source topic and produces it on to its
    region's. Leadership moves mid-push: the first leader took 1,000 records (its checkpoint holds both positions)
    but the last position recorded says 300; a deposed leader produces nothing; the new leader, a fresh replica,
    reads the region's topic to its end, then takes the source from 300 up to END_OF_PUSH. The region's topic holds
    700 records twice, as exact copies: the new leader's DIV and a follower's drop them, and every replica ends
    with exact data, END_OF_PUSH's count matching."""
    bootstrap = platform_env.config.kafka.bootstrap
    source, local = f"src-{uuid.uuid4().hex[:8]}", f"local-{uuid.uuid4().hex[:8]}"
    admin.create_topic(bootstrap, source, 1)
    admin.create_topic(bootstrap, local, 1)
    records = {f"k{i:05d}".encode(): b"v%d" % i for i in range(2000)}
    writer = VersionTopicWriter(bootstrap, source, 1, deterministic_guid(source))
    writer.start_segment(0)
    for key in sorted(records)[:1000]:
        writer.put(key, records[key], 1, partition=0)
    writer.flush()

    first = PartitionStorage(tmp_path / "first")
    task, recorded = _lead(bootstrap, source, local, first, until=lambda rec: bool(rec) and rec[-1][1] == 1001)
    assert not task.completed and recorded[-1] == (1, 1001, False)  # START_OF_SEGMENT and 1,000 records
    checkpoint = first.checkpoint()
    assert checkpoint is not None and (checkpoint.upstream_next, checkpoint.next_offset) == (1001, 0)
    assert checkpoint.records == 1000 and first.get(b"k00999") == SCHEMA_ID.pack(1) + records[b"k00999"]
    first.close()
    copied = len(read_partition(bootstrap, local))
    assert copied == 1001

    for key in sorted(records)[1000:]:
        writer.put(key, records[key], 1, partition=0)
    writer.end_segment(0)
    writer.broadcast(ControlMessageType.END_OF_PUSH, [{"record_counts": {"0": len(records)}}])
    writer.flush()
    asked: list[int] = []
    deposed = PartitionStorage(tmp_path / "deposed")  # leads when it starts, no longer by its first batch

    def deposed_epochs() -> int | None:
        asked.append(1)
        return 1 if len(asked) <= 2 else None

    _lead(bootstrap, source, local, deposed, epochs=deposed_epochs, until=lambda _rec: len(asked) > 3)
    deposed.close()
    assert len(read_partition(bootstrap, local)) == copied  # nothing produced once deposed

    second = PartitionStorage(tmp_path / "second")
    task, recorded = _lead(bootstrap, source, local, second, recorded=300)
    assert task.error is None and task.completed, task.error
    assert recorded[-1][2] is True  # END_OF_PUSH produced and acknowledged: replication is over
    assert task.stats.duplicates == 1001 - 300
    source_records = read_records(bootstrap, source)
    local_records = read_records(bootstrap, local)
    copied_records = source_records[:1001] + source_records[300 : len(source_records) - 1]
    assert [r[:2] for r in local_records] == [r[:2] for r in copied_records]  # exact copies
    # Control messages with the source's timestamps (END_OF_PUSH's is where a hybrid version's replay rewinds from);
    # data is stamped as it is copied (nothing reads a version topic's data by time).
    controls = [r for r in copied_records if r[0][:1] == KEY_TYPE_CONTROL]
    assert len(controls) > 2 and [r for r in local_records if r[0][:1] == KEY_TYPE_CONTROL] == controls
    assert [r[:2] for r in local_records[1001:]] == through_end_of_push([r[:2] for r in source_records[300:]])

    follower = PartitionStorage(tmp_path / "follower")
    task, reports = _ingest(bootstrap, local, follower)
    assert task.error is None and task.completed, task.error
    assert reports[-1][0] is ExecutionStatus.COMPLETED and reports[-1][2] == len(records)
    assert task.stats.duplicates == 1001 - 300
    for storage in (second, follower):
        for key, value in records.items():
            assert storage.get(key) == SCHEMA_ID.pack(1) + value
        storage.close()
