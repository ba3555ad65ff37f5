"""Push-job runners for tests (`rollout.local.PushJobRunner`): the real push job on the session's in-process
SparkSession (no JVM start per push), and a seeding job that writes given records straight through the protocol
writer (for tests about something other than the job, which only need a version to exist)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from venice_core.config import ClusterConfig
from venice_core.controller import repush_config
from venice_core.controller.stores import describe_store
from venice_core.meta import MetadataStore
from venice_core.protocol import serde
from venice_core.protocol.compression import compressor
from venice_core.protocol.div import deterministic_guid
from venice_core.protocol.partitioner_config import load_partitioner
from venice_core.pubsub.control import version_dictionary
from venice_core.pubsub.writer import VersionTopicWriter
from venice_core.rollout.local import PushFailed
from venice_core.spark.jobs import push, repush
from venice_core.spark.specs.job_result import JobResult
from venice_core.spark.submit import PushJobRequest, job_args, repush_job_args, spark_confs


class InProcessSparkJob:
    """The push job's own code (`spark.jobs.push.run_on`) on a SparkSession that lives for the test session. A failure
    becomes the same one-line `PushFailed` that spark-submit's path raises."""

    def __init__(self, spark: Any) -> None:
        self.spark = spark

    @contextmanager
    def _session_confs(self, confs: dict[str, str]) -> Iterator[None]:
        settings = spark_confs(confs)
        for key, value in settings.items():
            self.spark.conf.set(key, value)
        try:
            yield
        finally:
            for key in settings:
                self.spark.conf.unset(key)

    def __call__(self, config: ClusterConfig, request: PushJobRequest) -> JobResult:
        if repush_config.is_repush(
            request.confs
        ):  # the repush job (`spark.jobs.repush.run_on`), as spark_spec picks it
            job, name, argv = repush, "repush", repush_job_args(config, request)
        else:
            job, name, argv = push, "push", job_args(config, request)
        args = job.parse_args([*argv, "--result-file", "-"])
        with self._session_confs(request.confs):
            try:
                return job.run_on(self.spark, config, args)
            except Exception as exc:  # noqa: BLE001 - as run_spark_job reports it
                raise PushFailed(f"{name} job failed: {push.failure_reason(exc)}") from None


class RecordsJob:
    """Writes `records` (key -> value, as Python values of the store's schemas; or (key, value) pairs, for keys that
    are records) to the version topic with the protocol writer, partitioned by the version's partitioner, each
    partition sorted by key bytes as the Spark job writes it. `input_path` is ignored."""

    def __init__(self, records: dict[Any, Any] | list[tuple[Any, Any]]) -> None:
        self.records = records

    def __call__(self, config: ClusterConfig, request: PushJobRequest) -> JobResult:
        store, number = request.store, request.number
        meta = MetadataStore(config.metadata_db_url)
        try:
            info = describe_store(meta, store)
        finally:
            meta.dispose()
        version = info.version(number)
        assert version is not None
        schema = info.value_schemas[-1]
        key_schema, value_schema = serde.parse(info.key_schema), serde.parse(schema.schema)
        partitions = version.partition_count
        partition_for = load_partitioner(version.partitioner, info.key_schema, config.partitioner_classes).partition
        source = config.region(config.source_region)
        topic = source.version_topic(store, number)
        dictionary = version_dictionary(version.compression, source.kafka_bootstrap, topic)
        compress = compressor(version.compression, dictionary)
        by_partition: dict[int, list[tuple[bytes, bytes]]] = {p: [] for p in range(partitions)}
        for key, value in self.records.items() if isinstance(self.records, dict) else self.records:
            key_bytes = serde.serialize(key_schema, key)
            by_partition[partition_for(key_bytes, partitions)].append((key_bytes, serde.serialize(value_schema, value)))
        for partition, rows in by_partition.items():
            guid = deterministic_guid(request.push_job_id, number, partition)
            writer = VersionTopicWriter(source.kafka_bootstrap, topic, partitions, guid)
            writer.start_segment(partition)
            for key_bytes, value_bytes in sorted(rows):
                writer.put(key_bytes, compress(value_bytes), schema.id, partition=partition)
            writer.end_segment(partition)
            writer.flush()
        counts = {str(p): len(rows) for p, rows in by_partition.items()}
        return JobResult(counts, len(self.records), schema.id)
