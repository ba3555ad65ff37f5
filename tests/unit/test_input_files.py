"""A push input's schema read from local files without a JVM, as Spark types, for the three formats; the input's
key and value fields; bad input as one clear error. (That Spark reads the same schema is checked in
tests/integration/test_input_files_spark.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from venice_core.errors import PushJobError
from venice_core.spark.inputs.input_files import read_input_schema
from venice_core.spark.inputs.input_schema import input_value


def _types(struct: StructType) -> dict[str, object]:
    return {f.name: f.dataType for f in struct.fields}


def test_parquet_folder_schema_from_the_footer(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    table = pa.table({"key": ["a"], "age": pa.array([1], pa.int32()), "tags": [["x", "y"]]})
    pq.write_table(table, tmp_path / "in" / "part-0.parquet")
    (tmp_path / "in" / "_SUCCESS").write_text("")  # Spark's marker file: skipped
    struct = read_input_schema(str(tmp_path / "in"))
    assert _types(struct) == {"key": StringType(), "age": IntegerType(), "tags": ArrayType(StringType(), True)}


def test_json_lines_typed_as_spark_infers_them(tmp_path: Path) -> None:
    """Spark's JSON inference: fields in name order, whole numbers long, a number anywhere double, dates and
    all-null fields strings."""
    path = tmp_path / "in.jsonl"
    rows = [
        {"key": "a", "when": "2024-01-02", "nothing": None, "p": {"z": 1, "b": True}, "n": 1},
        {"key": "b", "when": "2024-01-03", "nothing": None, "p": {"z": 2, "b": False}, "n": 2.5},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    struct = read_input_schema(str(path))
    assert _types(struct) == {
        "key": StringType(),
        "when": StringType(),
        "nothing": StringType(),
        "p": StructType([StructField("b", BooleanType(), True), StructField("z", LongType(), True)]),
        "n": DoubleType(),
    }


def test_json_whose_types_only_spark_reconciles_is_left_to_the_job(tmp_path: Path) -> None:
    (tmp_path / "in.json").write_text('{"key": "a", "v": 1}\n{"key": "b", "v": "one"}\n')
    assert read_input_schema(str(tmp_path / "in.json")) is None


def test_avro_schema_from_the_writer_schema(tmp_path: Path) -> None:
    schema = {
        "type": "record",
        "name": "R",
        "fields": [{"name": "key", "type": "string"}, {"name": "score", "type": ["null", "double"]}],
    }
    with open(tmp_path / "in.avro", "wb") as out:
        fastavro.writer(out, fastavro.parse_schema(schema), [{"key": "a", "score": 1.0}])
    assert _types(read_input_schema(str(tmp_path / "in.avro"))) == {"key": StringType(), "score": DoubleType()}


def test_remote_input_is_left_to_the_job() -> None:
    assert read_input_schema("hdfs://namenode/data/users") is None


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("in.parquet", b"not parquet", "cannot read parquet input {path}: Parquet magic bytes not found"),
        ("in.avro", b"not avro", "cannot read avro input {path}: cannot read header - is it an avro file?"),
        ("in.json", b'{"key": "a"\n', "cannot read json input {path}: JSON parse error"),
        ("in.csv", b"key,value\n", "cannot tell the format of input {path}: name files *.parquet"),
    ],
)
def test_unreadable_input_is_one_clear_error(tmp_path: Path, name: str, content: bytes, message: str) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(PushJobError) as raised:
        read_input_schema(str(path))
    assert str(raised.value).startswith(message.format(path=path))
    assert "\n" not in str(raised.value)


def test_missing_input_and_a_folder_without_input_files(tmp_path: Path) -> None:
    with pytest.raises(PushJobError, match=f"^input path {tmp_path / 'nope.parquet'} does not exist$"):
        read_input_schema(str(tmp_path / "nope.parquet"))
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "notes.txt").write_text("")
    with pytest.raises(PushJobError, match="^cannot tell the format of input"):
        read_input_schema(str(tmp_path / "in"))
    with pytest.raises(PushJobError, match=f"^input folder {tmp_path / 'in'} holds no json files$"):
        read_input_schema(str(tmp_path / "in"), "json")


def test_value_is_the_value_field_or_the_other_fields() -> None:
    struct = StructType([StructField("id", StringType()), StructField("a", LongType()), StructField("b", LongType())])
    assert input_value(struct, "id", "a")[0::2] == (["a"], True)
    columns, value_struct, single = input_value(struct, "id", "value")
    assert (columns, single, value_struct.fieldNames()) == (["a", "b"], False, ["a", "b"])
    with pytest.raises(PushJobError, match=r"^input has no key field 'key' \(fields: id, a, b\)$"):
        input_value(struct, "key", "value")
    with pytest.raises(PushJobError, match="^input has no value field 'value' and no other fields"):
        input_value(StructType([StructField("id", StringType())]), "id", "value")
