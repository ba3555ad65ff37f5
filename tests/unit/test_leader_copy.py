"""The leader's producer of its region's version topic (`ingestion.leader.LocalCopy`), against a recording producer:
what it sends of a consumed batch, whichever path the batch takes."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError

from venice_core.ingestion.leader import LocalCopy, ReplicationError
from venice_core.protocol.div import SegmentState
from venice_core.protocol.envelope import ControlMessageType, encode_control, encode_put


class _Message:
    def __init__(self, key: bytes | None, value: bytes | None, timestamp: int, error: KafkaError | None = None):
        self._key, self._value, self._timestamp, self._error = key, value, timestamp, error

    def error(self) -> KafkaError | None:
        return self._error

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value

    def timestamp(self) -> tuple[int, int]:
        return 1, self._timestamp


class _Producer:
    """Records each produce; refuses the first `full` calls as a full local queue does."""

    def __init__(self, full: int = 0) -> None:
        self.sent: list[tuple[str, bytes, bytes, int, int]] = []
        self.full, self.polls = full, 0

    def produce(self, topic: str, value: bytes, key: bytes, partition: int, timestamp: int = 0) -> None:
        if self.full:
            self.full -= 1
            raise BufferError("queue full")
        self.sent.append((topic, value, key, partition, timestamp))

    def poll(self, _timeout: float) -> int:
        self.polls += 1
        return 0


def _copy(producer: _Producer) -> LocalCopy:
    copy = LocalCopy("127.0.0.1:1", "s_v1", 3, {})  # never connects: its producer is replaced
    copy._producer = producer  # type: ignore[assignment]
    return copy


def _puts(state: SegmentState, count: int, first_stamp: int) -> list[_Message]:
    return [
        _Message(*encode_put(state.next(), f"k{i:04d}".encode(), 1, b"v%d" % i), first_stamp + i) for i in range(count)
    ]


def _sent(messages: list[_Message]) -> list[tuple[str, bytes, bytes, int, int]]:
    """What is produced of each message: its key and value, and the source's timestamp for a control message (data
    is stamped by the producer: 0)."""
    return [
        ("s_v1", m.value() or b"", m.key() or b"", 3, m.timestamp()[1] if (m.key() or b"")[:1] == b"\x02" else 0)
        for m in messages
    ]


def test_a_batch_of_data_is_sent_as_consumed_through_a_full_queue() -> None:
    state = SegmentState(b"g" * 16)
    state.start_segment(0)
    batch = _puts(state, 50, 1_000)
    producer = _Producer(full=3)
    _copy(producer).produce(batch)
    assert producer.sent == _sent(batch)
    assert producer.polls >= 3  # a full queue is drained, then the same record sent


def test_a_batch_with_end_of_push_stops_after_it_keeps_its_timestamp_and_leaves_out_errors() -> None:
    state = SegmentState(b"g" * 16)
    state.start_segment(0)
    before, after = _puts(state, 5, 10), _puts(state, 5, 100)
    end_of_push = _Message(*encode_control(state.next(), ControlMessageType.END_OF_PUSH, {}), 50)
    eof = _Message(None, None, 0, KafkaError(KafkaError._PARTITION_EOF))
    producer = _Producer()
    _copy(producer).produce([*before[:2], eof, *before[2:], end_of_push, *after])
    assert producer.sent == _sent([*before, end_of_push])  # what follows END_OF_PUSH is not the region's to copy


def test_a_failed_delivery_is_a_replication_error() -> None:
    copy = _copy(_Producer())
    copy._on_delivery(KafkaError(KafkaError._MSG_TIMED_OUT), None)  # type: ignore[arg-type]
    with pytest.raises(ReplicationError, match="producing to s_v1\\[3\\] failed"):
        copy.produce([])
