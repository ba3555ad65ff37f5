"""What a partition's leader does outside the source region, as Venice's leader does it: it ingests the source
region's version topic (the upstream) into its own storage and produces each record it takes, byte for byte, to its
region's version topic, which the region's followers ingest. Each record is consumed once by the leader, not copied
first and then consumed again.

The leader's checkpoint holds both positions in the same atomic write as its data: the upstream offset it has taken
up to (`IngestionCheckpoint.upstream_next`) and its position in the region's topic as a follower (`next_offset`). A
commit waits for the broker to acknowledge every record produced before it (`LocalCopy.flush`), so what a checkpoint
covers is always in the region's topic. The leader then records that upstream position in the metadata store with
its epoch (`Leading.record`; an old epoch's is refused): where a new leader resumes the copy.

A new leader first reads the region's topic up to its end as it was when it took over, then takes the upstream from
the position its predecessor recorded, never past what it holds itself. Records its predecessor produced after that
position are produced again: the same bytes with the same producer GUIDs and sequence numbers, which every
follower's DIV (and the new leader's own) drops as duplicates. The same holds for a deposed leader (paused past its
lease) whose in-flight records land after the new leader's. Before producing each consumed batch the leader checks
that it still leads under its epoch with its lease running (`Leading.epoch`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import methodcaller

from confluent_kafka import KafkaError, Message, Producer

from venice_core.ingestion.messages import ConsumedMessage
from venice_core.protocol.envelope import HEADER, KEY_TYPE_CONTROL, ControlMessageType
from venice_core.pubsub import PRODUCER_CONFIG, client_config
from venice_core.pubsub.getters import ERROR, KEY, VALUE

# Whether a Kafka key is a control message's, as a C-level callable (`map` of it runs no Python bytecode).
_IS_CONTROL = methodcaller("startswith", KEY_TYPE_CONTROL)

# Within hosting's wait for a stopped partition (30 s): a commit waiting on a broker that is away fails instead, and
# the partition is taken again from its checkpoint.
FLUSH_TIMEOUT_SECONDS = 20.0


class ReplicationError(RuntimeError):
    """The region's version topic could not be written: the partition fails in the region (nothing is committed
    past what the broker acknowledged)."""


@dataclass(frozen=True)
class Upstream:
    """The source region's version topic of a version, where a leader outside the source region ingests from."""

    bootstrap: str
    topic: str


@dataclass(frozen=True)
class Leading:
    """A replica outside the source region, as a possible leader of its partition: `epoch()` is the epoch it leads
    under now (None while it follows, or its lease is not running), `recorded(epoch)` the upstream position its
    partition's leaders last recorded (None unless it still leads under `epoch`), `record(epoch, position,
    replicated)` records its own (False: the partition has another leader now)."""

    upstream: Upstream
    epoch: Callable[[], int | None]
    recorded: Callable[[int], int | None]
    record: Callable[[int, int, bool], bool]
    producer_config: Mapping[str, str] = field(default_factory=dict)  # over `pubsub.PRODUCER_CONFIG`


def is_end_of_push(kafka_key: bytes, kafka_value: bytes) -> bool:
    return (
        kafka_key[:1] == KEY_TYPE_CONTROL
        and len(kafka_value) > HEADER.size
        and kafka_value[HEADER.size] == ControlMessageType.END_OF_PUSH
    )


class LocalCopy:
    """The leader's producer of its region's version topic: records go out as they are taken, and `flush` (before
    each commit) waits until the broker acknowledged them all. A failed delivery raises `ReplicationError`."""

    def __init__(self, bootstrap: str, topic: str, partition: int, producer_config: Mapping[str, str]) -> None:
        self.topic, self.partition = topic, partition
        self._errors: list[KafkaError] = []
        self._producer = Producer(
            client_config(
                bootstrap,
                **PRODUCER_CONFIG,
                # One delivery callback per failed message only: a callback per record costs the hot path.
                **{"delivery.report.only.error": True, "on_delivery": self._on_delivery, **producer_config},
            )
        )

    def _on_delivery(self, error: KafkaError | None, _message: Message) -> None:
        if error is not None:
            self._errors.append(error)

    def produce(self, messages: Sequence[ConsumedMessage]) -> None:
        """The consumed records in order, up to and including END_OF_PUSH (what follows it in the source topic, a
        hybrid version's nearline winners in the source region, is not the region's to copy). Control messages keep
        the source's timestamps (END_OF_PUSH's is where a hybrid version's replay rewinds from); data is stamped as
        it is produced (nothing reads a version topic's data by time, and a timestamp given costs a produce about a
        fifth more). Consumer errors are the ingestion's to treat. A batch of data messages alone (most of a push)
        is read with C-level getters, not a Python step a field."""
        keys, values = list(map(KEY, messages)), list(map(VALUE, messages))
        if any(map(ERROR, messages)) or None in keys or None in values or any(map(_IS_CONTROL, keys)):
            self._produce_one_by_one(messages)
        else:
            produce, topic, partition = self._producer.produce, self.topic, self.partition
            for key, value in zip(keys, values, strict=True):
                try:
                    produce(topic, value, key, partition)
                except BufferError:
                    self._send(key, value)
        self._producer.poll(0)
        self._check()

    def _produce_one_by_one(self, messages: Sequence[ConsumedMessage]) -> None:
        for raw in messages:
            if raw.error():
                continue
            key, value = raw.key() or b"", raw.value() or b""
            if key[:1] != KEY_TYPE_CONTROL:
                self._send(key, value)
                continue
            self._send(key, value, raw.timestamp()[1])
            if is_end_of_push(key, value):
                break

    def _send(self, key: bytes, value: bytes, timestamp_ms: int = 0) -> None:
        """One record, once the local queue has room for it; stamped now unless given a timestamp."""
        while True:
            try:
                self._producer.produce(self.topic, value, key, self.partition, timestamp=timestamp_ms)
                return
            except BufferError:  # the local queue full: deliveries drain it, or fail (a broker away)
                self._producer.poll(0.05)
                self._check()

    def flush(self) -> None:
        """Wait until every record produced is acknowledged."""
        if self._producer.flush(FLUSH_TIMEOUT_SECONDS) > 0:
            raise ReplicationError(f"producing to {self.topic}[{self.partition}] timed out")
        self._check()

    def close(self) -> None:
        """What is not acknowledged by now was not committed either: it is produced again from the checkpoint."""
        self._producer.flush(5)

    def _check(self) -> None:
        if self._errors:
            raise ReplicationError(f"producing to {self.topic}[{self.partition}] failed: {self._errors[0].str()}")
