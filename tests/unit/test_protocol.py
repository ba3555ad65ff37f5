from __future__ import annotations

import json
from pathlib import Path

import pytest

from venice_core.errors import InvalidRecord
from venice_core.protocol import chunking, serde
from venice_core.protocol.div import DataIntegrityError, SegmentState, Validator, deterministic_guid
from venice_core.protocol.envelope import (
    HEADER,
    ControlMessageType,
    MessageType,
    checksum_bytes,
    decode,
    encode_control,
    encode_delete,
    encode_put,
)
from venice_core.protocol.partitioner import KeyFieldVenicePartitioner, partition_for

VECTORS = json.loads((Path(__file__).parents[1] / "vectors" / "partitioner.json").read_text())["cases"]


@pytest.mark.parametrize("case", VECTORS, ids=lambda c: f"{c['key']!r}-{c['partition_count']}")
def test_partitioner_vector(case: dict) -> None:
    serialized = serde.serialize(serde.parse(case["key_schema"]), case["key"])
    assert serialized.hex() == case["serialized_hex"]
    assert partition_for(serialized, case["partition_count"]) == case["partition"]


FIELD_TYPES = {
    "s": "string",
    "l": "long",
    "b": "bytes",
    "t": {"type": "long", "logicalType": "timestamp-millis"},
    "d": "double",
    "e": {"type": "enum", "name": "E", "symbols": ["A", "B"]},  # no primitive: fastavro finds the field's bytes
    "r": "E",
}


def test_key_field_partitioner_partitions_as_the_default_does_a_store_keyed_by_the_field() -> None:
    key_schema = {"type": "record", "name": "K", "fields": [{"name": n, "type": t} for n, t in FIELD_TYPES.items()]}
    keys = [
        {
            "s": "é" * n,
            "l": (-1) ** n * 7 ** (n % 22),
            "b": bytes(n * 9),
            "t": 2**n,
            "d": n / 3,
            "e": "A",
            "r": "AB"[n % 2],
        }
        for n in range(40)
    ]
    for name, field_type in FIELD_TYPES.items():
        partitioner = KeyFieldVenicePartitioner({"key.field": name}, key_schema)
        field_schema = serde.parse(FIELD_TYPES["e"] if name == "r" else field_type)
        for key in keys:
            serialized = serde.serialize(serde.parse(key_schema), key)
            assert partitioner.partition(serialized, 7) == partition_for(serde.serialize(field_schema, key[name]), 7)
    with pytest.raises(InvalidRecord, match="do not fit the key schema"):
        KeyFieldVenicePartitioner({"key.field": "d"}, key_schema).partition(serialized[:5], 7)


def test_envelope_round_trip() -> None:
    state = SegmentState(deterministic_guid("job", 1, 0))
    sos = state.start_segment()
    key, value = encode_put(state.next(), b"k1", 3, b"value")
    message = decode(key, value)
    assert (message.type, message.key, message.schema_id, message.value) == (MessageType.PUT, b"k1", 3, b"value")
    assert key[:1] == b"\x00" and message.producer.sequence == 1
    key, value = encode_delete(state.next(), b"k2", 3)
    assert decode(key, value).type is MessageType.DELETE and key[:1] == b"\x00"
    key, value = encode_control(sos, ControlMessageType.START_OF_PUSH, {"sorted": True})
    message = decode(key, value)
    assert key[:1] == b"\x02" and message.control_type is ControlMessageType.START_OF_PUSH
    assert message.control == {"sorted": True}


def _segment(guid: bytes, values: list[bytes], corrupt: bool = False) -> list[tuple]:
    state = SegmentState(guid)
    out = [encode_control(state.start_segment(), ControlMessageType.START_OF_SEGMENT, {})]
    for i, v in enumerate(values):
        encoded = encode_put(state.next(), f"k{i}".encode(), 1, v)
        state.add(checksum_bytes(*encoded))
        out.append(encoded)
    out.append(
        encode_control(
            state.next(), ControlMessageType.END_OF_SEGMENT, {"checksum": state.checksum + (1 if corrupt else 0)}
        )
    )
    return out


def _feed(validator: Validator, messages: list[tuple]) -> list[bool]:
    results = []
    for key, value in messages:
        message = decode(key, value)
        results.append(validator.accept(message, None if message.is_control else checksum_bytes(key, value)))
    return results


