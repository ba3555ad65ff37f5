"""The Spark repush job: `spark-submit venice_core/spark/jobs/repush.py --store S --version N --source-topic T ...`.

Rebuilds a store from one of its version topics, each key compacted to its latest record, TTL and deletes applied,
values re-compressed if the compression changed, and written with their write timestamps (`spark.tasks.repush_tasks`),
in one of two plans:
- map-only, when the new version has the source's partition count and partitioner (each key stays in its partition)
  and no source partition holds more than `--max-records-per-mapper` records: a task per core takes its share of
  the source partitions, copying each while it reads it for as long as it is plain, else compacting it in memory
  (`repush_tasks._repush_partition`; no shuffle, the records never enter the JVM);
- shuffled, otherwise (a repush is how a store moves to another partition count or partitioner: `venice store
  update`, then a repush): each source partition is cut into offset ranges of at most `--max-records-per-mapper`
  records, read in parallel through the `venice_kafka` source and decoded (and combined per range with
  `--combiner`), then shuffled to the new version's partitions and sorted there through the push job's writing
  end (`spark.tasks.push_tasks.write_sorted`: one writer per Kafka partition, with a GUID derived from the push job id).
Either way the source's offsets are fixed on the driver first, so a retried task reads exactly the same records.
The caller sends START_OF_PUSH before and END_OF_PUSH after, as for a push.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace
from typing import Any

from venice_core.config import ClusterConfig
from venice_core.controller import stores as store_ops
from venice_core.controller.store_description import StoreDescription, VersionDescription
from venice_core.errors import PushJobError
from venice_core.meta import MetadataStore
from venice_core.protocol.compression import CompressionStrategy
from venice_core.protocol.partitioner_config import load_partitioner
from venice_core.pubsub.control import version_dictionary
from venice_core.spark.jobs import push as push_job
from venice_core.spark.specs.job_result import JobResult, RepushStats
from venice_core.spark.specs.task_specs import RepushTaskSpec, SourceRange
from venice_core.spark.tasks.push_tasks import record_counts, write_sorted
from venice_core.spark.tasks.repush_tasks import (
    DECODED_SCHEMA,
    WRITTEN_SCHEMA,
    compact_and_write,
    decode_batches,
    repush_partitions,
)


def run(args: argparse.Namespace) -> JobResult:
    return push_job.run_in_session("repush", run_on, args)


def _version(info: StoreDescription, number: int) -> VersionDescription:
    version = info.version(number)
    if version is None:
        raise PushJobError(f"store '{info.name}' has no version {number}")
    return version


def run_on(spark: Any, config: ClusterConfig, args: argparse.Namespace) -> JobResult:
    """The job on a given SparkSession (tests run it in-process); the per-partition record counts and what the
    compaction left out."""
    from venice_core.spark.tasks.kafka_source import batch_ranges

    meta = MetadataStore(config.metadata_db_url)
    try:
        info = store_ops.describe_store(meta, args.store)
    finally:
        meta.dispose()
    target = _version(info, args.version)
    source = _version(info, args.source_version)
    partitions = target.partition_count
    what = f"store '{args.store}' version {args.version}"
    partitioner = load_partitioner(target.partitioner, info.key_schema, config.partitioner_classes, what)
    spec = RepushTaskSpec(
        # The writer's own compression is none: values arrive compressed for the new version already.
        writer=push_job.writer_spec(
            spark,
            args,
            partitions,
            CompressionStrategy.NO_OP,
            partitioner,
            producer_config=config.kafka.producer_config,
        ),
        source_topic=args.source_topic,
        source_bootstrap=args.source_bootstrap,
        source_compression=source.compression,
        target_compression=target.compression,
        # Each ZSTD_WITH_DICT version's own dictionary: the source's to decompress, the one version creation trained
        # for the new version (from a sample of the source) to compress.
        source_dictionary=version_dictionary(source.compression, args.source_bootstrap, args.source_topic),
        target_dictionary=version_dictionary(target.compression, args.bootstrap, args.topic),
        ttl_start_ms=args.ttl_start_ms,
        # An active-active (hybrid) version keeps its tombstones: a replayed older nearline write must lose to them.
        keep_tombstones=target.hybrid is not None,
        combiner=args.combiner,
    )
    ranges = batch_ranges(
        args.source_bootstrap, args.source_topic, "earliest", args.source_end_offsets or "latest", 0
    )  # fixed here, on the driver: a retried task reads exactly the same records
    same_partitions = source.partition_count == partitions and source.partitioner == target.partitioner
    if same_partitions and all(r.end - r.start <= args.max_records_per_mapper for r in ranges):
        # A task per core, each given its share of the source partitions (spark.range's ids index the ranges), one
        # after the other: each partition is written while it is read, so a core is never idle waiting for a read,
        # and a task's start is paid once per core, not once per partition.
        spec = replace(spec, ranges=tuple(SourceRange(r.partition, r.start, r.end) for r in ranges))
        slots = max(1, min(len(ranges), spark.sparkContext.defaultParallelism))
        tasks = spark.range(0, len(ranges), 1, slots)
        written = tasks.mapInArrow(lambda batches: repush_partitions(batches, spec), WRITTEN_SCHEMA).collect()
        plan = "map-only"
    else:
        written, plan = _shuffled(spark, args, spec, partitions), "shuffled"
    counts = record_counts(written, partitions)
    left_out = {name: sum(getattr(row, name) for row in written) for name in WRITTEN_SCHEMA_STATS}
    return JobResult(counts, sum(counts.values()), repush=RepushStats(args.source_topic, plan, **left_out))


def _shuffled(spark: Any, args: argparse.Namespace, spec: RepushTaskSpec, partitions: int) -> list[Any]:
    """The general repush: offset ranges read in parallel through the venice_kafka source, decoded (and combined)
    per range, shuffled to the new version's partitions and sorted there (`write_sorted`), compacted and written."""
    from venice_core.spark.tasks.kafka_source import KafkaDataSource

    spark.dataSource.register(KafkaDataSource)
    reader = (
        spark.read.format(KafkaDataSource.name())
        .option("topic", args.source_topic)
        .option("bootstrap", args.source_bootstrap)
        .option("maxRecordsPerPartition", str(args.max_records_per_mapper))
    )
    if args.source_end_offsets:  # pinned at version creation: a retried job reads exactly the same records
        reader = reader.option("endingOffsets", args.source_end_offsets)
    source_rows = reader.load()
    decoded = source_rows.select("offset", "key", "value").mapInArrow(
        lambda batches: decode_batches(batches, spec), DECODED_SCHEMA
    )
    return write_sorted(
        decoded, partitions, ["key", "offset"], lambda batches: compact_and_write(batches, spec), WRITTEN_SCHEMA
    )


