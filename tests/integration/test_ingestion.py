"""The protocol writer and the ingestion engine against the real broker and real RocksDB storage."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Producer

from tests.support.platform import PlatformEnv
from tests.support.topics import read_partition, through_end_of_push
from venice_core.ingestion.replication import VersionTopicMirror
from venice_core.ingestion.task import PartitionIngestionTask
from venice_core.protocol.div import deterministic_guid
from venice_core.protocol.envelope import SCHEMA_ID, ControlMessageType
from venice_core.pubsub import admin, client_config
from venice_core.pubsub.writer import VersionTopicWriter
from venice_core.status import ExecutionStatus
from venice_core.storage.rocksdb import PartitionStorage


def _ingest(
    bootstrap: str,
    topic: str,
    storage: PartitionStorage,
    mirror: VersionTopicMirror | None = None,
    until: Callable[[PartitionIngestionTask], bool] = lambda _task: False,
) -> tuple[PartitionIngestionTask, list]:
    """Run a task until it ends by itself or `until(task)` holds, at most a minute."""
    reports: list = []
    task = PartitionIngestionTask(bootstrap, topic, 0, storage, lambda *r: reports.append(r), "test", mirror=mirror)
    stop = threading.Event()
    thread = threading.Thread(target=task.run, args=(stop,))
    thread.start()
    deadline = time.monotonic() + 60
    while thread.is_alive() and not until(task) and time.monotonic() < deadline:
        thread.join(timeout=0.05)
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


def test_leader_mirrors_the_source_topic_exactly_across_restarts(platform_env: PlatformEnv, tmp_path: Path) -> None:
    """A leader restarted with its local topic behind its storage checkpoint (produces lost in a crash), or ahead of
    it (produced, not yet checkpointed), ends with the local topic an exact copy of the source and exact data."""
    bootstrap = platform_env.config.kafka.bootstrap
    source, local = f"src-{uuid.uuid4().hex[:8]}", f"local-{uuid.uuid4().hex[:8]}"
    admin.create_topic(bootstrap, source, 1)
    admin.create_topic(bootstrap, local, 1)
    records = {f"k{i:05d}".encode(): b"v%d" % i for i in range(2000)}
    first_half = dict(sorted(records.items())[:1000])
    _write_push(bootstrap, source, first_half, end=False)

    # Run 1, as a follower would: the storage checkpoints the first half; nothing reaches the local topic.
    storage = PartitionStorage(tmp_path / "p0")
    task, _ = _ingest(bootstrap, source, storage, until=lambda task: task.stats.records == 1000)
    assert task.error is None and storage.checkpoint().records == 1000

    # Run 2, a leader whose local topic holds only the first 300 source records: it mirrors from 300 on.
    copy = Producer(client_config(bootstrap))
    for key, value in read_partition(bootstrap, source)[:300]:
        copy.produce(local, value=value, key=key, partition=0)
    assert copy.flush(10) == 0
    # The second half (a new producer segment after the first's), then END_OF_PUSH.
    writer = VersionTopicWriter(bootstrap, source, 1, deterministic_guid("second"))
    writer.start_segment(0)
    for key in sorted(records)[1000:]:
        writer.put(key, records[key], 1, partition=0)
    writer.end_segment(0)
    writer.broadcast(ControlMessageType.END_OF_PUSH, [{"record_counts": {"0": len(records)}}])
    writer.flush()
    mirror = VersionTopicMirror(bootstrap, local, 0)
    task, reports = _ingest(bootstrap, source, storage, mirror=mirror)
    assert task.error is None and task.completed, task.error
    assert reports[-1][0] is ExecutionStatus.COMPLETED and reports[-1][2] == len(records)
    assert task.stats.duplicates == 0  # the first half was skipped, not re-applied
    assert mirror.end_offset == 300
    assert read_partition(bootstrap, local) == through_end_of_push(read_partition(bootstrap, source))
    for key, value in records.items():
        assert storage.get(key) == SCHEMA_ID.pack(1) + value
    storage.close()
