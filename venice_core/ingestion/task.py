"""Ingest one partition of a version topic into a `storage.api.PartitionStore` (a region server's RocksDB, a Da
Vinci client's RocksDB or DuckDB); outside the source region, as the partition's leader, also mirror each consumed
record to the region's own version topic (`replication.VersionTopicMirror`).

Every commit writes the data and the checkpoint (next offset, DIV state, START_OF_PUSH settings, record count) in
one atomic write of the store (a RocksDB WriteBatch, a DuckDB transaction), so a task killed at any point resumes
from its checkpoint with exactly the data it covers. A gap or a bad checksum before END_OF_PUSH fails the partition
with a clear error.

A hybrid version's partition goes on after END_OF_PUSH with the real-time phase (`real_time.RealTimeIngestion`):
its checkpoint keeps the batch fields as END_OF_PUSH left them and adds the real-time offsets.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import methodcaller
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from venice_core.ingestion.conflict import WriteStamp
from venice_core.ingestion.real_time import HybridIngestion, RealTimeIngestion
from venice_core.ingestion.replication import ReplicationError, VersionTopicMirror
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
    ControlMessageType,
    MessageType,
    ProtocolError,
    checksum_bytes,
    decode,
)
from venice_core.protocol.put_run import put_run
from venice_core.pubsub import CONSUMER_CONFIG, client_config
from venice_core.status import ExecutionStatus
from venice_core.storage.api import PartitionStore
from venice_core.storage.ingestion_checkpoint import IngestionCheckpoint, StartOfPush

log = logging.getLogger(__name__)
# A consumed message's parts, read in C over a whole batch (`map`), not by a Python loop.
_error, _key, _value = methodcaller("error"), methodcaller("key"), methodcaller("value")

Reporter = Callable[[ExecutionStatus, int, int, str], None]  # status, offset, records, details
CONSUME_BATCH = 5000
# A consumed batch this long or longer is tried as one run of PUTs (`protocol.put_run`); a shorter one (a consumer
# keeping up with its producer) saves too little for the run's fixed numpy steps.
RUN_MIN_MESSAGES = 16
REPORT_EVERY_SECONDS = 2.0
# A real-time phase failing this long (a broker away, a topic gone) is reported ERROR; it keeps retrying.
REAL_TIME_FAILURE_REPORT_SECONDS = 60.0


@dataclass
class IngestionStats:
    records: int = 0
    duplicates: int = 0
    offset: int = -1  # last consumed offset
    end_offset: int = 0
    started_at: float = field(default_factory=time.monotonic)

    @property
    def lag(self) -> int:
        return max(0, self.end_offset - self.offset - 1)


def _is_data(message: Any) -> bool:
    """A data message (PUT, DELETE, chunk), not a control message or a consumer error."""
    key = message.key()
    return message.error() is None and key is not None and key[:1] == KEY_TYPE_DATA


def _stretches(messages: list[Any]) -> list[list[Any]]:
    """The messages cut where data messages and others alternate, in order, if a control message opens or closes
    them (a segment's start, its end, END_OF_PUSH); else, or too few to hold a run, as they are."""
    if len(messages) <= RUN_MIN_MESSAGES or (_is_data(messages[0]) and _is_data(messages[-1])):
        return [messages]  # no control message at either end: not a segment's start or end, nothing to cut off
    data = list(map(_is_data, messages))
    cuts = [i for i in range(1, len(data)) if data[i] != data[i - 1]]
    return [messages[start:end] for start, end in zip([0, *cuts], [*cuts, len(messages)], strict=True)]


class PartitionIngestionTask:
    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partition: int,
        storage: PartitionStore,
        report: Reporter,
        consumer_group: str,
        mirror: VersionTopicMirror | None = None,
        hybrid: HybridIngestion | None = None,
    ) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.partition = partition
        self.storage = storage
        self.report = report
        self.consumer_group = consumer_group
        self.mirror = mirror
        self.hybrid = hybrid
        self.real_time: RealTimeIngestion | None = None
        self.stats = IngestionStats()
        self.error: str | None = None
        self.completed = False

    def run(self, stop: threading.Event) -> None:
        checkpoint = self.storage.checkpoint() or IngestionCheckpoint()
        self.stats.records = checkpoint.records
        self.stats.offset = checkpoint.next_offset - 1
        if checkpoint.end_of_push:
            self.completed = True
            self._after_end_of_push(checkpoint, stop)
            return
        if checkpoint.next_offset:
            log.info(
                "resuming %s[%d] from its checkpoint at offset %d (%d records)",
                self.topic,
                self.partition,
                checkpoint.next_offset,
                checkpoint.records,
            )
        validator = Validator(checkpoint.div)
        start = checkpoint.next_offset
        if self.mirror is not None:
            try:
                start = min(start, self.mirror.start(stop))
            except ReplicationError as exc:
                self._fail(str(exc))
                return
        consumer = Consumer(client_config(self.bootstrap, **CONSUMER_CONFIG, **{"group.id": self.consumer_group}))
        consumer.assign([TopicPartition(self.topic, self.partition, start)])
        self.report(ExecutionStatus.STARTED, self.stats.offset, self.stats.records, "")
        end_of_push: IngestionCheckpoint | None = None
        try:
            end_of_push = self._loop(consumer, validator, checkpoint, stop)
        except (DataIntegrityError, ProtocolError, ReplicationError) as exc:
            self._fail(str(exc))
        except Exception as exc:  # noqa: BLE001 - never die silently: the push waits for this partition
            log.exception("ingestion of %s[%d] failed", self.topic, self.partition)
            self._fail(f"unexpected {type(exc).__name__}: {exc}")
        finally:
            consumer.close()
            if self.mirror is not None:
                self.mirror.close()
        if end_of_push is not None:
            self._after_end_of_push(end_of_push, stop)

    def _after_end_of_push(self, checkpoint: IngestionCheckpoint, stop: threading.Event) -> None:
        """A batch-only version is complete; a hybrid one goes on with the real-time topics until stopped."""
        if self.hybrid is None:
            self.report(ExecutionStatus.COMPLETED, self.stats.offset, self.stats.records, "")
            return
        caught_up = checkpoint.real_time is not None and checkpoint.real_time.ready  # kept across restarts
        status = ExecutionStatus.COMPLETED if caught_up else ExecutionStatus.END_OF_PUSH_RECEIVED
        self.report(status, self.stats.offset, self.stats.records, "")
        self.real_time = RealTimeIngestion(self.hybrid, self.partition, self.storage, self.report, self.consumer_group)
        failing_since: float | None = None
        delay = 1.0
        while not stop.is_set():
            started = time.monotonic()
            try:
                self.real_time.run(stop, checkpoint)
                return
            except Exception as exc:  # noqa: BLE001 - a broker or topic that is back later: retried from the checkpoint
                log.warning(
                    "real-time ingestion of %s[%d] failed, retrying in %.0fs: %s",
                    self.topic,
                    self.partition,
                    delay,
                    exc,
                )
                if time.monotonic() - started >= REAL_TIME_FAILURE_REPORT_SECONDS:  # it ran a while: a new failure
                    failing_since, delay = None, 1.0
                failing_since = failing_since or time.monotonic()
                if time.monotonic() - failing_since >= REAL_TIME_FAILURE_REPORT_SECONDS:
                    self._fail(f"real-time ingestion: {type(exc).__name__}: {exc} (still retrying)")
            if stop.wait(delay):
                return
            delay = min(delay * 2, 30.0)
            checkpoint = self.storage.checkpoint() or checkpoint

    def _fail(self, reason: str) -> None:
        self.error = f"partition {self.partition} of {self.topic}: {reason}"
        log.error("ingestion failed: %s", self.error)
        self.report(ExecutionStatus.ERROR, self.stats.offset, self.stats.records, self.error)

    def _refresh_end_offset(self, consumer: Consumer) -> None:
        """For the lag metric only: a slow answer under load keeps the previous value."""
        try:
            tp = TopicPartition(self.topic, self.partition)
            self.stats.end_offset = consumer.get_watermark_offsets(tp, timeout=1.0, cached=False)[1]
        except KafkaException as exc:
            log.debug("end offset of %s[%d] unavailable: %s", self.topic, self.partition, exc)

    def _loop(
        self, consumer: Consumer, validator: Validator, checkpoint: IngestionCheckpoint, stop: threading.Event
    ) -> IngestionCheckpoint | None:
        """Consume the version topic up to END_OF_PUSH; return the checkpoint END_OF_PUSH committed (None if
        stopped before it)."""
        batch = self.storage.new_batch()
        pending_chunks: dict[bytes, bytes] = {}
        uncommitted = 0
        last_commit = last_report = time.monotonic()
        sop = checkpoint.start_of_push
        accept_data = validator.accept_data

        def commit(eop: bool = False, eop_time_ms: int | None = None) -> IngestionCheckpoint:
            nonlocal batch, uncommitted, last_commit
            state = IngestionCheckpoint(
                next_offset=self.stats.offset + 1,
                div=validator.state(),
                start_of_push=sop,
                end_of_push=eop,
                records=self.stats.records,
                end_of_push_time_ms=eop_time_ms,
            )
            if sorted_push:
                self.storage.ingest_sst()  # before the checkpoint that covers it
            self.storage.commit(batch, state)
            batch = self.storage.new_batch()
            pending_chunks.clear()
            uncommitted = 0
            last_commit = time.monotonic()
            return state

        sorted_ingest = self.storage.sorted_ingest
        # A store may want other batch sizes than the region servers' (DuckDB: fewer, larger transactions).
        commit_every_messages = self.storage.commit_every_messages
        commit_every_seconds = self.storage.commit_every_seconds
        sorted_push = checkpoint.sorted_push and sorted_ingest
        apply_from = checkpoint.next_offset  # below it: records a restarted leader only mirrors
        mirror = self.mirror.mirror if self.mirror is not None else None
        # A hybrid version keeps the write stamp of records that carry one (a repush copies nearline writes with
        # their timestamps), so a replayed older nearline write loses to them. A batch push's records carry none.
        stamp_writes = self.hybrid is not None
        accept_run = validator.accept_run

        def apply_run(messages: list[Any]) -> bool:
            """The consumed messages as one run of PUTs (`put_run`), applied at once, if they are one."""
            nonlocal uncommitted
            if len(messages) < RUN_MIN_MESSAGES or any(map(_error, messages)):
                return False
            if mirror is not None and messages[0].offset() < apply_from:
                return False
            run = put_run(
                list(map(_key, messages)), list(map(_value, messages)), stamp_writes, continues=validator.continues
            )
            if run is None or not accept_run(
                run.guid, run.segment, run.first_sequence, run.last_sequence, run.checksummed
            ):
                return False
            if mirror is not None:
                for raw in messages:
                    mirror(raw)
            self.stats.offset = messages[-1].offset()
            self.stats.records += len(run)
            uncommitted += len(run)
            if sorted_push:
                for key, stored in zip(run.keys(), run.stored(), strict=True):
                    self.storage.sst_put(key, stored)
            else:
                self.storage.put_run(batch, run)
            return True

        while not stop.is_set():
            consumed = consumer.consume(num_messages=CONSUME_BATCH, timeout=0.2)
            # A batch that is not one run (a segment's start before its data; its end and END_OF_PUSH after) is
            # taken stretch by stretch, data apart from the rest, each stretch of data tried as a run: a partition's
            # first batch used to go one message at a time, and the runs after it in the same commit with it.
            stretches = [] if apply_run(consumed) else _stretches(consumed)
            for messages in stretches:
                if len(stretches) > 1 and _is_data(messages[0]) and apply_run(messages):
                    continue  # applied as one run: none left to take one at a time
                # The hot path, inlined for speed: a plain PUT (or DELETE) is read with one unpack, checked by DIV
                # without building a Message, and written to the batch. Control messages, chunks and manifests
                # (rare) go through the general path below.
                for raw in messages:
                    if raw.error():
                        if raw.error().fatal():
                            raise ProtocolError(f"fatal consumer error: {raw.error().str()}")
                        if raw.error().code() != KafkaError._PARTITION_EOF:
                            log.warning(
                                "consumer error on %s[%d] (retrying): %s", self.topic, self.partition, raw.error().str()
                            )
                        continue
                    if mirror is not None:
                        mirror(raw)
                        if raw.offset() < apply_from:
                            continue
                    kafka_key, kafka_value = raw.key(), raw.value()
                    self.stats.offset = raw.offset()
                    if kafka_key[:1] == KEY_TYPE_DATA and len(kafka_value) >= DATA_PREFIX.size:
                        version, mtype, guid, segment, sequence, timestamp, schema_id = DATA_PREFIX.unpack_from(
                            kafka_value
                        )
                        if version == PROTOCOL_VERSION and schema_id >= 0 and mtype <= MessageType.DELETE:
                            body = memoryview(kafka_value)[HEADER.size :]
                            if not accept_data(guid, segment, sequence, kafka_key, body):
                                self.stats.duplicates += 1
                                continue
                            uncommitted += 1
                            if mtype == MessageType.PUT:
                                self.stats.records += 1
                                if sorted_push:
                                    self.storage.sst_put(kafka_key[1:], kafka_value[HEADER.size :])
                                else:
                                    batch.put(kafka_key[1:], kafka_value[HEADER.size :])
                            else:
                                batch.delete(kafka_key[1:])
                            if timestamp and stamp_writes:
                                stamp = WriteStamp(timestamp, tombstone=mtype == MessageType.DELETE)
                                self.storage.put_write_stamp(batch, kafka_key[1:], stamp.encode())
                            continue
                    message = decode(kafka_key, kafka_value)
                    data = None if message.is_control else checksum_bytes(kafka_key, kafka_value)
                    if not validator.accept(message, data):
                        self.stats.duplicates += 1
                        continue
                    uncommitted += 1
                    if message.type is MessageType.PUT:
                        if message.schema_id == CHUNK_SCHEMA_ID:
                            pending_chunks[message.key] = message.value
                            self.storage.stage_chunk(batch, message.key, message.value)
                            continue
                        if message.schema_id == MANIFEST_SCHEMA_ID:
                            manifest = chunking.Manifest.decode(message.value)
                            parts = []
                            for chunk_key in manifest.chunk_keys:
                                part = pending_chunks.get(chunk_key) or self.storage.get_chunk(chunk_key)
                                if part is None:
                                    raise DataIntegrityError(f"chunk {chunk_key.hex()} of a large value is missing")
                                parts.append(part)
                                self.storage.drop_chunk(batch, chunk_key)
                            stored = SCHEMA_ID.pack(manifest.schema_id) + b"".join(parts)
                        else:
                            stored = kafka_value[HEADER.size :]  # schema id + value, as stored
                        self.stats.records += 1
                        if sorted_push:
                            self.storage.sst_put(message.key, stored)
                        else:
                            batch.put(message.key, stored)
                        if message.producer.timestamp_ms and stamp_writes:
                            stamp = WriteStamp(message.producer.timestamp_ms)
                            self.storage.put_write_stamp(batch, message.key, stamp.encode())
                    elif message.type is MessageType.DELETE:
                        batch.delete(message.key)
                        if message.producer.timestamp_ms and stamp_writes:
                            stamp = WriteStamp(message.producer.timestamp_ms, tombstone=True)
                            self.storage.put_write_stamp(batch, message.key, stamp.encode())
                    elif message.control_type is ControlMessageType.START_OF_PUSH:
                        sop = StartOfPush.from_control(message.control)
                        sorted_push = sop.sorted and sorted_ingest
                    elif message.control_type is ControlMessageType.END_OF_PUSH:
                        expected = (message.control.get("record_counts") or {}).get(str(self.partition))
                        if expected is not None and expected != self.stats.records:
                            raise DataIntegrityError(
                                f"END_OF_PUSH counts {expected} records, ingestion stored {self.stats.records}"
                            )
                        if self.mirror is not None:
                            self.mirror.flush()  # the local topic complete before the partition says so
                        state = commit(eop=True, eop_time_ms=raw.timestamp()[1])
                        self.completed = True  # only once committed: a Da Vinci client serves the version on it
                        return state
            if self.mirror is not None:
                self.mirror.check()
            now = time.monotonic()
            if uncommitted and (uncommitted >= commit_every_messages or now - last_commit >= commit_every_seconds):
                commit()
            if now - last_report >= REPORT_EVERY_SECONDS:
                self._refresh_end_offset(consumer)
                self.report(ExecutionStatus.PROGRESS, self.stats.offset, self.stats.records, "")
                last_report = now
        if uncommitted:
            commit()
        return None
