"""A partition's batch phase: its version topic up to END_OF_PUSH, taken into the store one consumed batch at a time.

A consumed batch that is one run of PUTs (`protocol.put_run`: one producer segment, consecutive sequence numbers,
user schemas, no write stamp to keep) is taken at once: its headers checked with numpy, DIV continuing the segment
with one CRC over the run, one `PartitionStore.put_run`. A batch that is not (a partition's first: START_OF_SEGMENT,
then data) is cut into stretches of data and of other messages, each stretch of data tried as a run; anything else
goes message by message, a plain PUT or DELETE on a hot path (one unpack, DIV's common case), the rest (control
messages, chunks, manifests) through a handler each. DIV's verdicts are the same whichever way a message goes.
A gap or a bad checksum fails the partition with a clear error.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Generic

from venice_core.ingestion.committer import Committer
from venice_core.ingestion.conflict import WriteStamp
from venice_core.ingestion.messages import ConsumedMessage, decode_checked, skip_consumer_error
from venice_core.ingestion.stats import IngestionStats
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
    Message,
    MessageType,
)
from venice_core.protocol.put_run import put_run
from venice_core.pubsub.getters import ERROR, KEY, VALUE
from venice_core.storage.api import SORTED_COMMIT_EVERY_MESSAGES, SORTED_COMMIT_EVERY_SECONDS, Batch, PartitionStore
from venice_core.storage.ingestion_checkpoint import IngestionCheckpoint, StartOfPush

# A consumed batch this long or longer is tried as one run of PUTs (`protocol.put_run`); a shorter one (a consumer
# keeping up with its producer) saves too little for the run's fixed numpy steps.
RUN_MIN_MESSAGES = 16


def _is_data(message: ConsumedMessage) -> bool:
    """A data message (PUT, DELETE, chunk), not a control message or a consumer error."""
    key = message.key()
    return message.error() is None and key is not None and key[:1] == KEY_TYPE_DATA


def _stretches(messages: Sequence[ConsumedMessage]) -> list[Sequence[ConsumedMessage]]:
    """The messages cut where data messages and others alternate, in order, if a control message opens or closes
    them (a segment's start, its end, END_OF_PUSH); else, or too few to hold a run, as they are."""
    if len(messages) <= RUN_MIN_MESSAGES or (_is_data(messages[0]) and _is_data(messages[-1])):
        return [messages]  # no control message at either end: not a segment's start or end, nothing to cut off
    data = list(map(_is_data, messages))
    cuts = [i for i in range(1, len(data)) if data[i] != data[i - 1]]
    return [messages[start:end] for start, end in zip([0, *cuts], [*cuts, len(messages)], strict=True)]


class BatchPhase(Generic[Batch]):
    """The handlers of a partition's version-topic messages up to END_OF_PUSH, and its commits (`Committer`, at the
    store's `commit_every_messages` / `commit_every_seconds`), from `checkpoint` on. `stats` is the task's, kept up
    to date; `stamp_writes` (a hybrid version) keeps the write stamp of records that carry one (a repush's, so a
    replayed older nearline write loses to them; a batch push's records carry none)."""

    def __init__(
        self,
        storage: PartitionStore[Batch],
        partition: int,
        stats: IngestionStats,
        checkpoint: IngestionCheckpoint,
        stamp_writes: bool = False,
        source: str = "",
    ) -> None:
        self.storage = storage
        self.partition = partition
        self.stats = stats
        self.stamp_writes = stamp_writes
        self.source = source  # what is consumed, for the log
        self.validator = Validator(checkpoint.div)
        self.committer = Committer(storage, storage.commit_every_messages, storage.commit_every_seconds)
        self.start_of_push = checkpoint.start_of_push
        self._sorted(checkpoint.sorted_push)
        # Where the replica is in the region's version topic, and, while it leads outside the source region, in the
        # source region's (`ingestion.leader`): `stats.offset` follows the topic it takes from.
        self.next_offset = checkpoint.next_offset
        self.upstream_next = self._committed_upstream = checkpoint.upstream_next
        self.before_commit: Callable[[], None] | None = None  # a leader's: its records acknowledged first

    def lead(self, upstream_next: int, before_commit: Callable[[], None]) -> None:
        """Take from the source region's topic from `upstream_next`, `before_commit` called before each commit."""
        self.upstream_next, self.before_commit = upstream_next, before_commit
        self.stats.offset = upstream_next - 1

    def follow(self) -> None:
        """Take from the region's topic again, where this replica stopped following (what it produced while it
        led is read again there, and dropped as duplicates)."""
        self.before_commit = None
        self.upstream_next = self._committed_upstream  # where a leader that took nothing would have started is none
        self.stats.offset = self.next_offset - 1

    def take(self, consumed: Sequence[ConsumedMessage]) -> IngestionCheckpoint | None:
        """A consumed batch, in order: END_OF_PUSH's checkpoint once it is committed (what follows it is left)."""
        if self._take_run(consumed):
            return None
        # Stretch by stretch, data apart from the rest, each stretch of data tried as a run: a partition's first
        # batch used to go one message at a time, and the runs after it in the same commit with it.
        stretches = _stretches(consumed)
        for messages in stretches:
            if len(stretches) > 1 and _is_data(messages[0]) and self._take_run(messages):
                continue  # taken as one run: none left to take one at a time
            end_of_push = self._take_one_by_one(messages)
            if end_of_push is not None:
                return end_of_push
        return None

    def commit_if_due(self, now: float) -> bool:
        """Commit if due: whether it did."""
        if self.committer.due(now):
            self._commit()
            return True
        return False

    def commit_rest(self) -> None:
        """What is uncommitted, at a stop."""
        if self.committer.uncommitted:
            self._commit()

    # the ways a message goes
    def _take_run(self, messages: Sequence[ConsumedMessage]) -> bool:
        """The messages as one run of PUTs (`put_run`), taken at once, if they are one."""
        if len(messages) < RUN_MIN_MESSAGES or any(map(ERROR, messages)):
            return False
        validator = self.validator
        run = put_run(list(map(KEY, messages)), list(map(VALUE, messages)), self.stamp_writes, validator.continues)
        if run is None or not validator.accept_run(
            run.guid, run.segment, run.first_sequence, run.last_sequence, run.checksummed
        ):
            return False
        self.stats.offset = messages[-1].offset()
        self.stats.records += len(run)
        self.committer.uncommitted += len(run)
        if self.sorted_push:
            self.storage.sst_put_run(run.keys(), run.stored())
        else:
            self.storage.put_run(self.committer.batch, run)
        return True

    def _take_one_by_one(self, messages: Sequence[ConsumedMessage]) -> IngestionCheckpoint | None:
        """Each message in order; END_OF_PUSH's checkpoint once committed. A plain PUT or DELETE is the hot path,
        inlined for speed: read with one unpack, checked by DIV without building a Message, written to the batch.
        Control messages, chunks and manifests (rare) go through `_take_message`."""
        stats, committer = self.stats, self.committer
        accept_data, delete, stamp_writes = self.validator.accept_data, committer.batch.delete, self.stamp_writes
        put = self.storage.sst_put if self.sorted_push else committer.batch.put
        for raw in messages:
            if raw.error():
                skip_consumer_error(raw, self.source)
                continue
            kafka_key, kafka_value = raw.key() or b"", raw.value() or b""  # none: not a message, `decode` says so
            stats.offset = raw.offset()
            if kafka_key[:1] == KEY_TYPE_DATA and len(kafka_value) >= DATA_PREFIX.size:
                version, mtype, guid, segment, sequence, timestamp, schema_id = DATA_PREFIX.unpack_from(kafka_value)
                if version == PROTOCOL_VERSION and schema_id >= 0 and mtype <= MessageType.DELETE:
                    if not accept_data(guid, segment, sequence, kafka_key, memoryview(kafka_value)[HEADER.size :]):
                        stats.duplicates += 1
                        continue
                    committer.uncommitted += 1
                    if mtype == MessageType.PUT:
                        stats.records += 1
                        put(kafka_key[1:], kafka_value[HEADER.size :])
                    else:
                        delete(kafka_key[1:])
                    if timestamp and stamp_writes:
                        self._stamp(kafka_key[1:], timestamp, tombstone=mtype == MessageType.DELETE)
                    continue
            end_of_push = self._take_message(raw, kafka_key, kafka_value)
            if end_of_push is not None:
                return end_of_push
            put = self.storage.sst_put if self.sorted_push else committer.batch.put  # START_OF_PUSH may sort it
        return None

    def _take_message(self, raw: ConsumedMessage, kafka_key: bytes, kafka_value: bytes) -> IngestionCheckpoint | None:
        """A message off the hot path, decoded and checked by DIV, to its handler."""
        message, checksummed = decode_checked(kafka_key, kafka_value)
        if not self.validator.accept(message, checksummed):
            self.stats.duplicates += 1
            return None
        self.committer.uncommitted += 1
        if message.type is MessageType.PUT:
            self._take_put(message, kafka_value)
        elif message.type is MessageType.DELETE:
            self._delete(message.key, message.producer.timestamp_ms)
        elif message.control_type is ControlMessageType.START_OF_PUSH:
            self._start_of_push(message)
        elif message.control_type is ControlMessageType.END_OF_PUSH:
            return self._end_of_push(message, raw)
        return None  # a segment's start or end: DIV only

    # handlers
    def _take_put(self, message: Message, kafka_value: bytes) -> None:
        """A chunk is staged until its manifest comes; a manifest puts the value its chunks make."""
        if message.schema_id == CHUNK_SCHEMA_ID:
            self.committer.stage_chunk(message.key, message.value)
        elif message.schema_id == MANIFEST_SCHEMA_ID:
            manifest = chunking.Manifest.decode(message.value)
            value = self.committer.take_chunks(manifest.chunk_keys)
            self._put(message.key, SCHEMA_ID.pack(manifest.schema_id) + value, message.producer.timestamp_ms)
        else:
            self._put(message.key, kafka_value[HEADER.size :], message.producer.timestamp_ms)  # schema id + value

    def _put(self, key: bytes, stored: bytes, timestamp: int) -> None:
        self.stats.records += 1
        if self.sorted_push:
            self.storage.sst_put(key, stored)
        else:
            self.committer.batch.put(key, stored)
        if timestamp and self.stamp_writes:
            self._stamp(key, timestamp, tombstone=False)

    def _delete(self, key: bytes, timestamp: int) -> None:
        self.committer.batch.delete(key)
        if timestamp and self.stamp_writes:
            self._stamp(key, timestamp, tombstone=True)

    def _stamp(self, key: bytes, timestamp: int, tombstone: bool) -> None:
        self.storage.put_write_stamp(self.committer.batch, key, WriteStamp(timestamp, tombstone=tombstone).encode())

    def _start_of_push(self, message: Message) -> None:
        """The push's START_OF_PUSH, or a second one that says the rest of the partition comes unsorted (a repush
        that found the partition not plain after copying part of it sorted): what the SST file holds so far is
        ingested, and the rest is written as plain writes, which may overwrite or delete it. Should the partition
        restart from an earlier checkpoint, the replayed sorted part goes to a new SST file, which RocksDB orders
        after the one ingested here (a file that overlaps the data gets a newer sequence number)."""
        start_of_push = StartOfPush.from_control(message.control)
        if self.start_of_push is not None and start_of_push != replace(self.start_of_push, sorted=False):
            raise DataIntegrityError(
                f"a second START_OF_PUSH may only say the rest is unsorted: {self.start_of_push.to_json()} "
                f"then {start_of_push.to_json()}"
            )
        if self.sorted_push and not start_of_push.sorted:
            self.storage.ingest_sst()
        self.start_of_push = start_of_push
        self._sorted(start_of_push.sorted)

    def _sorted(self, sorted_push: bool) -> None:
        """Whether the push is ingested as SST files (sorted, and a store that can), and so how often it commits."""
        self.sorted_push = sorted_push and self.storage.sorted_ingest
        if self.sorted_push:
            self.committer.every_messages = SORTED_COMMIT_EVERY_MESSAGES
            self.committer.every_seconds = SORTED_COMMIT_EVERY_SECONDS
        else:
            self.committer.every_messages = self.storage.commit_every_messages
            self.committer.every_seconds = self.storage.commit_every_seconds

    def _end_of_push(self, message: Message, raw: ConsumedMessage) -> IngestionCheckpoint:
        """END_OF_PUSH's count checked, committed with the broker's time of it (where a hybrid version's real-time
        replay rewinds from)."""
        expected = (message.control.get("record_counts") or {}).get(str(self.partition))
        if expected is not None and expected != self.stats.records:
            raise DataIntegrityError(f"END_OF_PUSH counts {expected} records, ingestion stored {self.stats.records}")
        return self._commit(end_of_push=True, end_of_push_time_ms=raw.timestamp()[1])

    def _commit(self, end_of_push: bool = False, end_of_push_time_ms: int | None = None) -> IngestionCheckpoint:
        if self.before_commit is not None:
            self.before_commit()
            self.upstream_next = self.stats.offset + 1
        else:
            self.next_offset, self.upstream_next = self.stats.offset + 1, None
        self._committed_upstream = self.upstream_next
        checkpoint = IngestionCheckpoint(
            next_offset=self.next_offset,
            upstream_next=self.upstream_next,
            div=self.validator.state(),
            start_of_push=self.start_of_push,
            end_of_push=end_of_push,
            records=self.stats.records,
            end_of_push_time_ms=end_of_push_time_ms,
        )
        if self.sorted_push:
            self.storage.ingest_sst()  # before the checkpoint that covers it
        self.committer.commit(checkpoint)
        return checkpoint
