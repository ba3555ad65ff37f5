"""What `venice push` and the rollout read without Spark agrees with what the push job reads with it, and the job
registers a schema through the same hooks. On the session's SparkSession; no broker (the job stops before it
writes)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.support.metadata import migrated
from tests.support.platform import SCHEMAS, make_platform_env
from venice_core.controller import stores
from venice_core.controller.stores import SchemaRefused
from venice_core.meta import MetadataStore
from venice_core.meta.models import Version
from venice_core.spark.inputs.input_files import input_format, read_input_schema
from venice_core.spark.jobs import push

ROWS = [
    {"key": "a", "n": 1, "when": "2024-01-02", "nothing": None, "p": {"z": 1, "b": True}, "tags": ["x"]},
    {"key": "b", "n": 2.5, "when": "2024-01-03", "nothing": None, "p": {"z": 2, "b": False}, "tags": []},
]


def _json(folder: Path) -> None:
    (folder / "part-0.json").write_text(json.dumps(ROWS[0]) + "\n")
    (folder / "part-1.json").write_text(json.dumps(ROWS[1]) + "\n")


def _parquet(folder: Path) -> None:
    table = pa.table(
        {
            "key": ["a"],
            "age": pa.array([1], pa.int32()),
            "score": pa.array([1.0], pa.float32()),
            "p": [{"z": 1, "b": True}],
            "tags": [["x"]],
            "m": pa.array([[("k", 1)]], pa.map_(pa.string(), pa.int64())),
            "raw": [b"\x00"],
        }
    )
    pq.write_table(table, folder / "part-0.parquet")


def _avro(folder: Path) -> None:
    schema = {
        "type": "record",
        "name": "R",
        "fields": [
            {"name": "key", "type": "string"},
            {"name": "age", "type": ["null", "int"]},
            {"name": "kind", "type": {"type": "enum", "name": "K", "symbols": ["A", "B"]}},
            {"name": "p", "type": {"type": "record", "name": "P", "fields": [{"name": "z", "type": "long"}]}},
            {"name": "tags", "type": {"type": "array", "items": "string"}},
        ],
    }
    with open(folder / "part-0.avro", "wb") as out:
        fastavro.writer(
            out, fastavro.parse_schema(schema), [{"key": "a", "age": 1, "kind": "A", "p": {"z": 1}, "tags": []}]
        )


@pytest.mark.parametrize("write", [_json, _parquet, _avro], ids=["json", "parquet", "avro"])
def test_local_schema_is_the_one_spark_reads(spark: Any, tmp_path: Path, write: Any) -> None:
    write(tmp_path)
    local = read_input_schema(str(tmp_path))
    read = push.read_input(spark, str(tmp_path), input_format(str(tmp_path)))
    assert local.simpleString() == read.schema.simpleString()


def test_the_job_registers_through_the_schema_registration_hooks(spark: Any, tmp_path: Path) -> None:
    """Input the rollout could not read (here: the step did not run) is matched by the job, whose new schema goes
    through the same hooks: an ABORT refuses the push, and nothing is registered."""
    env = make_platform_env(
        tmp_path / "home", {"venice.store.lifecycle.hooks": "tests.hooks_fixtures.sample_hooks.AnswerFromConfig"}
    )
    meta = MetadataStore(env.config.metadata_db_url)
    migrated(meta)
    try:
        key, value = (SCHEMAS / "user_key.avsc").read_text(), (SCHEMAS / "user_value_v1.avsc").read_text()
        stores.create_store(meta, env.config, "users", key, value, partitions=1, auto_register_schemas=True)
        stores.update_store(meta, env.config, "users", hook_configs={"answer.pre_schema_registration": "ABORT"})
        with meta.session() as session:  # a version in flight (its topics are not needed: the job stops first)
            session.add(Version(store_name="users", number=1, status="STARTED", partition_count=1, compression="NO_OP"))
        pq.write_table(
            pa.Table.from_pylist([{"key": "u1", "name": "Ada", "age": 36, "score": 1.5, "city": "Oslo"}]),
            tmp_path / "in.parquet",
        )
        args = push.parse_args(
            [
                *("--store", "users", "--version", "1", "--topic", "t", "--bootstrap", "127.0.0.1:1"),
                *("--input", str(tmp_path / "in.parquet"), "--push-job-id", "users-job-1", "--result-file", "-"),
            ]
        )
        with pytest.raises(SchemaRefused) as refused:
            push.run_on(spark, env.config, args)
        assert push.failure_reason(refused.value) == (
            "value schema for 'users' refused by a lifecycle hook at pre_schema_registration: a hook answered ABORT"
        )
        assert [i for i, _ in stores.list_value_schemas(meta, "users")] == [1]
    finally:
        meta.dispose()
