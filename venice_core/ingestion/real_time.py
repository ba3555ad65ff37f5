"""The real-time phase of a hybrid version's partition, after END_OF_PUSH: consume every region's real-time topic,
resolve each write against the key's latest one (`conflict.stamp_wins`), apply the winners to storage and write them on
to the region's own version topic with their write timestamps, so the version topic holds everything the version
holds (a repush reads it back).

Where it starts: the checkpoint's real-time offsets; the first time, the offsets of (END_OF_PUSH time minus the
rewind time, and after a TTL repush's cut-off), so the nearline writes made while the version was pushed are
replayed into it; a TTL repush's version takes no write stamped at or before its cut-off. Every commit writes
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
from dataclasses import dataclass, replace
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
from venice_core.pubsub import CONSUMER_CONFIG, client_config
from venice_core.pubsub.writer import VersionTopicWriter
from venice_core.status import ExecutionStatus
from venice_core.storage.api import PartitionStore
from venice_core.storage.ingestion_checkpoint import IngestionCheckpoint, RealTimeCheckpoint

log = logging.getLogger(__name__)

CONSUME_BATCH = 5000
# `consume` returns when it has a full batch or at this timeout: it bounds what a nearline write waits in a quiet
# stream (a write is readable after the loop's next commit).
CONSUME_TIMEOUT_SECONDS = 0.01
# A quiet stream waits for its next write in one blocking call that returns as soon as a message comes (instead of
# waking every 10 ms): the same latency, no CPU while idle. Also how often a quiet loop sees a stop.
IDLE_WAIT_SECONDS = 0.5
# A commit waits for the local version topic's acknowledgements (its flush). Caught up, the loop commits after every
# consume, so a write is readable at once; working through a backlog (full batches) it commits every this many
# writes or this often: a flush per 5,000 writes held a region's catch-up to ~70k writes/s.
BACKLOG_COMMIT_EVERY = 50_000
BACKLOG_COMMIT_SECONDS = 0.5
LAG_CHECK_SECONDS = 0.5
REPORT_EVERY_SECONDS = 10.0
KEEP_ENDED_PRODUCERS = 1000
FLUSH_TIMEOUT_SECONDS = 15.0
# Nearline writes are read as they come: a fetch that waits for 256 KB (the batch consumers' setting) would add its
# wait to every write's latency. With one byte enough, the broker answers a fetch as soon as a write arrives, so how
# long it may hold an empty one costs no latency: 500 ms, where 20 ms made every idle hybrid partition of every
# region send 50 fetches a second (CPU in the broker and the region servers for nothing).
REAL_TIME_CONSUMER_CONFIG: dict[str, Any] = {**CONSUMER_CONFIG, "fetch.min.bytes": 1, "fetch.wait.max.ms": 500}

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
    local_topic: str | None  # None: nothing written on (a Da Vinci client only reads the region's topics)
    partition_count: int  # the version's
    compress: Callable[[bytes], bytes]  # the version's compression, applied to nearline values (sent uncompressed)


class RealTimeIngestion:
    def __init__(
        self,
        hybrid: HybridIngestion,
        partition: int,
        storage: PartitionStore,
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
        self.expired = 0  # nearline writes at or before a TTL repush's cut-off (`HybridSettings.replay_after_ms`)
        self.integrity_errors = 0  # DIV gaps, bad checksums, incomplete large values: logged, counted, survived
        self.lag = -1  # records behind the real-time topics' ends; -1 until first measured
        self.ready = False
        self._positions: dict[tuple[str, int], int] = {}  # (topic, partition) -> next offset
        self._region_of = {source.topic: source.region for source in hybrid.sources}

    # where to start
    def _assignment(self, consumer: Consumer, checkpoint: IngestionCheckpoint) -> list[TopicPartition]:
        saved = checkpoint.real_time.offsets if checkpoint.real_time is not None else {}
        rewind_to = self.hybrid.settings.replay_from_ms(checkpoint.end_of_push_time_ms or 0)
        wanted: list[TopicPartition] = []
        for source in self.hybrid.sources:
            metadata = consumer.list_topics(source.topic, timeout=10).topics.get(source.topic)
            if metadata is None or metadata.error is not None or not metadata.partitions:
                raise ProtocolError(f"real-time topic {source.topic} of region {source.region} does not exist")
            count = len(metadata.partitions)
            if count != self.hybrid.partition_count:  # a hybrid store's partition count is fixed (`stores`)
                raise ProtocolError(
                    f"real-time topic {source.topic} has {count} partitions, the version {self.hybrid.partition_count}"
                )
            offset = saved.get((source.topic, self.partition))
            wanted.append(TopicPartition(source.topic, self.partition, -1 if offset is None else offset))
        unresolved = [tp for tp in wanted if tp.offset < 0]
        if unresolved:
            # The ends first: a write made between the two questions is then after the start, not skipped.
            ends = [consumer.get_watermark_offsets(tp, timeout=10, cached=False)[1] for tp in unresolved]
            asked = [TopicPartition(tp.topic, tp.partition, max(0, rewind_to)) for tp in unresolved]
            found_all = consumer.offsets_for_times(asked, timeout=10)
            for tp, found, end in zip(unresolved, found_all, ends, strict=True):
                tp.offset = found.offset if 0 <= found.offset <= end else end  # -1: nothing since the rewind time
        for tp in wanted:
            self._positions[(tp.topic, tp.partition)] = tp.offset
        return wanted

    def _integrity_error(self, validator: Validator, guid: bytes, exc: DataIntegrityError, raw: Any) -> bool:
        """After END_OF_PUSH a producer's gap or bad checksum is counted and logged, as Venice does, and the
        producer is followed from this message on: one writer's loss must not stop a region's nearline writes."""
        self.integrity_errors += 1
        log.error(
            "real-time DIV error at %s[%d]@%d (taken from here on): %s", raw.topic(), raw.partition(), raw.offset(), exc
        )
        validator.forget(guid)
        message = decode(raw.key(), raw.value())
        data = None if message.is_control else checksum_bytes(raw.key(), raw.value())
        return validator.accept(message, data)

    def _assemble(
        self, message: Any, storage: PartitionStore, batch: Any, pending_chunks: dict[bytes, bytes]
    ) -> bytes | None:
        """A large nearline value from its producer's chunks; None (counted, logged) if they are not all there."""
        manifest = chunking.Manifest.decode(message.value)
        parts = []
        for chunk_key in manifest.chunk_keys:
            staged = message.producer.guid + chunk_key
            part = pending_chunks.get(staged) or storage.get_chunk(staged)
            if part is None:
                self.integrity_errors += 1
                log.error(
                    "large nearline value of key %s dropped: chunk %s missing", message.key.hex(), chunk_key.hex()
                )
                return None
            parts.append(part)
            storage.drop_chunk(batch, staged)
        value = b"".join(parts)
        if len(value) != manifest.total_size:
            self.integrity_errors += 1
            log.error(
                "large nearline value of key %s dropped: %d bytes, its manifest says %d",
                message.key.hex(),
                len(value),
                manifest.total_size,
            )
            return None
        return value

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

    def run(self, stop: threading.Event, checkpoint: IngestionCheckpoint) -> None:
        """Consume until `stop`. `checkpoint` is the partition's stored one (END_OF_PUSH reached): every checkpoint
        of this phase carries its batch fields unchanged."""
        real_time = checkpoint.real_time or RealTimeCheckpoint({}, {})
        self.applied = real_time.applied
        self.ready = real_time.ready  # once caught up, a restart does not take it back
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
            if self.hybrid.local_topic is not None:
                writer = VersionTopicWriter(
                    self.hybrid.local_bootstrap,
                    self.hybrid.local_topic,
                    self.hybrid.partition_count,
                    uuid.uuid4().bytes,
                )
                writer.start_segment(self.partition)
            self._loop(consumer, writer, Validator(real_time.div, join_mid_segment=True), checkpoint, stop)
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
        writer: VersionTopicWriter | None,
        validator: Validator,
        commit_base: IngestionCheckpoint,
        stop: threading.Event,
    ) -> None:
        storage, partition = self.storage, self.partition
        batch = storage.new_batch()
        pending_chunks: dict[bytes, bytes] = {}
        stamps: dict[bytes, bytes] = {}  # encoded stamps written in the uncommitted batch
        uncommitted = 0
        last_lag = last_report = 0.0
        last_commit = time.monotonic()
        compress = self.hybrid.compress
        uncompressed = compress is bytes  # NO_OP: the value as it came (a copy per write otherwise)
        get_stamp, put_stamp = storage.get_write_stamp, storage.put_write_stamp
        region_names = {topic: region.encode() for topic, region in self._region_of.items()}
        positions = self._positions
        # A TTL repush's version takes no write stamped at or before its cut-off: the repush evicted those, and
        # the rewind (a day) would otherwise replay them, whenever they were produced.
        after = self.hybrid.settings.replay_after_ms
        expired_until = -1 if after is None else after

        def apply(key: bytes, stamp: bytes, timestamp: int, schema_id: int, value: bytes | None) -> None:
            if timestamp <= expired_until:
                self.expired += 1
                return
            known = stamps.get(key)
            if known is None:
                known = get_stamp(key)
            if known is not None and stamp[1:] < known[1:]:  # `conflict.stamp_wins`, inlined
                self.superseded += 1
                return
            if value is None:
                batch.delete(key)
                if writer is not None:
                    writer.delete(key, schema_id, partition=partition, timestamp_ms=timestamp)
            else:
                stored = value if uncompressed else compress(value)
                batch.put(key, SCHEMA_ID.pack(schema_id) + stored)
                if writer is not None:
                    writer.put(key, stored, schema_id, partition=partition, timestamp_ms=timestamp)
            put_stamp(batch, key, stamp)
            stamps[key] = stamp
            self.applied += 1

        def commit() -> None:
            nonlocal batch, uncommitted, last_commit
            # The version topic holds every applied write before the checkpoint passes it. Bounded well below the
            # region server's wait for a stopping task; a stop meanwhile commits nothing (replayed on restart).
            if writer is not None:
                writer.flush(FLUSH_TIMEOUT_SECONDS)
            if stop.is_set():
                return
            validator.forget_ended(KEEP_ENDED_PRODUCERS)
            real_time = RealTimeCheckpoint(dict(self._positions), validator.state(), self.applied, self.ready)
            storage.commit(batch, replace(commit_base, real_time=real_time))
            batch = storage.new_batch()
            pending_chunks.clear()
            stamps.clear()
            uncommitted = 0
            last_commit = time.monotonic()

        idle = False
        while not stop.is_set():
            if idle:
                messages = consumer.consume(num_messages=1, timeout=IDLE_WAIT_SECONDS)
            else:
                messages = consumer.consume(num_messages=CONSUME_BATCH, timeout=CONSUME_TIMEOUT_SECONDS)
            idle = not messages
            for raw in messages:
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
                        try:
                            new = validator.accept_data(guid, segment, sequence, kafka_key, body)
                        except DataIntegrityError as exc:
                            new = self._integrity_error(validator, guid, exc, raw)
                        if not new:
                            self.duplicates += 1
                            continue
                        key = kafka_key[1:]
                        if mtype == MessageType.PUT:
                            stamp = encode_stamp(timestamp, region)
                            apply(key, stamp, timestamp, schema_id, kafka_value[DATA_PREFIX.size :])
                        else:
                            apply(key, encode_stamp(timestamp, region, True), timestamp, schema_id, None)
                        continue
                message = decode(kafka_key, kafka_value)
                data = None if message.is_control else checksum_bytes(kafka_key, kafka_value)
                try:
                    new = validator.accept(message, data)
                except DataIntegrityError as exc:
                    new = self._integrity_error(validator, message.producer.guid, exc, raw)
                if not new:
                    self.duplicates += 1
                    continue
                timestamp = message.producer.timestamp_ms
                if message.type is MessageType.DELETE:
                    apply(message.key, encode_stamp(timestamp, region, True), timestamp, message.schema_id, None)
                elif message.type is not MessageType.PUT:
                    continue  # segment control messages: DIV only
                elif message.schema_id == CHUNK_SCHEMA_ID:
                    # Staged per producer: two writers' chunks of one key's large values never mix.
                    staged = message.producer.guid + message.key
                    pending_chunks[staged] = message.value
                    storage.stage_chunk(batch, staged, message.value)
                elif message.schema_id == MANIFEST_SCHEMA_ID:
                    value = self._assemble(message, storage, batch, pending_chunks)
                    if value is not None:
                        stamp = encode_stamp(timestamp, region)
                        apply(message.key, stamp, timestamp, chunking.Manifest.decode(message.value).schema_id, value)
                else:
                    apply(message.key, encode_stamp(timestamp, region), timestamp, message.schema_id, message.value)
            now = time.monotonic()
            backlog = len(messages) == CONSUME_BATCH
            if uncommitted and (
                not backlog or uncommitted >= BACKLOG_COMMIT_EVERY or now - last_commit >= BACKLOG_COMMIT_SECONDS
            ):
                commit()
            if now - last_lag >= (LAG_CHECK_SECONDS if not self.ready else REPORT_EVERY_SECONDS / 2):
                self._measure_lag(consumer)
                last_lag = now
                if not self.ready and 0 <= self.lag <= self.hybrid.settings.offset_lag_threshold:
                    self.ready = True
                    log.info("partition %d caught up with the real-time topics (lag %d)", partition, self.lag)
                    self.report(ExecutionStatus.COMPLETED, commit_base.next_offset - 1, commit_base.records, "")
                    last_report = now
            if now - last_report >= REPORT_EVERY_SECONDS:
                status = ExecutionStatus.COMPLETED if self.ready else ExecutionStatus.END_OF_PUSH_RECEIVED
                self.report(status, commit_base.next_offset - 1, commit_base.records, "")
                last_report = now
