"""Avro (de)serialisation of keys and values with fastavro, the one codec the writer, Spark job and client share."""

from __future__ import annotations

import io
from typing import Any

import fastavro


def parse(schema: Any) -> Any:
    """Parse a decoded schema (the JSON value: a dict, a list, or a primitive's name such as "string")."""
    return fastavro.parse_schema(schema)


def serialize(schema: Any, datum: Any) -> bytes:
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, schema, datum)
    return buffer.getvalue()


def deserialize(schema: Any, data: bytes) -> Any:
    return fastavro.schemaless_reader(io.BytesIO(data), schema, None)
