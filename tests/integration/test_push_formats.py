"""Input formats (JSON, Avro, Parquet), field selection, compression and schema auto-registration, end to end: the
push job's code on the session's SparkSession, the real broker and region servers."""

from __future__ import annotations

import json
from pathlib import Path

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq

from tests.support.jobs import InProcessSparkJob
from tests.support.platform import SCHEMAS, PlatformEnv
from tests.support.reads import assert_serves
from venice_core.controller import stores
from venice_core.protocol.compression import CompressionStrategy


def _profiles(n: int) -> dict[str, dict]:
    return {f"u{i:05d}": {"name": f"name {i}", "age": i % 90, "score": i / 4} for i in range(n)}


def test_json_input_with_key_and_value_fields(
    platform_env: PlatformEnv, spark_job: InProcessSparkJob, tmp_path: Path
) -> None:
    store = platform_env.create_user_store("fmt", 2)
    expected = _profiles(500)
    (tmp_path / "in").mkdir()
    with open(tmp_path / "in" / "part-0.json", "w") as out:
        for key, profile in expected.items():
            out.write(json.dumps({"id": key, "profile": profile, "ignored": 1}) + "\n")
    platform_env.push(store, spark_job, tmp_path / "in", key_field="id", value_field="profile")
    assert_serves(platform_env, store, expected)


def test_avro_input(platform_env: PlatformEnv, spark_job: InProcessSparkJob, tmp_path: Path) -> None:
    store = platform_env.create_user_store("fmt", 2)
    expected = _profiles(500)
    schema = json.loads((SCHEMAS / "user_value_v1.avsc").read_text())
    schema["fields"] = [{"name": "key", "type": "string"}, *schema["fields"]]
    (tmp_path / "in").mkdir()
    with open(tmp_path / "in" / "part-0.avro", "wb") as out:
        fastavro.writer(out, fastavro.parse_schema(schema), [{"key": k, **v} for k, v in expected.items()])
    platform_env.push(store, spark_job, tmp_path / "in")
    assert_serves(platform_env, store, expected)


def test_zstd_compression(platform_env: PlatformEnv, spark_job: InProcessSparkJob, tmp_path: Path) -> None:
    store = platform_env.create_user_store("fmt", 2, compression="ZSTD")
    expected = _profiles(800)
    (tmp_path / "in").mkdir()
    pq.write_table(
        pa.Table.from_pylist([{"key": k, **v} for k, v in expected.items()]), tmp_path / "in" / "part-0.parquet"
    )
    platform_env.push(store, spark_job, tmp_path / "in")
    assert stores.describe_store(platform_env.meta, store).versions[-1].compression is CompressionStrategy.ZSTD
    assert_serves(platform_env, store, {k: {**v, "score": float(v["score"])} for k, v in expected.items()})


def test_auto_registration_of_a_compatible_schema(
    platform_env: PlatformEnv, spark_job: InProcessSparkJob, tmp_path: Path
) -> None:
    store = platform_env.create_user_store("fmt", 2, auto_register_schemas=True)
    expected = {k: {**v, "city": f"city {i}"} for i, (k, v) in enumerate(_profiles(300).items())}
    (tmp_path / "in").mkdir()
    pq.write_table(
        pa.Table.from_pylist([{"key": k, **v} for k, v in expected.items()]), tmp_path / "in" / "part-0.parquet"
    )
    said: list[str] = []
    platform_env.push(store, spark_job, tmp_path / "in", progress=said.append)
    assert any("value schema 2" in line for line in said), said
    schemas = stores.describe_store(platform_env.meta, store).value_schemas
    assert [s.id for s in schemas] == [1, 2]
    assert {"name": "city", "type": ["null", "string"], "default": None} in schemas[1].schema["fields"]
    assert_serves(platform_env, store, expected)
