"""The Spark push job: `spark-submit venice_core/jobs/push.py --store S --version N --input PATH ...`.

Reads Avro, Parquet or JSON; checks the input against the store's value schemas (registering a new compatible
one when the store allows it); serialises keys and values with the store's schemas; partitions by
md5(key) mod partitionCount and sorts by key bytes; writes each partition through the protocol writer with a
producer GUID derived from the push job id, so a retried task re-sends the same messages and ingestion skips the
ones it has. The caller sends START_OF_PUSH before and END_OF_PUSH after (with the counts this job reports).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from venice_core.client import serde
from venice_core.config import load_config
from venice_core.controller import stores as store_ops
from venice_core.errors import VeniceError
from venice_core.jobs.input_schema import match_value_schema
from venice_core.meta import MetadataStore
from venice_core.protocol.compression import CompressionStrategy, compressor
from venice_core.protocol.div import deterministic_guid
from venice_core.protocol.partitioner import partition_for
from venice_core.pubsub.writer import VersionTopicWriter

# Fault injection for the retry test; spark-submit passes on only `spark.*` properties.
FAIL_PARTITION_CONF = "spark.venice.push.test.fail.partition"
FAIL_AFTER_CONF = "spark.venice.push.test.fail.after.records"


class PushJobError(VeniceError):
    pass


def _input_format(path: str, given: str | None) -> str:
    if given:
        return given
    local = Path(path)
    names = [p.name for p in local.rglob("*") if p.is_file()] if local.is_dir() else [local.name]
    for suffix, fmt in ((".parquet", "parquet"), (".avro", "avro"), (".json", "json"), (".jsonl", "json")):
        if any(n.endswith(suffix) for n in names):
            return fmt
    raise PushJobError(
        f"cannot tell the format of input {path}: name files *.parquet, *.avro or *.json, or pass --input-format"
    )


def read_input(spark: Any, path: str, fmt: str) -> Any:
    from pyspark.errors import AnalysisException

    if "://" not in path and not Path(path).exists():
        raise PushJobError(f"input path {path} does not exist")
    try:
        if fmt == "json":
            return spark.read.option("mode", "FAILFAST").json(path)
        return spark.read.format(fmt).load(path)
    except AnalysisException as exc:
        raise PushJobError(
            f"cannot read {fmt} input {path}: {exc.getMessage() if hasattr(exc, 'getMessage') else exc}"
        ) from None


def _write_partition(index: int, rows: Any, spec: dict[str, Any]) -> Any:
    """Runs on an executor: one Kafka partition, already sorted by (key bytes, value bytes)."""
    from pyspark import TaskContext

    context = TaskContext.get()
    fail_after = (
        spec["fail_after"]
        if (context is not None and context.attemptNumber() == 0 and spec["fail_partition"] == index)
        else None
    )
    guid = deterministic_guid(spec["push_job_id"], spec["version"], index)
    writer = VersionTopicWriter(spec["bootstrap"], spec["topic"], spec["partitions"], guid)
    compress = compressor(CompressionStrategy[spec["compression"]])
    count = 0
    previous: tuple[bytes, bytes] | None = None
    writer.start_segment(index)
    for (_, key, value), _unused in rows:
        if previous is not None and previous[0] == key:
            if previous[1] == value or spec["allow_duplicate_key"]:
                continue
            raise PushJobError(
                f"duplicate key with different values in the input (key bytes {key[:32].hex()}); "
                "set allow.duplicate.key=true to keep one of them"
            )
        writer.put(key, compress(value), spec["schema_id"], partition=index)
        previous = (key, value)
        count += 1
        if fail_after is not None and count == fail_after:
            writer.flush()  # half the partition is in Kafka when the task dies
            raise RuntimeError(f"injected failure in partition {index} after {count} records")
    writer.end_segment(index)
    writer.flush()
    yield index, count


def run(args: argparse.Namespace) -> dict[str, Any]:
    from pyspark.sql import SparkSession

    config = load_config()
    meta = MetadataStore(config.metadata_db_url)
    info = store_ops.describe_store(meta, args.store)
    version = next((v for v in info["versions"] if v["number"] == args.version), None)
    if version is None:
        raise PushJobError(f"store '{args.store}' has no version {args.version}: create it first")
    spark = SparkSession.builder.appName(f"venice-push-{args.store}-v{args.version}").getOrCreate()
    conf = spark.sparkContext.getConf()
    try:
        df = read_input(spark, args.input, _input_format(args.input, args.input_format))
        if args.key_field not in df.columns:
            raise PushJobError(f"input has no key field '{args.key_field}' (columns: {', '.join(df.columns)})")
        value_columns = (
            [args.value_field] if args.value_field in df.columns else [c for c in df.columns if c != args.key_field]
        )
        if not value_columns:
            raise PushJobError("input has no value field and no other columns to form the value")
        schema_id, value_schema = match_value_schema(
            meta, info, df.select(*value_columns).schema, args.value_field in df.columns
        )
        key_schema = serde.parse(info["key_schema"])
        parsed_value = serde.parse(value_schema)
        partitions = version["partition_count"]
        single_value = args.value_field in df.columns
        key_field = args.key_field

        def serialize(row: Any) -> tuple[tuple[int, bytes, bytes], None]:
            data = row.asDict(recursive=True)
            key = data.pop(key_field)
            value = data[value_columns[0]] if single_value else data
            try:
                key_bytes = serde.serialize(key_schema, key)
            except (ValueError, TypeError, AttributeError) as exc:
                raise PushJobError(f"key {key!r} does not match the key schema: {exc}") from None
            try:
                value_bytes = serde.serialize(parsed_value, value)
            except (ValueError, TypeError, AttributeError) as exc:
                raise PushJobError(f"value of key {key!r} does not match value schema {schema_id}: {exc}") from None
            return (partition_for(key_bytes, partitions), key_bytes, value_bytes), None

        spec = {
            "push_job_id": args.push_job_id,
            "version": args.version,
            "bootstrap": args.bootstrap,
            "topic": args.topic,
            "partitions": partitions,
            "schema_id": schema_id,
            "compression": version["compression"],
            "allow_duplicate_key": args.allow_duplicate_key,
            "fail_partition": int(conf.get(FAIL_PARTITION_CONF, "-1")),
            "fail_after": int(conf.get(FAIL_AFTER_CONF, "0")),
        }
        keyed = df.select(key_field, *value_columns).rdd.map(serialize)
        sorted_rdd = keyed.repartitionAndSortWithinPartitions(
            numPartitions=partitions, partitionFunc=lambda k: k[0], keyfunc=lambda k: k
        )
        counts = dict(sorted_rdd.mapPartitionsWithIndex(lambda i, rows: _write_partition(i, rows, spec)).collect())
        total = sum(counts.values())
        if total == 0 and not args.allow_empty:
            raise PushJobError(
                f"input {args.input} holds no records (pass --conf allow.empty.input=true to push an empty version)"
            )
        return {
            "record_counts": {str(p): counts.get(p, 0) for p in range(partitions)},
            "schema_id": schema_id,
            "records": total,
        }
    finally:
        spark.stop()
        meta.dispose()


def _unwrap_spark_error(exc: BaseException) -> str:
    """A PushJobError raised on an executor reaches the driver inside a Py4J/Spark exception: find its text."""
    text = str(exc)
    marker = "PushJobError: "
    if marker in text:
        return text.split(marker, 1)[1].splitlines()[0]
    return text.strip().splitlines()[0] if text.strip() else type(exc).__name__


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="venice-push-job", description=__doc__.splitlines()[0])
    parser.add_argument("--store", required=True)
    parser.add_argument("--version", type=int, required=True)
    parser.add_argument("--topic", required=True, help="the source region's version topic")
    parser.add_argument("--bootstrap", required=True, help="the source region's Kafka bootstrap servers")
    parser.add_argument("--input", required=True)
    parser.add_argument("--input-format", choices=["avro", "parquet", "json"])
    parser.add_argument("--key-field", default="key")
    parser.add_argument("--value-field", default="value")
    parser.add_argument("--push-job-id", required=True)
    parser.add_argument("--allow-duplicate-key", action="store_true")
    parser.add_argument("--allow-empty", action="store_true")
    parser.add_argument("--result-file", required=True, help="where to write the per-partition record counts")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        result = run(args)
    except VeniceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # noqa: BLE001 - Spark wraps executor errors; report their first line
        print(f"error: {_unwrap_spark_error(exc)}", file=sys.stderr)
        return 1
    Path(args.result_file).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