def _feed_data(validator: Validator, messages: list[tuple]) -> list[bool]:
    """As the ingestion hot path does: data messages through `accept_data`, control messages through `accept`."""
    results = []
    for key, value in messages:
        message = decode(key, value)
        if message.is_control:
            results.append(validator.accept(message, None))
        else:
            p = message.producer
            body = memoryview(value)[HEADER.size :]
            results.append(validator.accept_data(p.guid, p.segment, p.sequence, key, body))
    return results


def test_div_skips_a_retried_writers_duplicates() -> None:
    messages = _segment(deterministic_guid("job", 1, 0), [b"a", b"b", b"c"])
    validator = Validator()
    assert _feed(validator, messages[:3]) == [True, True, True]
    # The retried task re-sends everything from the start under the same GUID: only the new part is applied.
    assert _feed(Validator(validator.state()), messages) == [False, False, False, True, True]


# Both ways into DIV: `accept` (every message) and `accept_data` (ingestion's hot path for data messages).
FEEDS = pytest.mark.parametrize("feed", [_feed, _feed_data], ids=["accept", "fast"])


@FEEDS
def test_div_gap_is_an_error(feed) -> None:
    messages = _segment(b"g" * 16, [b"a", b"b", b"c"])
    validator = Validator()
    feed(validator, messages[:2])
    with pytest.raises(DataIntegrityError, match="jumped from sequence 1 to 3"):
        feed(validator, messages[3:])


@FEEDS
def test_div_bad_checksum_is_an_error(feed) -> None:
    with pytest.raises(DataIntegrityError, match="checksum"):
        feed(Validator(), _segment(b"c" * 16, [b"a", b"b"], corrupt=True))


def test_div_first_message_must_start_a_segment() -> None:
    with pytest.raises(DataIntegrityError, match="not the start of a segment"):
        _feed(Validator(), _segment(b"d" * 16, [b"a"])[1:])


def test_chunking_round_trip() -> None:
    value = bytes(range(256)) * 50
    parts = list(chunking.split(b"key", value, 7, 1000))
    *chunks, (manifest_key, manifest_bytes) = parts
    assert manifest_key == b"key" and len(chunks) == 13
    manifest = chunking.Manifest.decode(manifest_bytes)
    stored = dict(chunks)
    assert manifest.schema_id == 7 and b"".join(stored[k] for k in manifest.chunk_keys) == value


def test_div_data_fast_path_agrees_with_accept() -> None:
    messages = _segment(deterministic_guid("job", 2, 0), [b"a", b"b", b"c"])
    fast, general = Validator(), Validator()
    assert _feed_data(fast, messages) == _feed(general, messages) == [True] * 5
    assert fast.state() == general.state()
    # A retried writer from a checkpointed state: duplicates are skipped by the fast path too.
    partial = Validator()
    _feed_data(partial, messages[:3])
    assert _feed_data(Validator(partial.state()), messages) == [False, False, False, True, True]


def test_div_data_fast_path_refuses_a_segment_seen_from_its_middle() -> None:
    messages = _segment(b"f" * 16, [b"a", b"b", b"c"])
    with pytest.raises(DataIntegrityError, match="not the start of a segment"):
        _feed_data(Validator(), messages[1:])


