"""The real-time phase of a hybrid version's partition, after END_OF_PUSH: consume every region's real-time topic,
resolve each write against the key's latest one (`conflict.stamp_wins`), apply the winners to storage and write them on
to the region's own version topic with their write timestamps, so the version topic holds everything the version
holds (a repush reads it back).

Where it starts: the checkpoint's real-time offsets; the first time, the offsets of (END_OF_PUSH time minus the
rewind time, and after a TTL repush's cut-off), so the nearline writes made while the version was pushed are
replayed into it; a TTL repush's version takes no write stamped at or before its cut-off. Every commit writes
the data, the replication metadata and the real-time offsets in one RocksDB write, after the records written on
are acknowledged: a task killed at any point resumes with exactly the writes its storage holds.

The loop takes each consumed message (`_take`: a plain PUT or DELETE on a hot path, anything else through
`_take_message`), applies each write that wins (`_apply`), and commits (`Committer`): caught up, after every consume
(a write is readable at once); working through a backlog, every BACKLOG_COMMIT_EVERY writes or
BACKLOG_COMMIT_SECONDS.

The partition is ready (COMPLETED) once its real-time lag, summed over the regions' topics, is at most the store's
offset-lag threshold; until then it reports END_OF_PUSH_RECEIVED.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Generic

from confluent_kafka import Consumer, KafkaException, TopicPartition

from venice_core.config import ClusterConfig, RegionConfig
from venice_core.ingestion.committer import Committer, MissingChunk
from venice_core.ingestion.conflict import encode_stamp
from venice_core.ingestion.messages import (
    ConsumedMessage,
    MessageSource,
    decode_checked,
    message_source,
    skip_consumer_error,
)
from venice_core.model.hybrid import HybridSettings
from venice_core.model.status import ExecutionStatus
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
    Message,
    MessageType,
    ProtocolError,
)
from venice_core.pubsub import CONSUMER_CONFIG, client_config
from venice_core.pubsub.writer import VersionTopicWriter
from venice_core.storage.api import Batch, PartitionStore
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
# region send 50 fetches a second (CPU in the broker and the region servers for nothing). Not longer either: the
# consumer's other requests to that broker (ListOffsets, 1 s timeouts) wait behind an empty fetch held open, and at 5 s
# they timed out (librdkafka: "possibly held back by preceding blocking FetchRequest"), measured.
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
    producer_config: Mapping[str, str] = field(default_factory=dict)  # the winners' producer's, over the defaults

    @classmethod
    def of_region(
        cls,
        settings: HybridSettings,
        config: ClusterConfig,
        region: RegionConfig,
        store: str,
        partition_count: int,
        local_topic: str | None,
        compress: Callable[[bytes], bytes],
    ) -> HybridIngestion:
        """A hybrid version's ingestion in `region`: the real-time topics of every region of `config` (each region
        ingests them all), the winners written on to `local_topic` of the region's broker."""
        sources = tuple(RealTimeSource(r.name, r.kafka_bootstrap, r.real_time_topic(store)) for r in config.regions)
        return cls(
            settings,
            sources,
            region.kafka_bootstrap,
            local_topic,
            partition_count,
            compress,
            config.kafka.producer_config,
        )