WRITTEN_SCHEMA_STATS = ("tombstones", "expired", "deleted", "superseded")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="venice-repush-job", description=__doc__.splitlines()[0])
    parser.add_argument("--store", required=True)
    parser.add_argument("--version", type=int, required=True, help="the new version")
    parser.add_argument("--topic", required=True, help="the new version's topic in the source region")
    parser.add_argument("--bootstrap", required=True, help="the source region's Kafka bootstrap servers")
    parser.add_argument("--source-topic", required=True, help="the version topic repushed")
    parser.add_argument("--source-version", type=int, required=True, help="the version it holds")
    parser.add_argument("--source-bootstrap", required=True, help="the Kafka bootstrap servers it is read from")
    parser.add_argument("--max-records-per-mapper", type=int, default=5_000_000)
    parser.add_argument("--combiner", action="store_true")
    parser.add_argument("--ttl-start-ms", type=int, default=None, help="drop records written before this")
    parser.add_argument(
        "--source-end-offsets",
        default=None,
        help='JSON {"<partition>": <end offset>}: read no further (default: the end now)',
    )
    parser.add_argument("--push-job-id", required=True)
    parser.add_argument("--result-file", required=True)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    return push_job.run_and_report(parse_args(sys.argv[1:] if argv is None else argv), run)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
