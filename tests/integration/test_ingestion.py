"""The protocol writer and the ingestion engine against the real broker and real RocksDB storage."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path

from tests.support.platform import PlatformEnv
from venice_core.controller.status import ExecutionStatus
from venice_core.ingestion.task import PartitionIngestionTask
from venice_core.protocol.div import deterministic_guid
from venice_core.protocol.envelope import SCHEMA_ID, ControlMessageType
from venice_core.pubsub import admin
from venice_core.pubsub.writer import VersionTopicWriter
from venice_core.storage.rocksdb import PartitionStorage


def _ingest(bootstrap: str, topic: str, storage: PartitionStorage) -> tuple[PartitionIngestionTask, list]:
    reports: list = []
    task = PartitionIngestionTask(bootstrap, topic, 0, storage, lambda *r: reports.append(r), "test")
    stop = threading.Event()
    thread = threading.Thread(target=task.run, args=(stop,))
    thread.start()
    thread.join(timeout=60)
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
    assert storage.checkpoint()["eop"] is True
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
