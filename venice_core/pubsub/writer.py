"""The writer that speaks the version-topic protocol over an idempotent confluent-kafka producer.

One writer is one producer identity (GUID): it numbers its messages per partition and closes each segment with
a checksum. Delivery errors are collected and raised at flush: nothing is silently dropped.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np
from confluent_kafka import KafkaException, Producer

from venice_core.errors import ComponentError
from venice_core.protocol import chunking
from venice_core.protocol.div import SegmentState
from venice_core.protocol.envelope import (
    BATCH_WRITE_TIMESTAMP,
    CHUNK_SCHEMA_ID,
    HEADER,
    KEY_TYPE_DATA,
    MANIFEST_SCHEMA_ID,
    PROTOCOL_VERSION,
    SCHEMA_ID,
    ControlMessageType,
    MessageType,
    checksum_bytes,
    encode_control,
    encode_delete,
    encode_put,
)
from venice_core.protocol.partitioner import DEFAULT_PARTITIONER, VenicePartitioner
from venice_core.pubsub import PRODUCER_CONFIG, client_config, identity_settings

# Where the sequence number lies in the header (protocol version, type, GUID, segment before it), and the header's
# end from there (sequence number, timestamp) as a numpy record: a run's tails built at once.
_SEQUENCE_AT = 1 + 1 + 16 + 4
_SEQUENCE_AND_TIMESTAMP = np.dtype([("sequence", ">i4"), ("timestamp", ">i8")])
assert _SEQUENCE_AT + _SEQUENCE_AND_TIMESTAMP.itemsize == HEADER.size


class VersionTopicWriter:
    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partition_count: int,
        guid: bytes,
        max_chunk_bytes: int = chunking.DEFAULT_MAX_CHUNK_BYTES,
        producer_config: dict[str, Any] | None = None,
        partitioner: VenicePartitioner = DEFAULT_PARTITIONER,  # the topic's version's: where a record given none goes
        identity: Path | None = None,  # the Kafka principal's credentials file (`client_config`)
    ) -> None:
        self.topic = topic
        self.partition_count = partition_count
        self.partitioner = partitioner
        self.max_chunk_bytes = max_chunk_bytes
        self._segments = [SegmentState(guid) for _ in range(partition_count)]
        self._errors: list[str] = []
        self._producer = Producer(
            client_config(
                bootstrap,
                **(identity_settings(identity) if identity is not None else {}),
                **{
                    **PRODUCER_CONFIG,
                    # A delivery callback for failed messages only: one per message would cost the hot path.
                    "delivery.report.only.error": True,
                    "on_delivery": self._on_delivery,
                    **(producer_config or {}),  # the caller's settings over the defaults
                },
            )
        )

    def _on_delivery(self, err: Any, _msg: Any) -> None:
        if err is not None:
            self._errors.append(err.str())

    def _send(self, partition: int, key: bytes, value: bytes) -> None:
        while True:
            try:
                self._producer.produce(self.topic, value=value, key=key, partition=partition)
                return
            except BufferError:  # local queue full: let deliveries drain
                self._producer.poll(0.05)
            except KafkaException as exc:
                raise ComponentError(f"cannot produce to {self.topic}: {exc.args[0].str()}") from None

    def start_segment(self, partition: int, timestamp_ms: int | None = None) -> None:
        """START_OF_SEGMENT, stamped now unless given (a writer whose every message must be deterministic, such
        as a replayable nearline writer, gives one)."""
        meta = self._segments[partition].start_segment(timestamp_ms)
        self._send(partition, *encode_control(meta, ControlMessageType.START_OF_SEGMENT, {"checksum_type": "CRC32"}))

    def end_segment(self, partition: int, final: bool = True, timestamp_ms: int | None = None) -> None:
        state = self._segments[partition]
        meta = state.next(timestamp_ms)
        body = {"checksum": state.checksum, "final": final}
        self._send(partition, *encode_control(meta, ControlMessageType.END_OF_SEGMENT, body))

    def _data(self, partition: int, encoded: tuple[bytes, bytes]) -> None:
        key, value = encoded
        self._segments[partition].add(checksum_bytes(key, value))
        self._send(partition, key, value)

    def put(
        self,
        key: bytes,
        value: bytes,
        schema_id: int,
        partition: int | None = None,
        timestamp_ms: int = BATCH_WRITE_TIMESTAMP,
    ) -> None:
        """One record, stamped with its write timestamp (a batch push's marker unless given)."""
        if partition is None:
            partition = self.partitioner.partition(key, self.partition_count)
        if len(value) <= self.max_chunk_bytes:
            self._put_body(partition, KEY_TYPE_DATA + key, SCHEMA_ID.pack(schema_id) + value, timestamp_ms)
            return
        state = self._segments[partition]
        for part_key, part in chunking.split(key, value, schema_id, self.max_chunk_bytes):
            part_schema = MANIFEST_SCHEMA_ID if part_key == key else CHUNK_SCHEMA_ID
            self._data(partition, encode_put(state.next(timestamp_ms), part_key, part_schema, part))

    def put_stored(self, kafka_key: bytes, body: bytes, partition: int, timestamp_ms: int) -> None:
        """A record as a version topic holds it: the Kafka key (the key-type byte and the key) and the body (schema
        id and the value, compressed as stored), stamped with its write timestamp. A repush copies records so,
        without taking them apart."""
        if len(body) - SCHEMA_ID.size > self.max_chunk_bytes:
            (schema_id,) = SCHEMA_ID.unpack_from(body)
            self.put(kafka_key[1:], body[SCHEMA_ID.size :], schema_id, partition, timestamp_ms)
            return
        self._put_body(partition, kafka_key, body, timestamp_ms)

    def _put_body(self, partition: int, kafka_key: bytes, body: bytes, timestamp_ms: int) -> None:
        """One unchunked PUT: `encode_put` and the segment checksum, inlined (once per record of a push). The CRC of
        the Kafka key followed by the body is the CRC of `checksum_bytes` (CRC32 is incremental)."""
        state = self._segments[partition]
        state.sequence += 1
        header = HEADER.pack(PROTOCOL_VERSION, MessageType.PUT, state.guid, state.segment, state.sequence, timestamp_ms)
        state.checksum = zlib.crc32(body, zlib.crc32(kafka_key, state.checksum))
        self._send(partition, kafka_key, header + body)

    def put_run(self, partition: int, keys: list[bytes], values: list[bytes], schema_id: int) -> None:
        """Many batch-pushed PUTs of one schema to one partition at once (each value at most `max_chunk_bytes`, as
        stored): what `put` does for each (`put_stored_run`)."""
        schema = SCHEMA_ID.pack(schema_id)
        kafka_keys = [KEY_TYPE_DATA + key for key in keys]
        self.put_stored_run(partition, kafka_keys, [schema + value for value in values], BATCH_WRITE_TIMESTAMP)

    def put_stored_run(
        self,
        partition: int,
        kafka_keys: list[bytes],
        bodies: list[bytes],
        timestamps_ms: int | Sequence[int] | np.ndarray,
    ) -> None:
        """Many PUTs to one partition at once, each as a version topic holds it (`put_stored`: the Kafka key and the
        body, at most `max_chunk_bytes` of value), stamped with one write timestamp or one each: what `put_stored`
        does for each, with the per-record work in a few comprehensions, one CRC over the run's checksummed bytes
        and a bare loop of produce calls (the push and repush jobs' hot path)."""
        count = len(kafka_keys)
        if not count:
            return
        state = self._segments[partition]
        first = state.sequence + 1
        state.sequence += count
        state.checksum = zlib.crc32(b"".join(chain.from_iterable(zip(kafka_keys, bodies, strict=True))), state.checksum)
        before = HEADER.pack(PROTOCOL_VERSION, MessageType.PUT, state.guid, state.segment, 0, 0)[:_SEQUENCE_AT]
        tails = np.empty(count, _SEQUENCE_AND_TIMESTAMP)
        tails["sequence"] = np.arange(first, first + count)
        tails["timestamp"] = timestamps_ms
        packed = tails.tobytes()
        size = _SEQUENCE_AND_TIMESTAMP.itemsize
        offsets = range(0, size * count, size)
        messages = [before + packed[at : at + size] + body for at, body in zip(offsets, bodies, strict=True)]
        produce, topic, poll = self._producer.produce, self.topic, self._producer.poll
        try:
            for key, message in zip(kafka_keys, messages, strict=True):
                while True:
                    try:
                        produce(topic, message, key, partition)
                        break
                    except BufferError:  # local queue full: let deliveries drain
                        poll(0.05)
        except KafkaException as exc:
            raise ComponentError(f"cannot produce to {self.topic}: {exc.args[0].str()}") from None

    def delete(
        self, key: bytes, schema_id: int, partition: int | None = None, timestamp_ms: int = BATCH_WRITE_TIMESTAMP
    ) -> None:
        if partition is None:
            partition = self.partitioner.partition(key, self.partition_count)
        self._data(partition, encode_delete(self._segments[partition].next(timestamp_ms), key, schema_id))

    def control(self, partition: int, control_type: ControlMessageType, body: dict[str, Any]) -> None:
        """A control message inside the partition's open segment."""
        self._send(partition, *encode_control(self._segments[partition].next(), control_type, body))

    def broadcast(self, control_type: ControlMessageType, bodies: list[dict[str, Any]]) -> None:
        """A control message to every partition, each in a segment of its own (START_OF_PUSH, END_OF_PUSH)."""
        for partition in range(self.partition_count):
            self.start_segment(partition)
            self.control(partition, control_type, bodies[partition])
            self.end_segment(partition)

    def flush(self, timeout: float = 120.0) -> None:
        remaining = self._producer.flush(timeout)
        if remaining:
            raise ComponentError(f"{remaining} messages to {self.topic} were not delivered within {timeout:.0f}s")
        if self._errors:
            errors, self._errors = self._errors, []
            raise ComponentError(f"{len(errors)} messages to {self.topic} failed: {errors[0]}")
