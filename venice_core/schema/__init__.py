"""Avro key/value schemas: parsing (Apache Avro's parser) and the compatibility rules of value schemas."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import avro.compatibility as compat
import avro.errors
import avro.schema

from venice_core.errors import IncompatibleSchema, SchemaError

Schema = avro.schema.Schema


def parse_schema(text: str, what: str = "schema") -> Schema:
    """Parse Avro schema JSON; any problem is a SchemaError naming `what`."""
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        raise SchemaError(f"{what} is not valid JSON: {exc}") from None
    try:
        return avro.schema.parse(text)
    except (avro.errors.AvroException, TypeError, ValueError) as exc:
        raise SchemaError(f"{what} is not a valid Avro schema: {exc}") from None


def read_schema_file(path: str | Path, what: str = "schema file") -> tuple[str, Schema]:
    """Read and parse a schema file; returns its canonical JSON text and the parsed schema."""
    path = Path(path)
    label = f"{what} {path}"
    try:
        text = path.read_text()
    except OSError as exc:
        raise SchemaError(f"cannot read {label}: {exc.strerror}") from None
    schema = parse_schema(text, label)
    return canonical_json(schema), schema


def canonical_json(schema: Schema) -> str:
    """The form stored in the metadata store: compact JSON as Avro renders it."""
    return json.dumps(schema.to_json(), separators=(",", ":"))


def _explain(result: compat.SchemaCompatibilityResult) -> str:
    problems = []
    for kind, message, location in zip(result.incompatibilities, result.messages, result.locations, strict=False):
        problems.append(f"{kind.value} at {location} ({message})")
    if not problems:
        problems = [f"{kind.value}" for kind in result.incompatibilities]
    return "; ".join(problems)


def check_value_schema_compatible(new: Schema, existing: Iterable[tuple[int, Schema]]) -> None:
    """FULL compatibility, as Venice checks value schemas: the new schema reads data written with every existing
    one (backward), and every existing one reads data written with the new one (forward)."""
    checker = compat.ReaderWriterCompatibilityChecker()  # type: ignore[no-untyped-call]  # avro: __init__ unannotated
    for schema_id, old in existing:
        backward = checker.get_compatibility(reader=new, writer=old)
        if backward.compatibility is not compat.SchemaCompatibilityType.compatible:
            raise IncompatibleSchema(
                f"new value schema is not backward compatible with value schema {schema_id} "
                f"(it cannot read data written with {schema_id}): {_explain(backward)}"
            )
        forward = checker.get_compatibility(reader=old, writer=new)
        if forward.compatibility is not compat.SchemaCompatibilityType.compatible:
            raise IncompatibleSchema(
                f"new value schema is not forward compatible with value schema {schema_id} "
                f"(readers of {schema_id} cannot read data written with it): {_explain(forward)}"
            )
