"""The pieces of the Da Vinci client that need no broker: seed 002's three-call checkpoint API (two
implementations, two topics at once), the checkpoint's wire form (and every stored one still read), the Avro-to-DuckDB
column mapping, and the DuckDB
partition store (a batch keeps the latest write per key, deletes delete, schema evolution, one transaction with the
checkpoint row)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import duckdb
import pytest

from venice_core.davinci.columns import SchemaNotStorable, key_columns
from venice_core.davinci.duckdb_store import DuckDBPartitionStore, DuckDBRecordTransformer, quote
from venice_core.protocol import serde
from venice_core.protocol.compression import CompressionStrategy, compressor, decompressor
from venice_core.protocol.envelope import SCHEMA_ID
from venice_core.storage.checkpoint import InMemoryCheckpointStore, PubSubTopicPartition
from venice_core.storage.ingestion_checkpoint import (
    CorruptCheckpoint,
    IngestionCheckpoint,
    RealTimeCheckpoint,
    StartOfPush,
)

KEY = "string"
VALUE_V1 = {
    "type": "record",
    "name": "V",
    "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": ["null", "int"], "default": None}],
}
VALUE_V2 = {**VALUE_V1, "fields": [*VALUE_V1["fields"], {"name": "tags", "type": {"type": "array", "items": "string"}}]}
SOP = StartOfPush(sorted=True, chunked=True, compression=CompressionStrategy.ZSTD)
STATE = IngestionCheckpoint(
    next_offset=42,
    div={"abcd": {"segment": 0, "sequence": 7, "checksum": 0, "ended": False}},
    start_of_push=SOP,
    end_of_push=True,
    records=40,
    end_of_push_time_ms=1_764_000_000_000,
)
CHECKPOINT_VECTORS = Path(__file__).parents[1] / "vectors" / "checkpoints_v1.json"


@pytest.fixture
def transformer(tmp_path: Path) -> Any:
    """A DuckDB transformer on a file of its own, open for the test and closed after it."""
    opened = DuckDBRecordTransformer(tmp_path / "c.duckdb").open()
    yield opened
    opened.close()


@pytest.fixture(params=["memory", "duckdb"])
def checkpoint_store(request: pytest.FixtureRequest) -> Any:
    if request.param == "memory":
        return InMemoryCheckpointStore()
    return request.getfixturevalue("transformer").get_storage_metadata_service()


def test_three_calls_keep_several_topics_apart(checkpoint_store: Any) -> None:
    v1, v2 = PubSubTopicPartition("dc-0.users_v1", 0), PubSubTopicPartition("dc-0.users_v2", 0)
    view = PubSubTopicPartition("dc-0.users_v2_cc", 0)
    assert checkpoint_store.get(v1) is None
    checkpoint_store.set(v1, b"state-of-v1")
    checkpoint_store.set(v2, b"state-of-v2")
    checkpoint_store.set(view, b"state-of-the-view")
    checkpoint_store.set(PubSubTopicPartition("dc-0.users_v2", 1), b"partition-1")
    assert checkpoint_store.get(v1) == b"state-of-v1"  # a new version's state never overwrites the old one's
    assert checkpoint_store.get(v2) == b"state-of-v2"
    assert checkpoint_store.get(view) == b"state-of-the-view"
    checkpoint_store.set(v2, b"newer")
    checkpoint_store.delete(v1)
    assert checkpoint_store.get(v1) is None
    assert checkpoint_store.get(v2) == b"newer"
    assert checkpoint_store.get(PubSubTopicPartition("dc-0.users_v2", 1)) == b"partition-1"
    checkpoint_store.delete(v1)  # deleting what is not there is no error


def test_topic_partition_takes_version_and_view_topics_only() -> None:
    assert PubSubTopicPartition("users_v3", 2).version == 3
    assert PubSubTopicPartition("dc-1.users_v3_cc", 0).view == "cc"
    assert PubSubTopicPartition("dc-1.users_v3", 0).view is None
    with pytest.raises(ValueError, match="not a version topic"):
        PubSubTopicPartition("dc-1.users_rt", 0)
    with pytest.raises(ValueError, match="partition"):
        PubSubTopicPartition("users_v1", -1)


def test_state_round_trips_without_the_dictionary_and_corruption_is_detected() -> None:
    control = {"sorted": True, "chunked": True, "compression": "ZSTD", "compression_dictionary": "ZGljdA=="}
    assert StartOfPush.from_control(control) == SOP  # the dictionary is fetched from the region server, never copied
    raw = STATE.encode()
    assert IngestionCheckpoint.decode(raw) == STATE
    real_time = RealTimeCheckpoint({("dc-0.s_rt", 0): 5, ("dc-1.s_rt", 0): 9}, {}, applied=12, ready=True)
    assert IngestionCheckpoint.decode(replace(STATE, real_time=real_time).encode()).real_time == real_time
    leader = replace(STATE, upstream_next=1001)  # a leader's: the source topic's position beside the region's
    assert IngestionCheckpoint.decode(leader.encode()) == leader and STATE.upstream_next is None
    flipped = bytearray(raw)
    flipped[-3] ^= 0x01
    for bad, reason in [
        (bytes(flipped), "checksum"),
        (raw[:5], "shorter than its header"),
        (b"XYZ" + raw[3:], "magic"),
        (raw[:3] + bytes([9]) + raw[4:], "newer"),
    ]:
        with pytest.raises(CorruptCheckpoint, match=reason):
            IngestionCheckpoint.decode(bad)
    for bad, reason in [
        (b'{"records": 3}', "no next offset"),
        (b'{"next_offset": 3, "sop": {"compression": "LZ4"}}', "unknown compression"),
        (b'{"next_offset": 3, "rt": {"dc-0.s_rt": {"zero": 1}}}', "unreadable"),
    ]:
        with pytest.raises(CorruptCheckpoint, match=reason):
            IngestionCheckpoint.decode(bad)


def test_every_checkpoint_written_before_the_typed_state_is_read_and_written_back_the_same() -> None:
    """Checkpoints encoded by the code before `IngestionCheckpoint` (bytes captured from it, `tests/vectors`): each
    decodes to what it holds, and encodes to the same bytes (a partition's store written by one version of the
    platform is read by the next, and the other way round)."""
    guid_a, guid_b = "00112233445566778899aabbccddeeff", "ffeeddccbbaa99887766554433221100"
    batch_sop = StartOfPush(sorted=True, chunked=True, compression=CompressionStrategy.NO_OP)
    end_of_push = IngestionCheckpoint(
        next_offset=1240,
        div={guid_a: {"segment": 0, "sequence": 1235, "checksum": 42, "ended": True}},
        start_of_push=batch_sop,
        end_of_push=True,
        records=1234,
        end_of_push_time_ms=1_764_000_000_000,
    )
    expected = {
        "in the batch phase, START_OF_PUSH's dictionary left out": IngestionCheckpoint(
            next_offset=1234,
            div={guid_a: {"segment": 0, "sequence": 1230, "checksum": 305419896, "ended": False}},
            start_of_push=SOP,
            records=1229,
        ),
        "before START_OF_PUSH": IngestionCheckpoint(
            next_offset=2, div={guid_a: {"segment": 0, "sequence": 0, "checksum": 0, "ended": False}}
        ),
        "END_OF_PUSH committed": end_of_push,
        "in the real-time phase": replace(
            end_of_push,
            div={},
            real_time=RealTimeCheckpoint(
                offsets={("dc-0.s_rt", 0): 17, ("dc-0.s_rt", 10): 3, ("dc-1.s_rt", 0): 5},
                div={guid_b: {"segment": 2, "sequence": 7, "checksum": 0, "ended": False, "partial": True}},
                applied=20,
                ready=True,
            ),
        ),
        "plain JSON, written before the state had a header": IngestionCheckpoint(next_offset=3),
    }
    cases = json.loads(CHECKPOINT_VECTORS.read_text())["cases"]
    assert [case["name"] for case in cases] == list(expected)
    for case in cases:
        raw = bytes.fromhex(case["encoded_hex"])
        checkpoint = IngestionCheckpoint.decode(raw)
        assert checkpoint == expected[case["name"]], case["name"]
        if raw[:1] != b"{":
            assert checkpoint.encode() == raw, case["name"]


def test_columns_from_schemas_and_keys_duckdb_cannot_key_on() -> None:
    assert [(c.name, c.sql_type) for c in key_columns("string")] == [("key", "VARCHAR")]
    record_key = {
        "type": "record",
        "name": "K",
        "fields": [{"name": "id", "type": "long"}, {"name": "r", "type": "string"}],
    }
    assert [(c.name, c.sql_type) for c in key_columns(record_key)] == [("id", "BIGINT"), ("r", "VARCHAR")]
    with pytest.raises(SchemaNotStorable, match="key field 'tags'"):
        key_columns(
            {"type": "record", "name": "K", "fields": [{"name": "tags", "type": {"type": "array", "items": "int"}}]}
        )
    with pytest.raises(SchemaNotStorable, match="key field 'id'"):
        key_columns({"type": "record", "name": "K", "fields": [{"name": "id", "type": ["null", "long"]}]})
    with pytest.raises(SchemaNotStorable, match="key field 'key'"):
        key_columns("double")


def _record(schema: dict[str, Any], value: dict[str, Any], schema_id: int = 1, compress: Any = bytes) -> bytes:
    return SCHEMA_ID.pack(schema_id) + compress(serde.serialize(serde.parse(schema), value))


def _key(key: str) -> bytes:
    return serde.serialize(serde.parse(KEY), key)


def test_duckdb_batches_keep_the_latest_write_per_key_in_one_transaction_with_the_checkpoint(
    transformer: DuckDBRecordTransformer,
) -> None:
    table = transformer.open_version("my store", 1, KEY, {1: VALUE_V1}, bytes)  # a name that needs quoting
    tp = PubSubTopicPartition("my store_v1", 0)
    store = DuckDBPartitionStore(table, tp, lambda _id: VALUE_V2)
    batch = store.new_batch()
    for i in range(5):
        batch.put(_key(f"k{i}"), _record(VALUE_V1, {"name": f"n{i}", "age": i}))
    batch.put(_key("k1"), _record(VALUE_V1, {"name": "second write", "age": None}))  # same key, same batch
    batch.delete(_key("k2"))
    batch.delete(_key("k3"))
    batch.put(_key("k3"), _record(VALUE_V1, {"name": "back", "age": 3}))  # a delete then a put: the put
    store.commit(batch, replace(STATE, next_offset=9))
    rows = transformer.con.execute(f"SELECT * FROM {quote('my store_v1')} ORDER BY key").fetchall()
    assert rows == [("k0", "n0", 0), ("k1", "second write", None), ("k3", "back", 3), ("k4", "n4", 4)]
    assert store.checkpoint().next_offset == 9

    # A record of a newer value schema adds its column; deletes delete.
    batch = store.new_batch()
    batch.put(_key("k0"), _record(VALUE_V2, {"name": "v2", "age": 1, "tags": ["a", "b"]}, schema_id=2))
    batch.delete(_key("k4"))
    store.commit(batch, replace(STATE, next_offset=11))
    rows = transformer.con.execute(f"SELECT key, name, tags FROM {quote('my store_v1')} ORDER BY key").fetchall()
    assert rows == [("k0", "v2", '["a", "b"]'), ("k1", "second write", None), ("k3", "back", None)]

    # A commit that fails leaves data and checkpoint as they were.
    batch = store.new_batch()
    batch.put(_key("k9"), b"\x00\x00\x00\x07garbage")  # an unknown schema id: the commit fails
    with pytest.raises(Exception, match="7"):
        DuckDBPartitionStore(table, tp, lambda schema_id: (_ for _ in ()).throw(KeyError(schema_id))).commit(
            batch, replace(STATE, next_offset=99)
        )
    assert store.checkpoint().next_offset == 11
    assert transformer.con.execute(f"SELECT count(*) FROM {quote('my store_v1')}").fetchone() == (3,)

    # The view follows a swap; the retired table and its checkpoints go.
    table2 = transformer.open_version("my store", 2, KEY, {1: VALUE_V1, 2: VALUE_V2}, bytes)
    assert transformer.swap(table, lambda n: f"my store_v{n}") == 0
    assert transformer.swap(table2, lambda n: f"my store_v{n}") == 1
    assert "my store_v1" not in transformer.tables()
    assert transformer.checkpoints.get(tp) is None
    assert transformer.con.execute(f"SELECT count(*) FROM {quote('my store')}").fetchone() == (0,)


def test_a_value_schema_that_changes_a_column_type_is_refused_naming_the_column(
    transformer: DuckDBRecordTransformer,
) -> None:
    changed = {**VALUE_V1, "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "string"}]}
    with pytest.raises(SchemaNotStorable, match="column 'age' is INTEGER"):
        transformer.open_version("s", 1, KEY, {1: VALUE_V1, 2: changed}, bytes)


def test_a_corrupt_checkpoint_row_re_ingests_from_the_start(
    transformer: DuckDBRecordTransformer, caplog: pytest.LogCaptureFixture
) -> None:
    table = transformer.open_version("s", 1, KEY, {1: VALUE_V1}, bytes)
    tp = PubSubTopicPartition("s_v1", 0)
    transformer.checkpoints.set(tp, STATE.encode()[:-2] + b"xx")
    assert DuckDBPartitionStore(table, tp, lambda _id: VALUE_V1).checkpoint() is None
    assert "corrupt" in caplog.text and "re-ingests from the start" in caplog.text


def test_zstd_with_a_dictionary_round_trips() -> None:
    import zstandard

    samples = [json.dumps({"name": f"user-{i}", "city": "Lisbon" if i % 2 else "Porto"}).encode() for i in range(500)]
    dictionary = zstandard.train_dictionary(2048, samples).as_bytes()
    compress = compressor(CompressionStrategy.ZSTD_WITH_DICT, dictionary)
    packed = compress(samples[3])
    assert decompressor(CompressionStrategy.ZSTD_WITH_DICT, dictionary)(packed) == samples[3]
    with pytest.raises(zstandard.ZstdError):
        decompressor(CompressionStrategy.ZSTD)(packed)  # without the dictionary it cannot be read


def test_a_file_held_by_another_process_is_refused(tmp_path: Path) -> None:
    import subprocess
    import sys

    from venice_core.davinci.duckdb_store import DuckDBFileBusy

    file = tmp_path / "held.duckdb"
    duckdb.connect(str(file)).close()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import duckdb, sys; c = duckdb.connect({str(file)!r}); print('held', flush=True); sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(DuckDBFileBusy, match="held by another process"):
            DuckDBRecordTransformer(file).open()
    finally:
        holder.kill()
        holder.wait()


def _run(pairs: list[tuple[str, dict[str, Any]]], sequence: int = 0) -> Any:
    """The records as a run of PUTs, as ingestion hands it to a batch (`protocol.put_run`)."""
    from venice_core.protocol.div import ProducerMetadata
    from venice_core.protocol.envelope import encode_put
    from venice_core.protocol.put_run import put_run

    encoded = [
        encode_put(ProducerMetadata(b"g" * 16, 0, sequence + i, 0), _key(k), 1, _record(VALUE_V1, v)[SCHEMA_ID.size :])
        for i, (k, v) in enumerate(pairs)
    ]
    run = put_run([k for k, _ in encoded], [v for _, v in encoded], False, lambda *_: True)
    assert run is not None
    return run


def _rows(transformer: DuckDBRecordTransformer, table: str) -> list[tuple[Any, ...]]:
    return transformer.con.execute(f"SELECT * FROM {quote(table)} ORDER BY key").fetchall()


def test_runs_of_puts_are_read_in_place_and_the_latest_write_still_wins(transformer: DuckDBRecordTransformer) -> None:
    table = transformer.open_version("s", 1, KEY, {1: VALUE_V1}, bytes)
    store = DuckDBPartitionStore(table, PubSubTopicPartition("s_v1", 0), lambda _id: VALUE_V1)
    # Two runs in one commit, keys increasing: read where they lie, as they came.
    batch = store.new_batch()
    batch.put_run(_run([("a", {"name": "a1", "age": 1}), ("b", {"name": "b1", "age": None})]))
    batch.put_run(_run([("c", {"name": "c1", "age": 3})], 2))
    store.commit(batch, replace(STATE, end_of_push=False, next_offset=3))
    assert _rows(transformer, "s_v1") == [("a", "a1", 1), ("b", "b1", None), ("c", "c1", 3)]
    assert store.checkpoint().next_offset == 3

    # A key again in a later commit, and twice in one: the latest write per key (the runs go through the dict).
    batch = store.new_batch()
    batch.put_run(_run([("a", {"name": "a2", "age": 2}), ("d", {"name": "d1", "age": 4})], 3))
    batch.put_run(_run([("d", {"name": "d2", "age": 5})], 5))
    store.commit(batch, replace(STATE, end_of_push=False, next_offset=6))
    assert _rows(transformer, "s_v1") == [("a", "a2", 2), ("b", "b1", None), ("c", "c1", 3), ("d", "d2", 5)]

    # A run then a put and a delete of its keys in the same batch: the later writes win.
    batch = store.new_batch()
    batch.put_run(_run([("e", {"name": "e1", "age": 1}), ("f", {"name": "f1", "age": 1})], 6))
    batch.put(_key("e"), _record(VALUE_V1, {"name": "e-put", "age": None}))
    batch.delete(_key("f"))
    store.commit(batch, replace(STATE, end_of_push=False, next_offset=9))
    assert _rows(transformer, "s_v1")[4:] == [("e", "e-put", None)]


def _has_primary_key(transformer: DuckDBRecordTransformer, table: str) -> bool:
    constraints = transformer.con.execute(
        "SELECT constraint_type FROM duckdb_constraints() WHERE table_name = ?", [table]
    ).fetchall()
    return ("PRIMARY KEY",) in constraints


def test_a_sorted_push_is_bulk_loaded_and_keyed_once_at_the_swap(transformer: DuckDBRecordTransformer) -> None:
    table = transformer.open_version("s", 1, KEY, {1: VALUE_V1}, bytes)
    stores = [DuckDBPartitionStore(table, PubSubTopicPartition("s_v1", p), lambda _id: VALUE_V1) for p in (0, 1)]
    for commit, (first, last) in enumerate([(0, 3), (3, 6)]):  # each partition's keys increase across commits
        for p, store in enumerate(stores):
            batch = store.new_batch()
            batch.put_run(_run([(f"p{p}-k{i}", {"name": f"n{i}", "age": i}) for i in range(first, last)], first))
            store.commit(batch, replace(STATE, next_offset=last, end_of_push=commit == 1))
    assert not _has_primary_key(transformer, "s_v1")  # appended, no index maintained row by row
    assert len(_rows(transformer, "s_v1")) == 12
    transformer.swap(table, lambda n: f"s_v{n}")
    assert _has_primary_key(transformer, "s_v1")  # keyed before it serves
    assert transformer.con.execute('SELECT name FROM "s" WHERE key = ?', ["p1-k4"]).fetchall() == [("n4",)]

    # A restarted client opens the keyed table as it is.
    table_again = transformer.open_version("s", 1, KEY, {1: VALUE_V1}, bytes)
    assert table_again.keyed


def test_what_ends_bulk_loading_keys_the_table_and_keeps_the_latest_write(transformer: DuckDBRecordTransformer) -> None:
    # A key that comes again in a later commit (not a sorted partition): keyed first, then upserted.
    table = transformer.open_version("s", 1, KEY, {1: VALUE_V1}, bytes)
    store = DuckDBPartitionStore(table, PubSubTopicPartition("s_v1", 0), lambda _id: VALUE_V1)
    batch = store.new_batch()
    batch.put_run(_run([("a", {"name": "a1", "age": 1}), ("b", {"name": "b1", "age": 1})]))
    store.commit(batch, replace(STATE, end_of_push=False, next_offset=2))
    assert not table.keyed
    batch = store.new_batch()
    batch.put_run(_run([("a", {"name": "a2", "age": 2}), ("c", {"name": "c2", "age": 2})], 2))
    store.commit(batch, replace(STATE, end_of_push=False, next_offset=4))
    assert table.keyed and _has_primary_key(transformer, "s_v1")
    assert _rows(transformer, "s_v1") == [("a", "a2", 2), ("b", "b1", 1), ("c", "c2", 2)]

    # A run then a put of one of its keys in the same batch: the put wins (the run goes into the per-key dict).
    batch = store.new_batch()
    batch.put_run(_run([("d", {"name": "d3", "age": 3}), ("e", {"name": "e3", "age": 3})], 4))
    batch.put(_key("d"), _record(VALUE_V1, {"name": "d-put", "age": None}))
    store.commit(batch, replace(STATE, end_of_push=False, next_offset=7))
    assert _rows(transformer, "s_v1")[3:] == [("d", "d-put", None), ("e", "e3", 3)]

    # A resumed partition does not know the keys committed before it: keyed at once.
    table2 = transformer.open_version("s", 2, KEY, {1: VALUE_V1}, bytes)
    resumed = DuckDBPartitionStore(table2, PubSubTopicPartition("s_v2", 0), lambda _id: VALUE_V1)
    transformer.checkpoints.set(PubSubTopicPartition("s_v2", 0), replace(STATE, end_of_push=False).encode())
    assert resumed.checkpoint() is not None
    batch = resumed.new_batch()
    batch.put_run(_run([("x", {"name": "x", "age": 0})]))
    resumed.commit(batch, replace(STATE, end_of_push=False, next_offset=43))
    assert table2.keyed

    # Not a sorted push: keyed at once.
    table3 = transformer.open_version("s", 3, KEY, {1: VALUE_V1}, bytes)
    unsorted = DuckDBPartitionStore(table3, PubSubTopicPartition("s_v3", 0), lambda _id: VALUE_V1)
    batch = unsorted.new_batch()
    batch.put_run(_run([("x", {"name": "x", "age": 0})]))
    unsorted.commit(batch, replace(STATE, start_of_push=replace(SOP, sorted=False), end_of_push=False))
    assert table3.keyed


def test_a_key_in_two_partitions_of_a_bulk_load_is_kept_once(
    transformer: DuckDBRecordTransformer, caplog: pytest.LogCaptureFixture
) -> None:
    table = transformer.open_version("s", 1, KEY, {1: VALUE_V1}, bytes)
    for p in (0, 1):  # a topic not partitioned by its keys: each partition in order, the key in both
        store = DuckDBPartitionStore(table, PubSubTopicPartition("s_v1", p), lambda _id: VALUE_V1)
        batch = store.new_batch()
        batch.put_run(_run([("same", {"name": f"from p{p}", "age": p}), (f"only-p{p}", {"name": "x", "age": 0})]))
        store.commit(batch, STATE)
    assert not table.keyed
    table.ensure_keyed()
    rows = _rows(transformer, "s_v1")
    assert [r[0] for r in rows] == ["only-p0", "only-p1", "same"] and _has_primary_key(transformer, "s_v1")
    assert "more than one partition" in caplog.text
