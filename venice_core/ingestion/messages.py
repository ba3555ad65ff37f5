"""What both ingestion loops (the batch phase, `batch_phase`, and the real-time phase, `real_time`) read of a
consumer and its messages, and how they treat the messages off their hot paths: consumer errors, and the decoding of
anything that is not a plain PUT or DELETE."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol, cast

from confluent_kafka import Consumer, KafkaError, TopicPartition

from venice_core.protocol.envelope import Message, ProtocolError, checksum_bytes, decode

log = logging.getLogger(__name__)


class ConsumedMessage(Protocol):
    """A consumed message (confluent-kafka's `Message`, or a test's stand-in). One that is not an error has its
    topic, partition and offset; its key and value are None only if no writer of the platform sent it."""

    def error(self) -> KafkaError | None: ...

    def key(self) -> bytes | None: ...

    def value(self) -> bytes | None: ...

    def topic(self) -> str: ...

    def partition(self) -> int: ...

    def offset(self) -> int: ...

    def timestamp(self) -> tuple[int, int]: ...  # (type, milliseconds)


class MessageSource(Protocol):
    """What the loops ask of a consumer."""

    def consume(self, num_messages: int, timeout: float) -> Sequence[ConsumedMessage]: ...

    def get_watermark_offsets(self, partition: TopicPartition, timeout: float, cached: bool) -> tuple[int, int]: ...


def message_source(consumer: Consumer) -> MessageSource:
    """The consumer as the loops read it. confluent-kafka types a message's topic, partition and offset as optional
    because an error event has none; the loops read them only of messages that are not errors."""
    return cast(MessageSource, consumer)


def skip_consumer_error(message: ConsumedMessage, source: str) -> None:
    """A message that is a consumer error: a fatal one raises; the end of a partition is none; any other is logged
    (the consumer retries). `source` names what is consumed, for the log."""
    error = message.error()
    if error is None:
        return
    if error.fatal():
        raise ProtocolError(f"fatal consumer error: {error.str()}")
    if error.code() != KafkaError._PARTITION_EOF:
        log.warning("consumer error on %s (retrying): %s", source, error.str())


def decode_checked(kafka_key: bytes, kafka_value: bytes) -> tuple[Message, bytes | None]:
    """A message decoded, and what its segment's checksum covers (None for a control message): what
    `protocol.div.Validator.accept` takes."""
    message = decode(kafka_key, kafka_value)
    return message, None if message.is_control else checksum_bytes(kafka_key, kafka_value)
