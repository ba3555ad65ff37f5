"""Avro input for Spark as a PySpark Python data source (`spark.read.format("venice_avro")`), read with fastavro.

Spark's own connector (spark-avro) is a separate jar that must match the Spark version exactly; the Python data
source needs nothing beyond the wheel. One input partition per file; the Spark schema is derived from the first
file's writer schema.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import fastavro
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

PRIMITIVES: dict[str, DataType] = {
    "int": IntegerType(),
    "long": LongType(),
    "float": FloatType(),
    "double": DoubleType(),
    "string": StringType(),
    "boolean": BooleanType(),
    "bytes": BinaryType(),
    "enum": StringType(),
    "fixed": BinaryType(),
}


def avro_files(path: str) -> list[str]:
    root = Path(path)
    files = sorted(str(p) for p in root.rglob("*.avro")) if root.is_dir() else [str(root)]
    if not files:
        raise ValueError(f"no *.avro files under {path}")
    return files


def spark_type(avro: Any) -> tuple[DataType, bool]:
    """(Spark type, nullable) of an Avro type."""
    if isinstance(avro, list):
        branches = [b for b in avro if b != "null"]
        if len(branches) != 1:
            raise ValueError(f"Avro unions other than [null, X] are not supported as Spark input: {avro}")
        return spark_type(branches[0])[0], True
    if isinstance(avro, str):
        return PRIMITIVES[avro], False
    kind = avro["type"]
    if kind == "record":
        return StructType([StructField(f["name"], *spark_type(f["type"])) for f in avro["fields"]]), False
    if kind == "array":
        return ArrayType(spark_type(avro["items"])[0]), False
    if kind == "map":
        return MapType(StringType(), spark_type(avro["values"])[0]), False
    if kind in PRIMITIVES:
        return PRIMITIVES[kind], False
    return spark_type(kind)


def _to_row(value: Any, data_type: DataType) -> Any:
    if value is None:
        return None
    if isinstance(data_type, StructType):
        return tuple(_to_row(value.get(f.name), f.dataType) for f in data_type.fields)
    if isinstance(data_type, ArrayType):
        return [_to_row(v, data_type.elementType) for v in value]
    if isinstance(data_type, MapType):
        return {k: _to_row(v, data_type.valueType) for k, v in value.items()}
    return value


class AvroReader(DataSourceReader):
    def __init__(self, path: str, schema: StructType) -> None:
        self.path = path
        self.schema = schema

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(f) for f in avro_files(self.path)]

    def read(self, partition: InputPartition) -> Any:
        with open(partition.value, "rb") as handle:
            for record in fastavro.reader(handle):
                yield _to_row(record, self.schema)


class AvroDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "venice_avro"

    def schema(self) -> StructType:
        with open(avro_files(self.options["path"])[0], "rb") as handle:
            writer_schema = fastavro.reader(handle).writer_schema
        data_type, _ = spark_type(writer_schema)
        if not isinstance(data_type, StructType):
            raise ValueError("Avro input must hold records")
        return data_type

    def reader(self, schema: StructType) -> AvroReader:
        return AvroReader(self.options["path"], schema)