class _RecordingProducer:
    """Stands in for confluent-kafka's Producer: this unit checks the bytes the writer produces, not Kafka."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, bytes, bytes]] = []

    def produce(self, _topic: str, value: bytes, key: bytes, partition: int) -> None:
        self.sent.append((partition, key, value))

    def poll(self, _timeout: float) -> int:
        return 0


def test_writer_fast_put_path_sends_what_the_general_encoder_does() -> None:
    """The writer's inlined PUT (no chunking) must equal encode_put and keep the same segment checksum, so that
    ingestion's DIV accepts a segment mixing small and chunked values."""
    from venice_core.pubsub.writer import VersionTopicWriter

    guid = deterministic_guid("job", 1, 0)
    writer = VersionTopicWriter("127.0.0.1:1", "t", 2, guid, max_chunk_bytes=64)
    writer._producer = recorder = _RecordingProducer()
    writer.start_segment(1)
    writer.put(b"small", b"v" * 10, 3, partition=1)
    writer.put(b"large", b"w" * 200, 3, partition=1)  # chunked: the general path
    writer.put(b"small2", b"x", 3, partition=1)
    writer.end_segment(1)

    expected = SegmentState(guid)
    expected.start_segment()
    validator = Validator()
    for partition, key, value in recorder.sent:
        message = decode(key, value)
        assert partition == 1
        if message.is_control:
            assert validator.accept(message, None)
            continue
        meta = expected.next()
        assert message.producer.sequence == meta.sequence and message.producer.guid == guid
        assert value[HEADER.size :] == encode_put(meta, message.key, message.schema_id, message.value)[1][HEADER.size :]
        expected.add(checksum_bytes(key, value))
        assert validator.accept(message, checksum_bytes(key, value))
    assert writer._segments[1].checksum == expected.checksum
    assert [decode(k, v).key for _, k, v in recorder.sent if k[:1] == b"\x00"][0] == b"small"


def test_writer_put_run_sends_what_put_does_record_by_record() -> None:
    """`put_run` (the push job's hot path: many PUTs to a partition at once) sends the very messages and keeps the
    very segment checksum that `put` of each record does, so a segment may mix them."""
    from venice_core.pubsub.writer import VersionTopicWriter

    records = [(f"key-{n:04d}".encode(), bytes([n % 256]) * (n % 50)) for n in range(300)]
    writers = []
    for by_runs in (False, True):
        writer = VersionTopicWriter("127.0.0.1:1", "t", 3, deterministic_guid("job", 1, 2))
        writer._producer = recorder = _RecordingProducer()
        writer.start_segment(2, timestamp_ms=5)
        if by_runs:
            writer.put_run(2, [k for k, _ in records[:120]], [v for _, v in records[:120]], 4)
            writer.put(*records[120], 4, partition=2)
            writer.put_run(2, [], [], 4)
            writer.put_run(2, [k for k, _ in records[121:]], [v for _, v in records[121:]], 4)
        else:
            for key, value in records:
                writer.put(key, value, 4, partition=2)
        writer.end_segment(2, timestamp_ms=6)
        writers.append((writer._segments[2].checksum, recorder.sent))
    assert writers[0] == writers[1]
    assert len(writers[0][1]) == len(records) + 2


def test_writer_put_stored_run_keeps_each_record_s_write_timestamp() -> None:
    """`put_stored_run` (the repush's copy of a plain partition) sends what `put_stored` of each record does, each
    with its own write timestamp."""
    from venice_core.pubsub.writer import VersionTopicWriter

    kafka_keys = [b"\x00" + f"k{n:03d}".encode() for n in range(100)]
    bodies = [(1).to_bytes(4, "big") + bytes([n]) * n for n in range(100)]
    stamps = [0 if n % 3 else 1_700_000_000_000 + n for n in range(100)]
    sent = []
    for by_run in (False, True):
        writer = VersionTopicWriter("127.0.0.1:1", "t", 1, deterministic_guid("job", 2, 0))
        writer._producer = recorder = _RecordingProducer()
        if by_run:
            writer.put_stored_run(0, kafka_keys, bodies, stamps)
        else:
            for key, body, stamp in zip(kafka_keys, bodies, stamps, strict=True):
                writer.put_stored(key, body, 0, stamp)
        sent.append((writer._segments[0].checksum, recorder.sent))
    assert sent[0] == sent[1]
    assert [decode(k, v).producer.timestamp_ms for _, k, v in sent[1][1]] == stamps


def test_batch_get_body_round_trip_and_malformed_responses() -> None:
    from venice_core.protocol import batch_get

    keys = [b"", b"a", b"\x00" * 300]
    assert batch_get.decode_keys(batch_get.encode_keys(keys), limit=3) == keys
    with pytest.raises(OverflowError):
        batch_get.decode_keys(batch_get.encode_keys(keys), limit=2)
    records = [SCHEMA_ID_PREFIX + b"v1", None, SCHEMA_ID_PREFIX + b""]
    assert batch_get.decode_records(batch_get.encode_records(records), 3) == [(7, b"v1"), None, (7, b"")]
    body = batch_get.encode_records(records)
    for broken, count in [(body[:-1], 3), (body, 2), (body, 4), (b"\x00\x00\x00\x02ab", 1)]:
        with pytest.raises(ValueError):
            batch_get.decode_records(broken, count)


