"""A store's Avro schemas as DuckDB columns: the key fields are the primary key, the value fields the other columns.

A record key gives a column per field; any other key one column, `key`. A record value gives a column per field;
any other value one column, `value`. A nullable union (`["null", T]`) unwraps to a nullable column of T. Complex
values (records, arrays, maps, unions of several types) are kept as JSON text: DuckDB reads them with its JSON
functions. A key field must be a primitive DuckDB can key on, never null.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from venice_core.errors import ConfigError

# Avro primitive -> (DuckDB type, Arrow type)
_PRIMITIVES: dict[str, tuple[str, pa.DataType]] = {
    "boolean": ("BOOLEAN", pa.bool_()),
    "int": ("INTEGER", pa.int32()),
    "long": ("BIGINT", pa.int64()),
    "float": ("FLOAT", pa.float32()),
    "double": ("DOUBLE", pa.float64()),
    "string": ("VARCHAR", pa.string()),
    "bytes": ("BLOB", pa.binary()),
    "enum": ("VARCHAR", pa.string()),
    "fixed": ("BLOB", pa.binary()),
}
_KEYABLE = {"int", "long", "string", "bytes", "fixed", "enum", "boolean"}
JSON_TYPE = ("VARCHAR", pa.string())


class SchemaNotStorable(ConfigError):
    """A schema the DuckDB table cannot hold (a key it cannot key on, a column whose type changed)."""


@dataclass(frozen=True)
class Column:
    name: str
    sql_type: str
    arrow_type: pa.DataType
    nullable: bool
    as_json: bool = False  # a complex Avro value, stored as JSON text


def _type_name(schema: Any) -> str:
    if isinstance(schema, dict):
        kind = schema.get("type")
        if isinstance(kind, str) and kind in _PRIMITIVES and kind not in ("enum", "fixed"):
            return kind  # {"type": "string"} and logical types over a primitive
        return kind if isinstance(kind, str) else "union"
    if isinstance(schema, list):
        return "union"
    return str(schema)


def _column(name: str, schema: Any) -> Column:
    nullable = False
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        nullable = len(branches) < len(schema)
        if len(branches) == 1:
            schema = branches[0]
        else:
            return Column(name, *JSON_TYPE, nullable=True, as_json=True)
    kind = _type_name(schema)
    if kind in _PRIMITIVES:
        return Column(name, *_PRIMITIVES[kind], nullable=nullable)
    return Column(name, *JSON_TYPE, nullable=nullable, as_json=True)  # record, array, map


def key_columns(key_schema: Any) -> list[Column]:
    """The primary key's columns; `SchemaNotStorable` for a key DuckDB cannot key on."""
    if isinstance(key_schema, dict) and key_schema.get("type") == "record":
        fields = [(f["name"], f["type"]) for f in key_schema.get("fields", [])]
        if not fields:
            raise SchemaNotStorable("the key schema is a record without fields: DuckDB cannot key on it")
    else:
        fields = [("key", key_schema)]
    columns = []
    for name, schema in fields:
        kind = _type_name(schema)
        if kind not in _KEYABLE:
            described = json.dumps(schema) if not isinstance(schema, str) else schema
            raise SchemaNotStorable(
                f"key field '{name}' of type {described} cannot be a DuckDB primary key column "
                f"(a key field must be one of {', '.join(sorted(_KEYABLE))}, never null)"
            )
        columns.append(Column(name, *_PRIMITIVES[kind], nullable=False))
    return columns


def value_columns(value_schema: Any) -> list[Column]:
    if isinstance(value_schema, dict) and value_schema.get("type") == "record":
        return [_column(f["name"], f["type"]) for f in value_schema.get("fields", [])]
    return [_column("value", value_schema)]


def key_is_record(key_schema: Any) -> bool:
    return isinstance(key_schema, dict) and key_schema.get("type") == "record"


def value_is_record(value_schema: Any) -> bool:
    return isinstance(value_schema, dict) and value_schema.get("type") == "record"


def merge_value_columns(known: list[Column], new: list[Column], keys: list[Column]) -> list[Column]:
    """The columns after a new value schema: new fields are added; a field whose type changed, or that collides
    with a key column, is `SchemaNotStorable` naming it."""
    by_name = {c.name: c for c in known}
    key_names = {c.name for c in keys}
    added = []
    for column in new:
        if column.name in key_names:
            raise SchemaNotStorable(f"value field '{column.name}' has the name of a key column")
        existing = by_name.get(column.name)
        if existing is None:
            added.append(Column(column.name, column.sql_type, column.arrow_type, True, column.as_json))
        elif (existing.sql_type, existing.as_json) != (column.sql_type, column.as_json):
            raise SchemaNotStorable(
                f"column '{column.name}' is {existing.sql_type} in the table, the new value schema makes it "
                f"{column.sql_type}{' (JSON)' if column.as_json else ''}: a DuckDB table cannot change a column's type"
            )
    return known + added
