"""The real-time phase of a hybrid version's partition, after END_OF_PUSH: consume every region's real-time topic,
resolve each write against the key's latest one (`conflict.stamp_wins`), apply the winners to storage and write them on
to the region's own version topic with their write timestamps, so the version topic holds everything the version
holds (a repush reads it back).

Where it starts: the checkpoint's real-time offsets; the first time, the offsets of (END_OF_PUSH time minus the
rewind time), so the nearline writes made while the version was pushed are replayed into it. Every commit writes
the data, the replication metadata and the real-time offsets in one RocksDB write, after the records written on
are acknowledged: a task killed at any point resumes with exactly the writes its storage holds.

The partition is ready (COMPLETED) once its real-time lag, summed over the regions' topics, is at most the store's
offset-lag threshold; until then it reports END_OF_PUSH_RECEIVED.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from venice_core.hybrid import HybridSettings
from venice_core.ingestion.conflict import encode_stamp
from venice_core.protocol import chunking
from venice_core.protocol.div import DataIntegrityError, Validator
from venice_core.protocol.envelope import (
    CHUNK_SCHEMA_ID,
    DATA_PREFIX,
    HEADER,
    KEY_TYPE_DATA,
    MANIFEST_SCHEMA_ID,
    PROTOCOL_VERSION,
    SCHEMA_ID,
    MessageType,
    ProtocolError,
    checksum_bytes,
    decode,
)
from venice_core.protocol.partitioner import partition_for
from venice_core.pubsub import CONSUMER_CONFIG, client_config
from venice_core.pubsub.writer import VersionTopicWriter
from venice_core.status import ExecutionStatus
from venice_core.storage.rocksdb import PartitionStorage

log = logging.getLogger(__name__)

CONSUME_BATCH = 5000
# `consume` returns when it has a full batch or at this timeout: it bounds what a nearline write waits in a quiet
# stream (a write is readable after the loop's next commit).
CONSUME_TIMEOUT_SECONDS = 0.01
LAG_CHECK_SECONDS = 0.5
REPORT_EVERY_SECONDS = 10.0
KEEP_ENDED_PRODUCERS = 1000
# Nearline writes are read as they come: a fetch that waits for 256 KB (the batch consumers' setting) would add its
# wait to every write's latency.
REAL_TIME_CONSUMER_CONFIG: dict[str, Any] = {**CONSUMER_CONFIG, "fetch.min.bytes": 1, "fetch.wait.max.ms": 20}

Reporter = Callable[[ExecutionStatus, int, int, str], None]


@dataclass(frozen=True)
class RealTimeSource:
    """One region's real-time topic."""

    region: str
    bootstrap: str
    topic: str


@dataclass(frozen=True)
class HybridIngestion:
    """What a hybrid version's partition needs beyond its batch data."""

    settings: HybridSettings
    sources: tuple[RealTimeSource, ...]
    local_bootstrap: str  # the region's version topic, where the winners are written on
    local_topic: str
    partition_count: int  # the version's
    compress: Callable[[bytes], bytes]  # the version's compression, applied to nearline values (sent uncompressed)


