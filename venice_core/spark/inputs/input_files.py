"""A push input's schema read from local files without a JVM, as the Spark job would see it.

`venice push` checks its input before anything starts (a Spark JVM takes seconds to start), and the rollout
registers an auto-registered schema before the version exists. Parquet: the first file's footer (pyarrow), as
Spark reads one footer without schema merging. JSON lines: pyarrow's reader on the files (at most
`JSON_SAMPLE_BYTES` of them), with Spark's inference rules applied on top. Avro: the first file's writer schema
(fastavro), mapped by `spark.tasks.avro_source` as the job's data source maps it. The result is a Spark `StructType`
(built without a session), so `spark.inputs.input_schema` matches it against the store's value schemas with the job's
own rules.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from venice_core.errors import PushJobError

FORMAT_SUFFIXES = {"parquet": (".parquet",), "avro": (".avro",), "json": (".json", ".jsonl")}
# JSON schemas are inferred from the data: read this much of it (whole files up to the budget, then stop), so a
# check of a large input stays within seconds. A field seen only past the sample is left to the job.
JSON_SAMPLE_BYTES = 64 * 1024 * 1024


def is_remote(path: str) -> bool:
    """Input named by a URL (`hdfs://`, `s3a://`, ...): only the job can read it."""
    return "://" in path


def input_format(path: str, given: str | None = None) -> str:
    """The input's format: as given, else from the files' suffixes."""
    if given:
        return given
    local = Path(path)
    names = [p.name for p in local.rglob("*") if p.is_file()] if local.is_dir() else [local.name]
    for fmt, suffixes in FORMAT_SUFFIXES.items():
        if any(n.endswith(suffixes) for n in names):
            return fmt
    raise PushJobError(
        f"cannot tell the format of input {path}: name files *.parquet, *.avro or *.json, or pass --input-format"
    )


def input_files(path: str, fmt: str) -> list[Path]:
    """The files of an existing local input: the file itself, or a folder's files of the format (hidden and `_`-prefixed
    names skipped, as Spark skips them)."""
    root = Path(path)
    if not root.is_dir():
        return [root]
    files = sorted(
        p
        for p in root.rglob("*")
        if p.is_file() and p.name.endswith(FORMAT_SUFFIXES[fmt]) and not p.name.startswith(("_", "."))
    )
    if not files:
        raise PushJobError(f"input folder {path} holds no {fmt} files")
    return files


def check_readable(path: str) -> None:
    """A local input exists and can be read (PushJobError names the path); a remote one is the job's to check."""
    if is_remote(path):
        return
    root = Path(path)
    if not root.exists():
        raise PushJobError(f"input path {path} does not exist")
    if not os.access(root, os.R_OK) or (root.is_dir() and not os.access(root, os.X_OK)):
        raise PushJobError(f"input path {path} is not readable")


def check_sampleable(path: str, struct: Any | None) -> None:
    """A ZSTD_WITH_DICT push trains its dictionary from its input before the version exists (`input_sample`): input
    whose schema the platform could not read here (`struct` None: a URL, JSON only Spark's inference settles) is a
    PushJobError saying so."""
    if struct is not None:
        return
    what = "a URL only the Spark job reads" if is_remote(path) else "JSON whose schema only Spark's inference settles"
    raise PushJobError(
        f"a ZSTD_WITH_DICT store's push trains its dictionary from the input before the version is created, and "
        f"input {path} is {what}: push a local copy (Parquet, Avro or JSON lines), or set the store's compression "
        "to ZSTD"
    )


def read_input_schema(path: str, fmt: str | None = None) -> Any | None:
    """The Spark StructType the push job would read from `path`, or None for input only the job can read (a URL,
    or JSON whose types only Spark's inference can reconcile). Input that exists but cannot be read as its format
    is a PushJobError naming the file."""
    if is_remote(path):
        return None
    check_readable(path)
    fmt = input_format(path, fmt)
    files = input_files(path, fmt)
    try:
        if fmt == "parquet":
            return _parquet_schema(files[0])
        if fmt == "avro":
            return _avro_schema(files[0])
        return _json_schema(files)
    except OSError as exc:
        raise PushJobError(f"cannot read {fmt} input {path}: {exc.strerror or exc}") from None


def _parquet_schema(file: Path) -> Any:
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark.sql.pandas.types import from_arrow_schema

    try:
        schema = pq.read_schema(file)
    except pa.ArrowInvalid as exc:
        raise PushJobError(f"cannot read parquet input {file}: {exc}") from None
    return _from_arrow(schema, from_arrow_schema)


def _avro_schema(file: Path) -> Any:
    import fastavro
    from pyspark.sql.types import StructType

    from venice_core.spark.tasks.avro_source import spark_type

    with file.open("rb") as handle:
        try:
            writer_schema = fastavro.reader(handle).writer_schema
        except (ValueError, EOFError) as exc:
            raise PushJobError(f"cannot read avro input {file}: {exc or 'not an Avro container file'}") from None
    try:
        data_type, _ = spark_type(writer_schema)
    except (ValueError, KeyError) as exc:
        raise PushJobError(f"cannot read avro input {file}: {exc}") from None
    if not isinstance(data_type, StructType):
        raise PushJobError(f"avro input {file} must hold records")
    return data_type


def _json_schema(files: list[Path]) -> Any | None:
    import io

    import pyarrow as pa
    import pyarrow.json as pj
    from pyspark.sql.pandas.types import from_arrow_schema

    sample, budget = io.BytesIO(), JSON_SAMPLE_BYTES
    for file in files:
        with file.open("rb") as handle:
            chunk = handle.read(budget)
        if len(chunk) == budget:  # cut at the last whole line
            chunk = chunk[: chunk.rfind(b"\n") + 1]
        sample.write(chunk if chunk.endswith(b"\n") or not chunk else chunk + b"\n")
        budget -= len(chunk)
        if budget <= 0:
            break
    sample.seek(0)
    try:
        table = pj.read_json(sample)
    except pa.ArrowInvalid as exc:
        if "changed from" in str(exc):
            return None  # e.g. a number in one record and a string in another: Spark widens, the job decides
        raise PushJobError(f"cannot read json input {files[0].parent if len(files) > 1 else files[0]}: {exc}") from None
    return _from_arrow(
        pa.schema(sorted((_as_spark_json(f) for f in table.schema), key=lambda f: f.name)), from_arrow_schema
    )


def _as_spark_json(field: Any) -> Any:
    """An Arrow field as Spark's JSON inference types it: record fields in name order (the top level's too); a
    field that is null (or an empty array) everywhere is a string; dates and times stay strings (Spark infers no
    timestamps by default)."""
    import pyarrow as pa

    kind = field.type
    if pa.types.is_struct(kind):
        children = sorted((_as_spark_json(kind.field(i)) for i in range(kind.num_fields)), key=lambda f: f.name)
        return field.with_type(pa.struct(children))
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return field.with_type(pa.list_(_as_spark_json(kind.value_field).type))
    if pa.types.is_null(kind) or pa.types.is_temporal(kind):
        return field.with_type(pa.string())
    return field


def _from_arrow(schema: Any, convert: Any) -> Any | None:
    try:
        return convert(schema)
    except TypeError:  # PySparkTypeError: an Arrow type PySpark does not map; the job reads it with Spark's rules
        return None
