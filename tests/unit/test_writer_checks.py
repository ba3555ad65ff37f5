"""The nearline writer's checks, all made before anything is produced (no broker: the config's is never
started, so a check that reached Kafka would fail differently)."""

from __future__ import annotations

import json
import uuid

import pytest

from tests.support.topics import InMemoryTopics
from venice_core.controller import stores
from venice_core.errors import ConfigError, InvalidRecord, NotHybridStore, StoreNotFound
from venice_core.meta import MetadataStore
from venice_core.nearline.writer import OnlineWriter, RecordEncoder, WriterTarget, resolve_target, write_timestamp

V1 = {
    "type": "record",
    "name": "Profile",
    "fields": [{"name": "name", "type": "string"}, {"name": "nick", "type": "string", "default": ""}],
}
# FULL-compatible with V1: drops a field that has a default, adds one with a default.
V2 = {
    "type": "record",
    "name": "Profile",
    "fields": [
        {"name": "name", "type": "string"},
        {"name": "age", "type": "int", "default": 0},
        {
            "name": "home",
            "type": ["null", {"type": "record", "name": "Address", "fields": [{"name": "city", "type": "string"}]}],
            "default": None,
        },
    ],
}


@pytest.fixture
def hybrid_store(meta: MetadataStore, config) -> str:
    name = f"wr_{uuid.uuid4().hex[:8]}"
    stores.create_store(meta, config, name, '"string"', json.dumps(V1), partitions=2)
    stores.add_value_schema(meta, config, name, json.dumps(V2))
    stores.update_store(meta, config, name, hybrid_rewind_seconds=60, topics=InMemoryTopics())
    return name


def test_store_and_region_are_checked_first(meta: MetadataStore, config, hybrid_store: str) -> None:
    with pytest.raises(StoreNotFound, match="unknown store 'ghost'"):
        OnlineWriter("ghost", config=config, meta=meta)
    with pytest.raises(ConfigError, match="unknown region 'dc-9' \\(configured: dc-0, dc-1, dc-2\\)"):
        OnlineWriter(hybrid_store, "dc-9", config=config, meta=meta)
    stores.create_store(meta, config, "batch_only", '"string"', json.dumps(V1))
    with pytest.raises(NotHybridStore) as refused:
        OnlineWriter("batch_only", config=config, meta=meta)
    assert str(refused.value) == (
        "store 'batch_only' is batch-only: make it hybrid with venice store update --hybrid-rewind-seconds N"
    )

    target = resolve_target(hybrid_store, config=config, meta=meta)
    assert (target.region, target.topic, target.partition_count) == (
        config.source_region,
        config.region(config.source_region).real_time_topic(hybrid_store),
        2,
    )
    assert [i for i, _ in target.value_schemas] == [1, 2]


def _encoder() -> RecordEncoder:
    return RecordEncoder(WriterTarget("s", "dc-0", "b", "s_rt", 2, "string", ((1, V1), (2, V2))))


def test_values_take_the_newest_schema_they_fit() -> None:
    encoder = _encoder()
    assert encoder.value({"name": "a", "age": 3})[0] == 2
    assert encoder.value({"name": "a", "home": {"city": "Oslo"}})[0] == 2
    assert encoder.value({"name": "a"})[0] == 2  # defaults fill the rest
    assert encoder.value({"name": "a", "nick": "b"})[0] == 1  # V2 has no nick
    assert encoder.delete_schema_id == 2


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"name": "a", "age": "x"}, "field Profile.age is 'x', not int (value schema 2)"),
        ({"name": "a", "age": 2**40}, "field Profile.age is 1099511627776, not int"),
        ({"age": 1}, "field Profile.name is missing (or null), not string"),
        ({"name": "a", "nick": "b", "age": 1}, "Profile.nick is not a field of the schema"),
        ({"name": "a", "home": {"city": "Oslo", "zip": 1}}, "Profile.home.zip is not a field of the schema"),
        ("a string", "it is not Profile"),
    ],
)
def test_a_value_that_fits_no_schema_is_refused_naming_the_field(value: object, message: str) -> None:
    with pytest.raises(InvalidRecord) as refused:
        _encoder().value(value)
    assert str(refused.value).startswith(f"value {value!r} fits no value schema of 's': ")
    assert message in str(refused.value)


@pytest.mark.parametrize("key", [5, None, b"bytes", {"id": "a"}])
def test_a_key_of_the_wrong_type_is_refused(key: object) -> None:
    with pytest.raises(InvalidRecord, match=f"key {key!r} does not match the key schema of 's': it is not string"):
        _encoder().key(key)


@pytest.mark.parametrize("timestamp", [0, -1, True, 1.5, "5", 2**63])
def test_bad_timestamps_are_refused(timestamp: object) -> None:
    with pytest.raises(InvalidRecord, match="a write timestamp must be a whole number of milliseconds"):
        write_timestamp(timestamp)
    assert write_timestamp(1) == 1
    assert write_timestamp(None) > 1_700_000_000_000