class RealTimeIngestion:
    def __init__(
        self,
        hybrid: HybridIngestion,
        partition: int,
        storage: PartitionStorage,
        report: Reporter,
        consumer_group: str,
    ) -> None:
        self.hybrid = hybrid
        self.partition = partition
        self.storage = storage
        self.report = report
        self.consumer_group = consumer_group
        self.applied = 0  # nearline writes that won and were applied (checkpointed)
        self.superseded = 0  # nearline writes that lost to a later one
        self.duplicates = 0
        self.lag = -1  # records behind the real-time topics' ends; -1 until first measured
        self.ready = False
        self._positions: dict[tuple[str, int], int] = {}  # (topic, partition) -> next offset
        self._region_of = {source.topic: source.region for source in hybrid.sources}
        self._filter = False  # keys of other partitions arrive too (see `_assignment`)

    # where to start
    def _assignment(self, consumer: Consumer, checkpoint: dict[str, Any]) -> list[TopicPartition]:
        saved: dict[str, dict[str, int]] = checkpoint.get("rt") or {}
        rewind_to = int(checkpoint.get("eop_time_ms") or 0) - self.hybrid.settings.rewind_seconds * 1000
        wanted: list[TopicPartition] = []
        for source in self.hybrid.sources:
            metadata = consumer.list_topics(source.topic, timeout=10).topics.get(source.topic)
            if metadata is None or metadata.error is not None or not metadata.partitions:
                raise ProtocolError(f"real-time topic {source.topic} of region {source.region} does not exist")
            count = len(metadata.partitions)
            # The real-time topic has the store's partition count of when it became hybrid: with the version's
            # count, partition p maps to p; otherwise every partition is read and keys are filtered (`_mine`).
            if count != self.hybrid.partition_count:
                self._filter = True
            partitions = [self.partition] if count == self.hybrid.partition_count else list(range(count))
            for p in partitions:
                offset = (saved.get(source.topic) or {}).get(str(p))
                wanted.append(TopicPartition(source.topic, p, -1 if offset is None else int(offset)))
        unresolved = [tp for tp in wanted if tp.offset < 0]
        if unresolved:
            asked = [TopicPartition(tp.topic, tp.partition, max(0, rewind_to)) for tp in unresolved]
            for tp, found in zip(unresolved, consumer.offsets_for_times(asked, timeout=10), strict=True):
                if found.offset >= 0:
                    tp.offset = found.offset
                else:  # nothing written since the rewind time: start at the end
                    tp.offset = consumer.get_watermark_offsets(tp, timeout=10, cached=False)[1]
        for tp in wanted:
            self._positions[(tp.topic, tp.partition)] = tp.offset
        return wanted

    def _mine(self, key: bytes) -> bool:
        return not self._filter or partition_for(key, self.hybrid.partition_count) == self.partition

    def _measure_lag(self, consumer: Consumer) -> None:
        lag = 0
        for (topic, p), position in self._positions.items():
            try:
                end = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=1.0, cached=False)[1]
            except KafkaException as exc:
                log.debug("end offset of %s[%d] unavailable: %s", topic, p, exc)
                return  # keep the previous figure
            lag += max(0, end - position)
        self.lag = lag

    def run(self, stop: threading.Event, checkpoint: dict[str, Any], commit_base: dict[str, Any]) -> None:
        """Consume until `stop`. `checkpoint` is the partition's stored one (END_OF_PUSH reached); `commit_base`
        the batch fields every checkpoint of this phase carries unchanged."""
        self.applied = int(checkpoint.get("rt_applied") or 0)
        bootstrap = {source.bootstrap for source in self.hybrid.sources}
        if len(bootstrap) != 1:
            raise ProtocolError("real-time topics on more than one Kafka cluster are not supported yet")
        consumer = Consumer(
            client_config(bootstrap.pop(), **REAL_TIME_CONSUMER_CONFIG, **{"group.id": self.consumer_group})
        )
        writer: VersionTopicWriter | None = None
        try:
            consumer.assign(self._assignment(consumer, checkpoint))
            # A writer of its own per run (a fresh producer GUID): after a crash, what it wrote past the checkpoint is
            # written again under the next run's GUID, the same records with the same timestamps.
            writer = VersionTopicWriter(
                self.hybrid.local_bootstrap, self.hybrid.local_topic, self.hybrid.partition_count, uuid.uuid4().bytes
            )
            writer.start_segment(self.partition)
            self._loop(consumer, writer, Validator(checkpoint.get("rt_div"), join_mid_segment=True), commit_base, stop)
        finally:
            consumer.close()
            if writer is not None:
                try:
                    writer.flush(5)
                except Exception:  # noqa: BLE001 - on stop: what is not acknowledged is written again on restart
                    log.warning("records written on to %s were not all acknowledged at stop", self.hybrid.local_topic)

    def _loop(
        self,
        consumer: Consumer,
        writer: VersionTopicWriter,
        validator: Validator,
        commit_base: dict[str, Any],
        stop: threading.Event,
    ) -> None:
        storage, partition = self.storage, self.partition
        batch = storage.new_batch()
        pending_chunks: dict[bytes, bytes] = {}
        stamps: dict[bytes, bytes] = {}  # encoded stamps written in the uncommitted batch
        uncommitted = 0
        last_lag = last_report = 0.0
        compress = self.hybrid.compress
        uncompressed = compress is bytes  # NO_OP: the value as it came (a copy per write otherwise)
        get_stamp, put_stamp = storage.get_write_stamp, storage.put_write_stamp
        region_names = {topic: region.encode() for topic, region in self._region_of.items()}
        filter_keys = self._filter
        positions = self._positions

        def apply(key: bytes, stamp: bytes, timestamp: int, schema_id: int, value: bytes | None) -> None:
            known = stamps.get(key)
            if known is None:
                known = get_stamp(key)
            if known is not None and stamp[1:] < known[1:]:  # `conflict.stamp_wins`, inlined
                self.superseded += 1
                return
            if value is None:
                batch.delete(key)
                writer.delete(key, schema_id, partition=partition, timestamp_ms=timestamp)
            else:
                stored = value if uncompressed else compress(value)
                batch.put(key, SCHEMA_ID.pack(schema_id) + stored)
                writer.put(key, stored, schema_id, partition=partition, timestamp_ms=timestamp)
            put_stamp(batch, key, stamp)
            stamps[key] = stamp
            self.applied += 1

        def commit() -> None:
            nonlocal batch, uncommitted
            writer.flush()  # the version topic holds every applied write before the checkpoint passes it
            validator.forget_ended(KEEP_ENDED_PRODUCERS)
            rt: dict[str, dict[str, int]] = {}
            for (topic, p), position in self._positions.items():
                rt.setdefault(topic, {})[str(p)] = position
            storage.commit(batch, {**commit_base, "rt": rt, "rt_div": validator.state(), "rt_applied": self.applied})
            batch = storage.new_batch()
            pending_chunks.clear()
            stamps.clear()
            uncommitted = 0

        while not stop.is_set():
            for raw in consumer.consume(num_messages=CONSUME_BATCH, timeout=CONSUME_TIMEOUT_SECONDS):
                if raw.error():
                    if raw.error().fatal():
                        raise ProtocolError(f"fatal consumer error: {raw.error().str()}")
                    if raw.error().code() != KafkaError._PARTITION_EOF:
                        log.warning("consumer error on real-time topics (retrying): %s", raw.error().str())
                    continue
                topic = raw.topic()
                positions[(topic, raw.partition())] = raw.offset() + 1
                uncommitted += 1
                kafka_key, kafka_value = raw.key(), raw.value()
                region = region_names[topic]
                if kafka_key[:1] == KEY_TYPE_DATA and len(kafka_value) >= DATA_PREFIX.size:
                    version, mtype, guid, segment, sequence, timestamp, schema_id = DATA_PREFIX.unpack_from(kafka_value)
                    if version == PROTOCOL_VERSION and schema_id >= 0 and mtype <= MessageType.DELETE:
                        body = memoryview(kafka_value)[HEADER.size :]
                        if not validator.accept_data(guid, segment, sequence, kafka_key, body):
                            self.duplicates += 1
                            continue
                        key = kafka_key[1:]
                        if not filter_keys or self._mine(key):
                            if mtype == MessageType.PUT:
                                stamp = encode_stamp(timestamp, region)
                                apply(key, stamp, timestamp, schema_id, kafka_value[DATA_PREFIX.size :])
                            else:
                                apply(key, encode_stamp(timestamp, region, True), timestamp, schema_id, None)
                        continue
                message = decode(kafka_key, kafka_value)
                data = None if message.is_control else checksum_bytes(kafka_key, kafka_value)
                if not validator.accept(message, data):
                    self.duplicates += 1
                    continue
                if message.type is not MessageType.PUT:
                    continue  # segment control messages: DIV only
                if message.schema_id == CHUNK_SCHEMA_ID:
                    pending_chunks[message.key] = message.value
                    storage.stage_chunk(batch, message.key, message.value)
                elif message.schema_id == MANIFEST_SCHEMA_ID:
                    manifest = chunking.Manifest.decode(message.value)
                    parts = []
                    for chunk_key in manifest.chunk_keys:
                        part = pending_chunks.get(chunk_key) or storage.get_chunk(chunk_key)
                        if part is None:
                            raise DataIntegrityError(f"chunk {chunk_key.hex()} of a large nearline value is missing")
                        parts.append(part)
                        storage.drop_chunk(batch, chunk_key)
                    if self._mine(message.key):
                        timestamp = message.producer.timestamp_ms
                        stamp = encode_stamp(timestamp, region)
                        apply(message.key, stamp, timestamp, manifest.schema_id, b"".join(parts))
            if uncommitted:
                commit()
            now = time.monotonic()
            if now - last_lag >= (LAG_CHECK_SECONDS if not self.ready else REPORT_EVERY_SECONDS / 2):
                self._measure_lag(consumer)
                last_lag = now
                if not self.ready and 0 <= self.lag <= self.hybrid.settings.offset_lag_threshold:
                    self.ready = True
                    log.info("partition %d caught up with the real-time topics (lag %d)", partition, self.lag)
                    self.report(ExecutionStatus.COMPLETED, commit_base["next_offset"] - 1, commit_base["records"], "")
                    last_report = now
            if now - last_report >= REPORT_EVERY_SECONDS:
                status = ExecutionStatus.COMPLETED if self.ready else ExecutionStatus.END_OF_PUSH_RECEIVED
                self.report(status, commit_base["next_offset"] - 1, commit_base["records"], "")
                last_report = now
