"""The Spark push job: `spark-submit venice_core/spark/jobs/push.py --store S --version N --input PATH ...`.

Reads Avro, Parquet or JSON; checks the input against the store's value schemas (registering a new compatible
one when the store allows it); serialises keys and values with the store's schemas; partitions by the version's
partitioner (md5(key) mod partitionCount by default) and sorts by key bytes; writes each partition through the
protocol writer with a producer GUID derived from the push job id, so a retried task re-sends the same messages and
ingestion skips the ones it has. The caller sends START_OF_PUSH before and END_OF_PUSH after (with the counts this
job reports).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from venice_core.config import ClusterConfig, load_config
from venice_core.controller import stores as store_ops
from venice_core.errors import ComponentError, MetadataStoreError, PushJobError, VeniceError
from venice_core.meta import MetadataStore
from venice_core.protocol.compression import CompressionStrategy
from venice_core.protocol.partitioner import VenicePartitioner
from venice_core.protocol.partitioner_config import load_partitioner
from venice_core.pubsub.control import version_dictionary
from venice_core.spark.inputs.input_files import check_readable, input_format
from venice_core.spark.inputs.input_schema import input_value, match_value_schema
from venice_core.spark.jobs.avro_columns import jvm_serialized
from venice_core.spark.specs.application import application_name
from venice_core.spark.specs.job_result import JobResult
from venice_core.spark.specs.task_specs import PushTaskSpec, WriterSpec
from venice_core.spark.tasks.push_tasks import record_counts, serialize_batches, write_batches, write_sorted

# Fault injection for the retry test; spark-submit passes on only `spark.*` properties.
FAIL_PARTITION_CONF = "spark.venice.push.test.fail.partition"
FAIL_AFTER_CONF = "spark.venice.push.test.fail.after.records"
STALL_FILE_CONF = "spark.venice.push.test.stall.file"


def read_input(spark: Any, path: str, fmt: str) -> Any:
    from pyspark.errors import AnalysisException

    check_readable(path)
    try:
        if fmt == "json":
            return spark.read.option("mode", "FAILFAST").json(path)
        if fmt == "avro":
            from venice_core.spark.tasks.avro_source import AvroDataSource

            spark.dataSource.register(AvroDataSource)
            return spark.read.format(AvroDataSource.name()).option("path", path).load()
        return spark.read.format(fmt).load(path)
    except AnalysisException as exc:
        raise PushJobError(
            f"cannot read {fmt} input {path}: {exc.getMessage() if hasattr(exc, 'getMessage') else exc}"
        ) from None


def run(args: argparse.Namespace) -> JobResult:
    """The job as `spark-submit` runs it: a SparkSession of its own, the cluster config from the environment."""
    return run_in_session("push", run_on, args)


def run_in_session(
    kind: str, job: Callable[[Any, ClusterConfig, argparse.Namespace], JobResult], args: argparse.Namespace
) -> JobResult:
    """A job on a SparkSession of its own (spark-submit's). Not stopped here: spark-submit stops the active
    SparkContext once this process exits, where pyspark's own `stop` then waits up to half a second more for its
    accumulator server's loop (0.7 s of every push)."""
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName(application_name(kind, args.store, args.version)).getOrCreate()
    return job(spark, load_config(), args)


def writer_spec(
    spark: Any,
    args: argparse.Namespace,
    partitions: int,
    compression: CompressionStrategy,
    partitioner: VenicePartitioner,
    dictionary: bytes | None = None,
    producer_config: Mapping[str, str] | None = None,
) -> WriterSpec:
    """Where a job's tasks write (the new version's topic, as its push job, partitioned by the version's
    partitioner, compressed with its compression and a ZSTD_WITH_DICT version's dictionary), with the retry test's
    fault injection from the session's confs."""
    return WriterSpec(
        push_job_id=args.push_job_id,
        version=args.version,
        bootstrap=args.bootstrap,
        topic=args.topic,
        partitions=partitions,
        compression=compression,
        dictionary=dictionary,
        fail_partition=int(spark.conf.get(FAIL_PARTITION_CONF, "-1")),
        fail_after=int(spark.conf.get(FAIL_AFTER_CONF, "0")),
        stall_file=spark.conf.get(STALL_FILE_CONF, ""),
        partitioner=partitioner,
        producer_config=tuple(sorted((producer_config or {}).items())),
    )


def run_on(spark: Any, config: ClusterConfig, args: argparse.Namespace) -> JobResult:
    """The job on a given SparkSession (tests run it in-process on one session; `run` on spark-submit's).
    Returns the per-partition record counts and the value schema id."""
    meta = MetadataStore(config.metadata_db_url)
    try:
        info = store_ops.describe_store(meta, args.store)
        version = info.version(args.version)
        if version is None:
            raise PushJobError(f"store '{args.store}' has no version {args.version}: create it first")
        df = read_input(spark, args.input, input_format(args.input, args.input_format))
        value_columns, value_struct, single_value = input_value(df.schema, args.key_field, args.value_field)
        # Registered already by the rollout's schema_registration step when it could read the input; here for
        # input only Spark reads, through the same hooks.
        schema_id, value_schema = match_value_schema(
            meta, config, info, value_struct, single_value, args.value_field, args.push_job_id
        )
        partitions = version.partition_count
        what = f"store '{args.store}' version {args.version}"
        partitioner = load_partitioner(version.partitioner, info.key_schema, config.partitioner_classes, what)
        dictionary = version_dictionary(version.compression, args.bootstrap, args.topic)
        spec = PushTaskSpec(
            writer=writer_spec(
                spark, args, partitions, version.compression, partitioner, dictionary, config.kafka.producer_config
            ),
            schema_id=schema_id,
            key_schema=info.key_schema,
            value_schema=value_schema,
            key_field=args.key_field,
            value_field=args.value_field,
            single_value=single_value,
            allow_duplicate_key=args.allow_duplicate_key,
        )
        # Serialise in the JVM where Spark writes the schemas exactly (else in Python, on Arrow batches), then
        # shuffle and sort in the JVM: every Kafka partition lands whole in one task, sorted by key bytes (Spark
        # compares binary as unsigned bytes, as RocksDB does).
        serialized = jvm_serialized(df, spec, value_columns)
        if serialized is None:
            serialized = df.select(args.key_field, *value_columns).mapInArrow(
                lambda batches: serialize_batches(batches, spec), "partition int, key binary, value binary"
            )
        written = write_sorted(serialized, partitions, ["key", "value"], lambda batches: write_batches(batches, spec))
        counts = record_counts(written, partitions)
        total = sum(counts.values())
        if total == 0 and not args.allow_empty:
            raise PushJobError(
                f"input {args.input} holds no records (pass --conf allow.empty.input=true to push an empty version)"
            )
        return JobResult(counts, total, schema_id)
    finally:
        meta.dispose()


def _refusal(exc: BaseException) -> str | None:
    """Why the job refused its input or store, if that is what `exc` says: an error about them on the driver, or a
    PushJobError raised on an executor (it reaches the driver inside a Py4J/Spark exception). An unreachable broker
    or metadata store is no refusal: the same push may succeed when tried again."""
    if isinstance(exc, ComponentError | MetadataStoreError):
        return None
    if isinstance(exc, VeniceError):
        return str(exc)
    marker = "PushJobError: "
    text = str(exc)
    if marker not in text:
        return None
    # A refusal raised in SQL (`avro_columns`: raise_error) ends in Spark's SQLSTATE of user errors.
    return text.split(marker, 1)[1].splitlines()[0].removesuffix(" SQLSTATE: P0001")


def failure_reason(exc: BaseException) -> str:
    """The one line that says why the job failed: the refusal if it is one, else the error's first line (Spark
    wraps executor errors in pages of stack trace)."""
    text = str(exc).strip()
    return _refusal(exc) or (text.splitlines()[0] if text else type(exc).__name__)


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


def run_and_report(args: argparse.Namespace, run_job: Callable[[argparse.Namespace], JobResult]) -> int:
    """Run a job (the push's or the repush's) and write its result file: what it wrote, or why it refused its
    input. The exit status."""
    try:
        result = run_job(args)
    except Exception as exc:  # noqa: BLE001 - one line for the caller; Spark wraps executor errors in pages
        refused = _refusal(exc)
        print(f"error: {failure_reason(exc)}", file=sys.stderr)
        if refused:
            JobResult(refused=refused).write(Path(args.result_file))
        return 1
    result.write(Path(args.result_file))
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_and_report(parse_args(sys.argv[1:] if argv is None else argv), run)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
