"""`davinci.arrow_decode` decodes batches of Avro datums into Arrow columns as fastavro decodes them one by one,
and refuses malformed datums rather than decoding them into something."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from venice_core.davinci import arrow_decode
from venice_core.protocol import serde

SCHEMA = {
    "type": "record",
    "name": "Everything",
    "fields": [
        {"name": "s", "type": "string"},
        {"name": "i", "type": "int"},
        {"name": "l", "type": "long"},
        {"name": "f", "type": "float"},
        {"name": "d", "type": "double"},
        {"name": "b", "type": "boolean"},
        {"name": "raw", "type": "bytes"},
        {"name": "fx", "type": {"type": "fixed", "name": "Four", "size": 4}},
        {"name": "e", "type": {"type": "enum", "name": "Colour", "symbols": ["RED", "GREEN", "BLUE"]}},
        {"name": "ns", "type": ["null", "string"]},
        {"name": "nl", "type": ["long", "null"]},
    ],
}


def _datum(rng: random.Random) -> dict[str, Any]:
    return {
        "s": "".join(rng.choice("aé€😀z") for _ in range(rng.randrange(0, 200))),
        "i": rng.choice([0, -1, 1, 2**31 - 1, -(2**31), rng.randrange(-(2**31), 2**31)]),
        "l": rng.choice([0, -1, 2**63 - 1, -(2**63), rng.randrange(-(2**63), 2**63)]),
        "f": rng.choice([0.5, -1.25, 3.0]),
        "d": rng.uniform(-1e300, 1e300),
        "b": rng.random() < 0.5,
        "raw": rng.randbytes(rng.randrange(0, 40)),
        "fx": rng.randbytes(4),
        "e": rng.choice(["RED", "GREEN", "BLUE"]),
        "ns": None if rng.random() < 0.3 else "x" * rng.randrange(0, 5),
        "nl": None if rng.random() < 0.5 else rng.randrange(-(2**40), 2**40),
    }


def _decode(schema: Any, datums: list[bytes], name: str = "value") -> dict[str, list[Any]]:
    fields = arrow_decode.plan(schema, name)
    assert fields is not None
    columns = arrow_decode.decode(fields, *arrow_decode.spans(datums))
    return {name: array.to_pylist() for name, array in columns.items()}


def test_a_batch_decodes_as_fastavro_does() -> None:
    rng = random.Random(7)
    parsed = serde.parse(SCHEMA)
    datums = [serde.serialize(parsed, _datum(rng)) for _ in range(2000)]
    expected = serde.deserialize_many(json.dumps(SCHEMA), datums)
    got = _decode(SCHEMA, datums)
    for field in SCHEMA["fields"]:
        assert got[field["name"]] == [e[field["name"]] for e in expected], field["name"]


def test_a_primitive_schema_is_one_column_and_a_skip_reads_after_a_prefix() -> None:
    keys = [serde.serialize("string", f"user-{i}") for i in range(10)]
    assert _decode("string", keys, "key") == {"key": [f"user-{i}" for i in range(10)]}
    prefixed = [b"\x00\x00\x00\x01" + k for k in keys]
    buffer, starts, ends = arrow_decode.spans(prefixed, skip=4)
    columns = arrow_decode.decode(arrow_decode.plan("string", "key"), buffer, starts, ends)  # type: ignore[arg-type]
    assert columns["key"].to_pylist() == [f"user-{i}" for i in range(10)]


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "record", "name": "R", "fields": [{"name": "a", "type": {"type": "array", "items": "int"}}]},
        {"type": "record", "name": "R", "fields": [{"name": "u", "type": ["int", "string"]}]},
        {"type": "int", "logicalType": "date"},
        {"type": "map", "values": "string"},
    ],
)
def test_schemas_it_does_not_decode_are_left_to_fastavro(schema: Any) -> None:
    assert arrow_decode.plan(schema, "value") is None


RECORD = {"type": "record", "name": "R", "fields": [{"name": "s", "type": "string"}, {"name": "n", "type": "int"}]}


@pytest.mark.parametrize(
    "datum",
    [
        b"\x06ab",  # the string runs past the datum
        b"\x04ab\x02\x00",  # a byte left after the fields
        b"\x04ab",  # ends before the int
        b"\x03ab\x02",  # a negative length
        b"\x04\xff\xfe\x02",  # not UTF-8
        b"\x00" + b"\xff" * 11,  # a varint longer than ten bytes
        b"\x00\xfe\xff\xff\xff\x1f",  # an int beyond 32 bits
    ],
)
def test_malformed_datums_are_refused(datum: bytes) -> None:
    good = serde.serialize(serde.parse(RECORD), {"s": "ok", "n": 5})
    with pytest.raises(arrow_decode.MalformedDatum):
        _decode(RECORD, [good, datum, good])
