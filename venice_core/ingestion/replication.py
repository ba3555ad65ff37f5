"""Leader replication, as Venice's leader does it: outside the source region, the leader of a partition copies the
source region's version topic, byte for byte, into the region's own, up to and including END_OF_PUSH. Every replica
of the region, the leader's included, ingests the region's own topic: a replica's storage and checkpoint never depend
on whether it leads, so leadership can move at any time.

Where a leader starts: the position its predecessor recorded as acknowledged (`progress`, kept with the leader's
epoch in the metadata store), never past it. Records copied after that position and before a handover are copied
again: the same bytes with the same producer GUIDs and sequence numbers, which every consumer's DIV drops as
duplicates. The same holds for a deposed leader (paused past its lease) whose in-flight records land after the new
leader's: duplicates, never new data. Before each consumed batch is produced, the leader checks that it may still
produce (`may_produce`: its instance's lease runs and the partition's epoch is still its own), and each recorded
progress names the epoch: a deposed leader's record is refused.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition

from venice_core.ingestion.messages import ConsumedMessage, message_source, skip_consumer_error
from venice_core.protocol.envelope import HEADER, KEY_TYPE_CONTROL, ControlMessageType
from venice_core.pubsub import CONSUMER_CONFIG, PRODUCER_CONFIG, client_config

log = logging.getLogger(__name__)

CONSUME_BATCH = 5000
PROGRESS_EVERY_SECONDS = 1.0
FLUSH_TIMEOUT_SECONDS = 60.0


class ReplicationError(RuntimeError):
    """The local version topic could not be written: the leader stops, and replicates again from its progress."""


def is_end_of_push(kafka_key: bytes, kafka_value: bytes) -> bool:
    return (
        kafka_key[:1] == KEY_TYPE_CONTROL
        and len(kafka_value) > HEADER.size
        and kafka_value[HEADER.size] == ControlMessageType.END_OF_PUSH
    )


class Replicator:
    """One led partition's replication: `run` until END_OF_PUSH is copied and acknowledged (True), or until stopped
    or deposed (False). A failed delivery raises `ReplicationError`."""

    def __init__(
        self,
        source_bootstrap: str,
        source_topic: str,
        local_bootstrap: str,
        local_topic: str,
        partition: int,
        start_offset: int,
        may_produce: Callable[[], bool],
        record_progress: Callable[[int, bool], bool],  # (position, END_OF_PUSH copied) -> still the leader
    ) -> None:
        self.source_bootstrap, self.source_topic = source_bootstrap, source_topic
        self.local_bootstrap, self.local_topic = local_bootstrap, local_topic
        self.partition = partition
        self.position = start_offset  # the next source offset to copy
        self.may_produce = may_produce
        self.record_progress = record_progress
        self.copied = 0
        self._errors: list[KafkaError] = []

    def _on_delivery(self, error: KafkaError | None, _message: Message) -> None:
        if error is not None:
            self._errors.append(error)

    def run(self, stop: threading.Event) -> bool:
        consumer = Consumer(
            client_config(self.source_bootstrap, **CONSUMER_CONFIG, **{"group.id": f"venice-leader-{self.local_topic}"})
        )
        producer = Producer(
            client_config(
                self.local_bootstrap,
                **PRODUCER_CONFIG,
                # One delivery callback per failed message only: a callback per record costs the hot path.
                **{"delivery.report.only.error": True, "on_delivery": self._on_delivery},
            )
        )
        consumer.assign([TopicPartition(self.source_topic, self.partition, self.position)])
        source = message_source(consumer)
        log.info("leading %s[%d] from source offset %d", self.local_topic, self.partition, self.position)
        acknowledged, last_progress = self.position, time.monotonic()
        try:
            while not stop.is_set():
                messages = source.consume(num_messages=CONSUME_BATCH, timeout=0.2)
                if not self.may_produce():
                    log.warning("no longer leading %s[%d]: nothing more produced", self.local_topic, self.partition)
                    return False
                ended = self._copy(producer, messages)
                producer.poll(0)
                self._check()
                now = time.monotonic()
                if ended or now - last_progress >= PROGRESS_EVERY_SECONDS:
                    if producer.flush(FLUSH_TIMEOUT_SECONDS) > 0:
                        raise ReplicationError(f"producing to {self.local_topic}[{self.partition}] timed out")
                    self._check()
                    if (ended or self.position != acknowledged) and not self.record_progress(self.position, ended):
                        log.warning("%s[%d] has another leader now", self.local_topic, self.partition)
                        return False
                    acknowledged, last_progress = self.position, now
                if ended:
                    log.info("%s[%d] replicated up to END_OF_PUSH", self.local_topic, self.partition)
                    return True
            return False
        finally:
            consumer.close()
            producer.flush(5)  # what is lost is copied again from the recorded progress

    def _copy(self, producer: Producer, messages: Sequence[ConsumedMessage]) -> bool:
        """Produce the consumed records in order; True once END_OF_PUSH is among them (what follows is left)."""
        produce, poll, topic, partition = producer.produce, producer.poll, self.local_topic, self.partition
        copied = 0
        try:
            for raw in messages:
                if raw.error():
                    skip_consumer_error(raw, f"{self.source_topic}[{partition}]")
                    continue
                key, value = raw.key() or b"", raw.value() or b""
                while True:
                    try:
                        produce(topic, value, key, partition)
                        break
                    except BufferError:
                        poll(0.05)
                copied += 1
                if key[:1] == KEY_TYPE_CONTROL and is_end_of_push(key, value):
                    self.position = raw.offset() + 1
                    return True
            if copied:
                self.position = next(m.offset() for m in reversed(messages) if not m.error()) + 1
            return False
        finally:
            self.copied += copied

    def _check(self) -> None:
        if self._errors:
            raise ReplicationError(f"producing to {self.local_topic}[{self.partition}] failed: {self._errors[0].str()}")