class RealTimeIngestion(Generic[Batch]):
    """The real-time phase of one partition: its figures (read by metrics) live as long as the task; each `run` is
    one attempt, from the stored checkpoint."""

    def __init__(
        self,
        hybrid: HybridIngestion,
        partition: int,
        storage: PartitionStore[Batch],
        report: Reporter,
        consumer_group: str,
        leads: Callable[[], bool] | None = None,
    ) -> None:
        self.hybrid = hybrid
        # Whether this replica writes the winners on to the version topic: its partition's leader does, the others
        # only apply them (None: always, where there is one replica). Asked at every turn of the loop: a change of
        # role ends the run, and the next one starts in the new role from the checkpoint.
        self.leads = leads
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
        self._region_names = {source.topic: source.region.encode() for source in hybrid.sources}
        # A TTL repush's version takes no write stamped at or before its cut-off: the repush evicted those, and
        # the rewind (a day) would otherwise replay them, whenever they were produced.
        after = hybrid.settings.replay_after_ms
        self._expired_until = -1 if after is None else after
        self._uncompressed = hybrid.compress is bytes  # NO_OP: the value as it came (a copy per write otherwise)
        # One run's, set by `_consume`.
        self._checkpoint = IngestionCheckpoint()  # the stored one: every commit keeps its batch fields
        self._validator = Validator(join_mid_segment=True)
        self._writer: VersionTopicWriter | None = None
        self._committer = Committer(storage, BACKLOG_COMMIT_EVERY, BACKLOG_COMMIT_SECONDS)
        self._stamps: dict[bytes, bytes] = {}  # encoded stamps written in the uncommitted batch

    def run(self, stop: threading.Event, checkpoint: IngestionCheckpoint) -> None:
        """Consume until `stop` or a change of role. `checkpoint` is the partition's stored one (END_OF_PUSH
        reached): every checkpoint of this phase carries its batch fields unchanged."""
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
            writer = self._open_writer()
            validator = Validator(real_time.div, join_mid_segment=True)
            self._consume(message_source(consumer), writer, validator, checkpoint, stop)
        finally:
            consumer.close()
            if writer is not None:
                try:
                    writer.flush(5)
                except Exception:  # noqa: BLE001 - on stop: what is not acknowledged is written again on restart
                    log.warning("records written on to %s were not all acknowledged at stop", self.hybrid.local_topic)

    # where to start, where to write
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

    def _open_writer(self) -> VersionTopicWriter | None:
        """A writer of its own per run (a fresh producer GUID): after a crash, what it wrote past the checkpoint is
        written again under the next run's GUID, the same records with the same timestamps. None where nothing is
        written on."""
        if self.hybrid.local_topic is None or (self.leads is not None and not self.leads()):
            return None
        writer = VersionTopicWriter(
            self.hybrid.local_bootstrap,
            self.hybrid.local_topic,
            self.hybrid.partition_count,
            uuid.uuid4().bytes,
            producer_config=dict(self.hybrid.producer_config),
        )
        writer.start_segment(self.partition)
        return writer

    # the loop
    def _consume(
        self,
        consumer: MessageSource,
        writer: VersionTopicWriter | None,
        validator: Validator,
        checkpoint: IngestionCheckpoint,
        stop: threading.Event,
    ) -> None:
        """Until `stop`, from `checkpoint` (the stored one): take what comes, commit when due, follow the lag and
        report."""
        self._checkpoint, self._validator, self._writer = checkpoint, validator, writer
        self._committer = Committer(self.storage, BACKLOG_COMMIT_EVERY, BACKLOG_COMMIT_SECONDS)
        self._stamps.clear()
        last_lag = last_report = 0.0
        idle = False
        leads = self.leads
        while not stop.is_set():
            if leads is not None and (writer is not None) != leads():
                log.info(
                    "partition %d %s: real-time phase restarts",
                    self.partition,
                    "leads" if writer is None else "no longer leads",
                )
                return
            if idle:
                messages = consumer.consume(num_messages=1, timeout=IDLE_WAIT_SECONDS)
            else:
                messages = consumer.consume(num_messages=CONSUME_BATCH, timeout=CONSUME_TIMEOUT_SECONDS)
            idle = not messages
            self._take(messages)
            now = time.monotonic()
            caught_up = len(messages) != CONSUME_BATCH  # not a full batch: what came is readable at once
            if self._committer.due(now, at_once=caught_up):
                self._commit(stop)
            if now - last_lag >= (LAG_CHECK_SECONDS if not self.ready else REPORT_EVERY_SECONDS / 2):
                last_lag = now
                if self._catch_up(consumer):
                    last_report = now
            if now - last_report >= REPORT_EVERY_SECONDS:
                status = ExecutionStatus.COMPLETED if self.ready else ExecutionStatus.END_OF_PUSH_RECEIVED
                self._report(status)
                last_report = now

    def _take(self, messages: Sequence[ConsumedMessage]) -> None:
        """Each consumed message in order. A plain PUT or DELETE is the hot path, inlined for speed: read with one
        unpack, checked by DIV without building a Message; anything else goes through `_take_message`."""
        positions, region_names, validator = self._positions, self._region_names, self._validator
        committer, apply = self._committer, self._apply
        for raw in messages:
            if raw.error():
                skip_consumer_error(raw, "real-time topics")
                continue
            topic = raw.topic()
            positions[(topic, raw.partition())] = raw.offset() + 1
            committer.uncommitted += 1
            kafka_key, kafka_value = raw.key() or b"", raw.value() or b""  # none: not a message, `decode` says so
            region = region_names[topic]
            if kafka_key[:1] == KEY_TYPE_DATA and len(kafka_value) >= DATA_PREFIX.size:
                version, mtype, guid, segment, sequence, timestamp, schema_id = DATA_PREFIX.unpack_from(kafka_value)
                if version == PROTOCOL_VERSION and schema_id >= 0 and mtype <= MessageType.DELETE:
                    body = memoryview(kafka_value)[HEADER.size :]
                    try:
                        new = validator.accept_data(guid, segment, sequence, kafka_key, body)
                    except DataIntegrityError as exc:
                        new = self._integrity_error(guid, exc, raw)
                    if not new:
                        self.duplicates += 1
                    elif mtype == MessageType.PUT:
                        stamp = encode_stamp(timestamp, region)
                        apply(kafka_key[1:], stamp, timestamp, schema_id, kafka_value[DATA_PREFIX.size :])
                    else:
                        apply(kafka_key[1:], encode_stamp(timestamp, region, True), timestamp, schema_id, None)
                    continue
            self._take_message(raw, kafka_key, kafka_value, region)

    def _take_message(self, raw: ConsumedMessage, kafka_key: bytes, kafka_value: bytes, region: bytes) -> None:
        """A message off the hot path, decoded and checked by DIV, to its handler."""
        message, checksummed = decode_checked(kafka_key, kafka_value)
        try:
            new = self._validator.accept(message, checksummed)
        except DataIntegrityError as exc:
            new = self._integrity_error(message.producer.guid, exc, raw)
        if not new:
            self.duplicates += 1
            return
        timestamp = message.producer.timestamp_ms
        if message.type is MessageType.DELETE:
            self._apply(message.key, encode_stamp(timestamp, region, True), timestamp, message.schema_id, None)
        elif message.type is not MessageType.PUT:
            return  # segment control messages: DIV only
        elif message.schema_id == CHUNK_SCHEMA_ID:
            # Staged per producer: two writers' chunks of one key's large values never mix.
            self._committer.stage_chunk(message.producer.guid + message.key, message.value)
        elif message.schema_id == MANIFEST_SCHEMA_ID:
            self._put_large_value(message, region)
        else:
            self._apply(message.key, encode_stamp(timestamp, region), timestamp, message.schema_id, message.value)

    # handlers
    def _apply(self, key: bytes, stamp: bytes, timestamp: int, schema_id: int, value: bytes | None) -> None:
        """A nearline write (a delete where `value` is None), if it is newer than the key's latest: into the batch
        with its stamp, and written on to the region's version topic."""
        if timestamp <= self._expired_until:
            self.expired += 1
            return
        known = self._stamps.get(key)
        if known is None:
            known = self.storage.get_write_stamp(key)
        if known is not None and stamp[1:] < known[1:]:  # `conflict.stamp_wins`, inlined
            self.superseded += 1
            return
        batch, writer = self._committer.batch, self._writer
        if value is None:
            batch.delete(key)
            if writer is not None:
                writer.delete(key, schema_id, partition=self.partition, timestamp_ms=timestamp)
        else:
            stored = value if self._uncompressed else self.hybrid.compress(value)
            batch.put(key, SCHEMA_ID.pack(schema_id) + stored)
            if writer is not None:
                writer.put(key, stored, schema_id, partition=self.partition, timestamp_ms=timestamp)
        self.storage.put_write_stamp(batch, key, stamp)
        self._stamps[key] = stamp
        self.applied += 1

    def _put_large_value(self, message: Message, region: bytes) -> None:
        """A large nearline value from its producer's chunks, dropped (counted, logged) if they are not all there."""
        manifest = chunking.Manifest.decode(message.value)
        try:
            value = self._committer.take_chunks(manifest.chunk_keys, prefix=message.producer.guid)
        except MissingChunk as exc:
            self._drop_large_value(message.key, f"chunk {exc.chunk_key.hex()} missing")
            return
        if len(value) != manifest.total_size:
            self._drop_large_value(message.key, f"{len(value)} bytes, its manifest says {manifest.total_size}")
            return
        timestamp = message.producer.timestamp_ms
        self._apply(message.key, encode_stamp(timestamp, region), timestamp, manifest.schema_id, value)

    def _drop_large_value(self, key: bytes, reason: str) -> None:
        self.integrity_errors += 1
        log.error("large nearline value of key %s dropped: %s", key.hex(), reason)

    def _integrity_error(self, guid: bytes, exc: DataIntegrityError, raw: ConsumedMessage) -> bool:
        """After END_OF_PUSH a producer's gap or bad checksum is counted and logged, as Venice does, and the
        producer is followed from this message on: one writer's loss must not stop a region's nearline writes."""
        self.integrity_errors += 1
        log.error(
            "real-time DIV error at %s[%d]@%d (taken from here on): %s", raw.topic(), raw.partition(), raw.offset(), exc
        )
        self._validator.forget(guid)
        return self._validator.accept(*decode_checked(raw.key() or b"", raw.value() or b""))

    # commits and reports
    def _commit(self, stop: threading.Event) -> None:
        """The version topic holds every applied write before the checkpoint passes it: its flush is bounded well
        below the region server's wait for a stopping task, and a stop meanwhile commits nothing (replayed on
        restart)."""
        if self._writer is not None:
            self._writer.flush(FLUSH_TIMEOUT_SECONDS)
        if stop.is_set():
            return
        self._validator.forget_ended(KEEP_ENDED_PRODUCERS)
        real_time = RealTimeCheckpoint(dict(self._positions), self._validator.state(), self.applied, self.ready)
        self._committer.commit(replace(self._checkpoint, real_time=real_time))
        self._stamps.clear()

    def _catch_up(self, consumer: MessageSource) -> bool:
        """The lag measured; True if the partition has just caught up (reported COMPLETED)."""
        self._measure_lag(consumer)
        if self.ready or not 0 <= self.lag <= self.hybrid.settings.offset_lag_threshold:
            return False
        self.ready = True
        log.info("partition %d caught up with the real-time topics (lag %d)", self.partition, self.lag)
        self._report(ExecutionStatus.COMPLETED)
        return True

    def _measure_lag(self, consumer: MessageSource) -> None:
        lag = 0
        for (topic, p), position in self._positions.items():
            try:
                end = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=1.0, cached=False)[1]
            except KafkaException as exc:
                log.debug("end offset of %s[%d] unavailable: %s", topic, p, exc)
                return  # keep the previous figure
            lag += max(0, end - position)
        self.lag = lag

    def _report(self, status: ExecutionStatus) -> None:
        """The version topic's figures as END_OF_PUSH left them, with the phase's status."""
        self.report(status, self._checkpoint.next_offset - 1, self._checkpoint.records, "")