SCHEMA_ID_PREFIX = (7).to_bytes(4, "big")


def _opened_segment(
    count: int, guid: bytes = b"r" * 16, timestamp: int = 0
) -> tuple[Validator, list[tuple[bytes, bytes]]]:
    """A validator that has seen a segment's start, and `count` PUTs that follow it."""
    state = SegmentState(guid)
    validator = Validator()
    assert validator.accept(
        decode(*encode_control(state.start_segment(), ControlMessageType.START_OF_SEGMENT, {})), None
    )
    return validator, [encode_put(state.next(timestamp), b"key%03d" % i, 1, b"v%d" % i) for i in range(count)]


def test_a_run_of_puts_is_taken_at_once_with_the_verdicts_and_checksum_of_one_at_a_time() -> None:
    from venice_core.protocol.put_run import put_run

    one_by_one, messages = _opened_segment(50)
    at_once, _ = _opened_segment(50)
    for key, value in messages:
        assert one_by_one.accept(decode(key, value), checksum_bytes(key, value))
    run = put_run([k for k, _ in messages], [v for _, v in messages], keep_stamps=True, continues=at_once.continues)
    assert run is not None and run.keys() == [b"key%03d" % i for i in range(50)]
    assert run.stored() == [v[HEADER.size :] for _, v in messages]
    assert bytes(run.checksummed) == b"".join(k + v[HEADER.size :] for k, v in messages)
    assert at_once.accept_run(run.guid, run.segment, run.first_sequence, run.last_sequence, run.checksummed)
    assert at_once.state() == one_by_one.state()
    # The same run again is not the next: nothing changes, the caller takes it one message at a time.
    assert not at_once.accept_run(run.guid, run.segment, run.first_sequence, run.last_sequence, run.checksummed)
    assert put_run([k for k, _ in messages], [v for _, v in messages], True, at_once.continues) is None
    assert at_once.state() == one_by_one.state()
    # Nor is a run of a producer never seen, of another segment, or of an ended segment.
    assert not at_once.accept_run(b"u" * 16, run.segment, 51, 60, b"")
    assert not at_once.accept_run(run.guid, run.segment + 1, 51, 60, b"")
    state = SegmentState(run.guid)
    state.start_segment()
    state.sequence, checksum = 50, at_once.state()[run.guid.hex()]["checksum"]
    end = encode_control(state.next(), ControlMessageType.END_OF_SEGMENT, {"checksum": checksum})
    assert at_once.accept(decode(*end), None)
    assert not at_once.continues(run.guid, run.segment, 52)
    assert not at_once.accept_run(run.guid, run.segment, 52, 60, b"")


def test_what_is_not_a_run_of_puts() -> None:
    from venice_core.protocol.put_run import put_run

    def run_of(messages: list[tuple[bytes, bytes]], keep_stamps: bool = True) -> object:
        return put_run([k for k, _ in messages], [v for _, v in messages], keep_stamps, lambda *_: True)

    _, puts = _opened_segment(4)
    _, others = _opened_segment(4, guid=b"s" * 16)
    _, stamped = _opened_segment(4, timestamp=1234)
    state = SegmentState(b"r" * 16)
    state.start_segment()
    assert run_of(puts) is not None
    assert run_of(puts[:2] + puts[3:]) is None  # a gap in sequence numbers
    assert run_of(puts[:2] + others[2:]) is None  # two producers
    assert run_of(stamped) is None and run_of(stamped, keep_stamps=False) is not None  # write stamps to keep
    assert run_of([*puts[:3], encode_delete(state.next(), b"k", 1)]) is None
    assert run_of([encode_put(state.next(), chunking.chunk_key(b"k", 0), -10, b"c")]) is None
    assert run_of([encode_control(state.next(), ControlMessageType.END_OF_PUSH, {})]) is None
    assert run_of([(puts[0][0], puts[0][1][:20])]) is None  # too short to hold an envelope
    assert run_of([(b"\x02" + puts[0][0][1:], puts[0][1])]) is None  # not a data key
    assert run_of([]) is None
