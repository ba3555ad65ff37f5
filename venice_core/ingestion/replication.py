"""Leader replication, as Venice's leader does it: in a non-source region the ingestion task consumes the source
region's version topic, applies each record to local storage, and produces it, byte for byte, to the region's own
version topic (`VersionTopicMirror`). One consume per record and region, where a copier followed by an ingestion of
the copy took two.

Offsets of the two topics correspond one to one: the mirror is the local topic's only writer, produces in order
with idempotence, and both topics start empty. So a restarted task needs no checkpoint of the mirror's own: it
produces from the local topic's end offset on, and applies from its storage checkpoint on, consuming the source from
the smaller of the two.
"""

from __future__ import annotations

import threading

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from venice_core.ingestion.messages import ConsumedMessage
from venice_core.pubsub import PRODUCER_CONFIG, admin, client_config


class ReplicationError(RuntimeError):
    """The local version topic could not be written: the partition fails with this reason."""


class VersionTopicMirror:
    """Produces the consumed source records of one partition to the local version topic."""

    def __init__(self, local_bootstrap: str, local_topic: str, partition: int) -> None:
        self.local_bootstrap, self.local_topic, self.partition = local_bootstrap, local_topic, partition
        self.end_offset = 0  # the local topic's end offset at start: records below it are there already
        self._errors: list[KafkaError] = []
        self._producer: Producer | None = None

    def start(self, stop: threading.Event) -> int:
        """Open the producer and return the local topic's end offset (the first source offset to produce)."""
        self.end_offset = self._local_end(stop)
        self._producer = Producer(
            client_config(
                self.local_bootstrap,
                **PRODUCER_CONFIG,
                # One delivery callback per failed message only: a callback per record costs the hot path.
                **{"delivery.report.only.error": True, "on_delivery": self._on_delivery},
            )
        )
        return self.end_offset

    def _on_delivery(self, error: KafkaError | None, _message: Message) -> None:
        if error is not None:
            self._errors.append(error)

    def _local_end(self, stop: threading.Event) -> int:
        """A topic created a moment ago may not be in the broker's metadata yet: retry for up to half a minute."""
        for attempt in range(60):
            try:
                return admin.end_offsets(self.local_bootstrap, self.local_topic, [self.partition])[0]
            except KafkaException as exc:
                if attempt == 59 or stop.wait(0.5):
                    raise ReplicationError(f"local version topic {self.local_topic} unavailable: {exc}") from exc
        raise AssertionError("unreachable")

    def mirror(self, raw: ConsumedMessage) -> None:
        """Produce one consumed record unless the local topic has it already."""
        if raw.offset() < self.end_offset:
            return
        producer = self._producer
        assert producer is not None, "start() first"
        while True:
            try:
                producer.produce(self.local_topic, value=raw.value(), key=raw.key(), partition=self.partition)
                break
            except BufferError:
                producer.poll(0.05)

    def check(self) -> None:
        """Serve delivery reports; a failed delivery fails the partition (the local topic would have a gap)."""
        if self._producer is not None:
            self._producer.poll(0)
        if self._errors:
            raise ReplicationError(f"producing to {self.local_topic}[{self.partition}] failed: {self._errors[0].str()}")

    def flush(self, timeout: float = 60.0) -> None:
        """Every mirrored record acknowledged, or an error: before the partition reports COMPLETED."""
        if self._producer is not None and self._producer.flush(timeout) > 0:
            raise ReplicationError(f"producing to {self.local_topic}[{self.partition}] timed out after {timeout:.0f}s")
        self.check()

    def close(self) -> None:
        """On stop: give in-flight records a moment; what is lost is produced again from the local end offset."""
        if self._producer is not None:
            self._producer.flush(5)
            self._producer = None
