"""The protocol writer and the ingestion engine against the real broker and real RocksDB storage."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from pathlib import Path

from tests.support.platform import PlatformEnv
from tests.support.topics import read_partition, through_end_of_push
from venice_core.ingestion.replication import Replicator
from venice_core.ingestion.task import PartitionIngestionTask
from venice_core.model.status import ExecutionStatus
from venice_core.protocol.div import deterministic_guid
from venice_core.protocol.envelope import SCHEMA_ID, ControlMessageType
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


def _replicate(
    bootstrap: str,
    source: str,
    local: str,
    start: int,
    may_produce: Callable[[], bool] = lambda: True,
    until: Callable[[Replicator], bool] = lambda _replicator: False,
) -> tuple[Replicator, bool, list[tuple[int, bool]]]:
    """Run a replicator until it ends by itself (END_OF_PUSH copied, or deposed) or `until(replicator)` holds and its
    progress is recorded, at most a minute."""
    recorded: list[tuple[int, bool]] = []

    def record(position: int, replicated: bool) -> bool:
        recorded.append((position, replicated))
        return True

    replicator = Replicator(bootstrap, source, bootstrap, local, 0, start, may_produce, record)
    stop, outcome = threading.Event(), []
    thread = threading.Thread(target=lambda: outcome.append(replicator.run(stop)))
    thread.start()

    def done() -> bool:
        if not thread.is_alive():
            return True
        return bool(until(replicator) and recorded and recorded[-1][0] == replicator.position)

    poll_until(done, timeout=60, interval=0.05)
    stop.set()
    thread.join()
    return replicator, outcome[0], recorded


def test_a_new_leader_resumes_replication_from_its_predecessors_progress(
    platform_env: PlatformEnv, tmp_path: Path
) -> None:
    """Leadership moves mid-push: the first leader copied 1,000 records but its last acknowledged progress says
    300 (it died before recording more); a deposed leader produces nothing; the new leader copies from 300 up to
    END_OF_PUSH. The local topic holds 700 records twice, as exact copies: a follower ingesting it ends with exact
    data, DIV dropping the copies as duplicates and END_OF_PUSH's count matching."""
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

    first, ended, recorded = _replicate(bootstrap, source, local, 0, until=lambda r: r.copied == 1001)
    assert not ended and first.copied == 1001  # START_OF_SEGMENT and 1,000 records
    assert recorded and recorded[-1] == (1001, False)
    copied = len(read_partition(bootstrap, local))

    deposed, ended, recorded = _replicate(bootstrap, source, local, 0, may_produce=lambda: False)
    assert not ended and recorded == []
    assert len(read_partition(bootstrap, local)) == copied  # nothing produced once deposed

    for key in sorted(records)[1000:]:
        writer.put(key, records[key], 1, partition=0)
    writer.end_segment(0)
    writer.broadcast(ControlMessageType.END_OF_PUSH, [{"record_counts": {"0": len(records)}}])
    writer.flush()
    second, ended, recorded = _replicate(bootstrap, source, local, 300)
    assert ended and recorded[-1][1] is True  # END_OF_PUSH copied and acknowledged: replication is over
    source_messages = read_partition(bootstrap, source)
    assert read_partition(bootstrap, local) == source_messages[:1001] + through_end_of_push(source_messages[300:])

    storage = PartitionStorage(tmp_path / "p0")
    task, reports = _ingest(bootstrap, local, storage)
    assert task.error is None and task.completed, task.error
    assert reports[-1][0] is ExecutionStatus.COMPLETED and reports[-1][2] == len(records)
    assert task.stats.duplicates == 1001 - 300
    for key, value in records.items():
        assert storage.get(key) == SCHEMA_ID.pack(1) + value
    storage.close()
