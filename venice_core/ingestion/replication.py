"""Native replication: a non-source region copies the source version topic, partition by partition, into its
local version topic, byte for byte, and ingests from the local copy.

The copy resumes at the local topic's end offset: offsets of the two topics correspond one to one because the
copier is the local topic's only writer and produces with idempotence, so no checkpoint of its own is needed.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from venice_core.protocol.envelope import KEY_TYPE_CONTROL, ControlMessageType, decode
from venice_core.pubsub import CONSUMER_CONFIG, PRODUCER_CONFIG, client_config

log = logging.getLogger(__name__)


class PartitionReplicator:
    def __init__(
        self,
        source_bootstrap: str,
        source_topic: str,
        local_bootstrap: str,
        local_topic: str,
        partition: int,
        on_error: Callable[[str], None] = lambda _error: None,
    ) -> None:
        self.source_bootstrap, self.source_topic = source_bootstrap, source_topic
        self.local_bootstrap, self.local_topic = local_bootstrap, local_topic
        self.partition = partition
        self.on_error = on_error
        self.copied = 0
        self.completed = False
        self.error: str | None = None

    def _local_end(self, stop: threading.Event) -> int:
        """The local topic's end offset; a topic created a moment ago may not be in the metadata yet: retry."""
        consumer = Consumer(client_config(self.local_bootstrap, **{"group.id": "venice-replication"}))
        try:
            for attempt in range(60):
                try:
                    tp = TopicPartition(self.local_topic, self.partition)
                    return consumer.get_watermark_offsets(tp, timeout=15)[1]
                except KafkaException:
                    if attempt == 59 or stop.wait(0.5):
                        raise
            raise AssertionError("unreachable")
        finally:
            consumer.close()

    def run(self, stop: threading.Event) -> None:
        try:
            start = self._local_end(stop)
        except KafkaException as exc:
            self.error = f"replication of {self.source_topic}[{self.partition}] cannot start: {exc}"
            log.error(self.error)
            self.on_error(self.error)
            return
        consumer = Consumer(
            client_config(self.source_bootstrap, **CONSUMER_CONFIG, **{"group.id": "venice-replication"})
        )
        producer = Producer(client_config(self.local_bootstrap, **PRODUCER_CONFIG))
        errors: list[str] = []
        consumer.assign([TopicPartition(self.source_topic, self.partition, start)])
        try:
            while not stop.is_set() and not self.completed:
                for raw in consumer.consume(num_messages=5000, timeout=0.2):
                    if raw.error():
                        if raw.error().fatal():
                            errors.append(raw.error().str())
                        elif raw.error().code() != KafkaError._PARTITION_EOF:
                            log.warning("consumer error on %s (retrying): %s", self.source_topic, raw.error().str())
                        continue
                    key = raw.key()
                    while True:
                        try:
                            producer.produce(
                                self.local_topic,
                                value=raw.value(),
                                key=key,
                                partition=self.partition,
                                on_delivery=lambda err, _m: errors.append(err.str()) if err else None,
                            )
                            break
                        except BufferError:
                            producer.poll(0.05)
                    self.copied += 1
                    if key[:1] == KEY_TYPE_CONTROL:
                        message = decode(key, raw.value())
                        if message.control_type is ControlMessageType.END_OF_PUSH:
                            self.completed = True
                producer.poll(0)
                if errors:
                    raise RuntimeError(errors[0])
            producer.flush(60)
            if errors:
                raise RuntimeError(errors[0])
        except Exception as exc:  # noqa: BLE001 - reported as the partition's error
            self.error = f"replication of {self.source_topic}[{self.partition}] failed: {exc}"
            log.error(self.error)
            self.on_error(self.error)
        finally:
            consumer.close()
