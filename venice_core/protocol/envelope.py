"""The message envelope of a version topic.

Kafka key:   one type byte (0 for PUT and DELETE, so log compaction treats them alike; 2 for control messages)
             followed by the serialised key (control messages: the producer GUID and sequence number).
Kafka value: a fixed header, then the payload of the message type:

  header   >B B 16s i i q  protocol version, message type, producer GUID, segment, sequence number, timestamp ms
                           (for PUT and DELETE the record's write timestamp: BATCH_WRITE_TIMESTAMP for a batch
                           push, the writer's logical time or the time of the write for a nearline write; kept as
                           is when a record is written on, so a repush can read it)
  PUT      >i              value-schema id (CHUNK_SCHEMA_ID / MANIFEST_SCHEMA_ID for chunked values), then the value
  DELETE   >i              value-schema id
  CONTROL  >B              control message type, then its body as JSON (rare and small, so readability wins)

The layout is versioned by its first byte: a new layout is a new version number, and readers keep the old ones.
"""

from __future__ import annotations

import json
import struct
import time
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

PROTOCOL_VERSION = 1
HEADER = struct.Struct(">BB16siiq")
SCHEMA_ID = struct.Struct(">i")
# The header and the schema id that PUT and DELETE both start with: the ingestion hot path reads them in one unpack.
DATA_PREFIX = struct.Struct(">BB16siiqi")
KEY_TYPE_DATA = b"\x00"
KEY_TYPE_CONTROL = b"\x02"
CHUNK_SCHEMA_ID = -10
MANIFEST_SCHEMA_ID = -20
# The write timestamp of batch-pushed records (Venice's too): any nearline write is newer than batch data.
BATCH_WRITE_TIMESTAMP = 0


class MessageType(IntEnum):
    PUT = 0
    DELETE = 1
    CONTROL_MESSAGE = 2


class ControlMessageType(IntEnum):
    START_OF_PUSH = 0
    END_OF_PUSH = 1
    START_OF_SEGMENT = 2
    END_OF_SEGMENT = 3


class ProtocolError(ValueError):
    """A message that cannot be decoded."""


@dataclass(frozen=True, slots=True)
class ProducerMetadata:
    guid: bytes
    segment: int
    sequence: int
    timestamp_ms: int


@dataclass(frozen=True, slots=True)
class Message:
    """A decoded version-topic message. `key` is the serialised user key (empty for control messages)."""

    type: MessageType
    producer: ProducerMetadata
    key: bytes
    schema_id: int = 0
    value: bytes = b""
    control_type: ControlMessageType | None = None
    control: dict[str, Any] = field(default_factory=dict)

    @property
    def is_control(self) -> bool:
        return self.type is MessageType.CONTROL_MESSAGE


def now_ms() -> int:
    return int(time.time() * 1000)


def encode_put(producer: ProducerMetadata, key: bytes, schema_id: int, value: bytes) -> tuple[bytes, bytes]:
    header = HEADER.pack(
        PROTOCOL_VERSION, MessageType.PUT, producer.guid, producer.segment, producer.sequence, producer.timestamp_ms
    )
    return KEY_TYPE_DATA + key, header + SCHEMA_ID.pack(schema_id) + value


def encode_delete(producer: ProducerMetadata, key: bytes, schema_id: int) -> tuple[bytes, bytes]:
    header = HEADER.pack(
        PROTOCOL_VERSION, MessageType.DELETE, producer.guid, producer.segment, producer.sequence, producer.timestamp_ms
    )
    return KEY_TYPE_DATA + key, header + SCHEMA_ID.pack(schema_id)


def encode_control(
    producer: ProducerMetadata, control_type: ControlMessageType, body: dict[str, Any]
) -> tuple[bytes, bytes]:
    header = HEADER.pack(
        PROTOCOL_VERSION,
        MessageType.CONTROL_MESSAGE,
        producer.guid,
        producer.segment,
        producer.sequence,
        producer.timestamp_ms,
    )
    key = KEY_TYPE_CONTROL + producer.guid + struct.pack(">ii", producer.segment, producer.sequence)
    return key, header + bytes([control_type]) + json.dumps(body, separators=(",", ":")).encode()


def decode(kafka_key: bytes, kafka_value: bytes) -> Message:
    if len(kafka_value) < HEADER.size or not kafka_key:
        raise ProtocolError(f"message too short ({len(kafka_value)} bytes) to hold an envelope")
    version, mtype, guid, segment, sequence, ts = HEADER.unpack_from(kafka_value)
    if version != PROTOCOL_VERSION:
        raise ProtocolError(f"unknown envelope protocol version {version}")
    producer = ProducerMetadata(guid, segment, sequence, ts)
    body = memoryview(kafka_value)[HEADER.size :]
    if mtype == MessageType.PUT:
        (schema_id,) = SCHEMA_ID.unpack_from(body)
        return Message(MessageType.PUT, producer, kafka_key[1:], schema_id, bytes(body[SCHEMA_ID.size :]))
    if mtype == MessageType.DELETE:
        (schema_id,) = SCHEMA_ID.unpack_from(body)
        return Message(MessageType.DELETE, producer, kafka_key[1:], schema_id)
    if mtype == MessageType.CONTROL_MESSAGE:
        try:
            control_type = ControlMessageType(body[0])
            payload = json.loads(bytes(body[1:])) if len(body) > 1 else {}
        except (ValueError, IndexError) as exc:
            raise ProtocolError(f"malformed control message: {exc}") from None
        return Message(MessageType.CONTROL_MESSAGE, producer, b"", control_type=control_type, control=payload)
    raise ProtocolError(f"unknown message type {mtype}")


def checksum_bytes(message_key: bytes, kafka_value: bytes) -> bytes:
    """What a segment checksum covers for a data message: the Kafka key and the value after the header, so the
    checksum does not depend on timestamps."""
    return message_key + kafka_value[HEADER.size :]
