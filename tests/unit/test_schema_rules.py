from __future__ import annotations

import json

import pytest

from venice_core.controller.stores import validate_store_name
from venice_core.errors import IncompatibleSchema, InvalidName, SchemaError
from venice_core.schema import canonical_json, check_value_schema_compatible, parse_schema


def record(*fields: dict) -> str:
    return json.dumps({"type": "record", "name": "Value", "fields": list(fields)})


V1 = record({"name": "name", "type": "string"}, {"name": "age", "type": "int"})


def test_adding_a_field_with_default_is_fully_compatible() -> None:
    new = parse_schema(
        record(
            {"name": "name", "type": "string"},
            {"name": "age", "type": "int"},
            {"name": "city", "type": "string", "default": ""},
        )
    )
    check_value_schema_compatible(new, [(1, parse_schema(V1))])


def test_type_promotion_int_to_long_is_not_forward_compatible() -> None:
    new = parse_schema(record({"name": "name", "type": "string"}, {"name": "age", "type": "long"}))
    with pytest.raises(IncompatibleSchema, match="not forward compatible with value schema 1"):
        check_value_schema_compatible(new, [(1, parse_schema(V1))])


def test_adding_a_field_without_default_names_the_rule() -> None:
    new = parse_schema(
        record(
            {"name": "name", "type": "string"},
            {"name": "age", "type": "int"},
            {"name": "city", "type": "string"},
        )
    )
    with pytest.raises(IncompatibleSchema, match="reader_field_missing_default_value"):
        check_value_schema_compatible(new, [(1, parse_schema(V1))])


def test_changing_a_field_type_names_the_rule_and_the_schema_id() -> None:
    new = parse_schema(record({"name": "name", "type": "string"}, {"name": "age", "type": "string"}))
    with pytest.raises(IncompatibleSchema, match=r"value schema 2 .*type_mismatch"):
        check_value_schema_compatible(new, [(2, parse_schema(V1))])


def test_checked_against_every_existing_schema() -> None:
    v2 = record(
        {"name": "name", "type": "string"},
        {"name": "age", "type": "int"},
        {"name": "city", "type": "string", "default": ""},
    )
    # Dropping `age` (no default in v1/v2) breaks forward compatibility with both; the first failure is reported.
    v3 = parse_schema(record({"name": "name", "type": "string"}, {"name": "city", "type": "string", "default": ""}))
    with pytest.raises(IncompatibleSchema, match="value schema 1"):
        check_value_schema_compatible(v3, [(1, parse_schema(V1)), (2, parse_schema(v2))])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "not valid JSON"),
        ('{"type": "recrd", "name": "x"}', "not a valid Avro schema"),
        ('{"type": "record", "name": "x", "fields": [{"name": "a"}]}', "not a valid Avro schema"),
    ],
)
def test_invalid_schemas(text: str, message: str) -> None:
    with pytest.raises(SchemaError, match=message):
        parse_schema(text)


def test_canonical_json_is_stable() -> None:
    a = parse_schema(V1)
    assert canonical_json(parse_schema(canonical_json(a))) == canonical_json(a)


@pytest.mark.parametrize("name", ["users", "Users_2", "a-b", "x" * 128])
def test_valid_store_names(name: str) -> None:
    assert validate_store_name(name) == name


@pytest.mark.parametrize("name", ["", "1users", "bad name", "a.b", "a;drop", "x" * 129, "é", "users\n", "a/../b"])
def test_invalid_store_names(name: str) -> None:
    with pytest.raises(InvalidName):
        validate_store_name(name)
