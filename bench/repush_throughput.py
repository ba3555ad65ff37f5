"""Repush throughput end to end (a store's version topic -> the Spark repush job -> every region serving the new
version) against confluent-kafka alone consuming the same source topic and producing the same bytes to a new
topic, in the same run; and the Spark job alone.

    .venv/bin/python -m bench.repush_throughput [--records 1000000] [--regions dc-0,dc-1,dc-2]

The store's first version is seeded with the protocol writer (no Spark: the records of `generate`, serialised as
`bench.push_throughput` does, written sorted per partition), then rolled out like any push. Also printed: the floor
(`bench.raw_topology`, confluent-kafka alone doing the Kafka work such a repush needs, no platform code, plus Spark's
own start); the last line is `platform / floor: N.NNx` (issue 34's target: at most 1.25x).
"""

from __future__ import annotations

import argparse
import time
import uuid

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from bench import raw_topology
from bench.harness import print_timeline, report, sandbox_platform
from bench.push_throughput import PARTITIONS, bench_store, conf_pair, timed_rollout
from venice_core.config import ClusterConfig
from venice_core.protocol.div import deterministic_guid
from venice_core.protocol.partitioner import partition_for
from venice_core.pubsub import CONSUMER_CONFIG, PRODUCER_CONFIG, admin, client_config
from venice_core.pubsub.writer import VersionTopicWriter
from venice_core.rollout import local
from venice_core.spark.specs.job_result import JobResult
from venice_core.spark.submit import PushJobRequest

SCHEMA_ID = 1


class ProtocolWriterSeed:
    """A push job (`local.PushJobRunner`) that writes serialised records straight to the version topic with
    the protocol writer, each partition sorted by key bytes as the Spark job writes it."""

    def __init__(self, records: list[tuple[bytes, bytes]]) -> None:
        self.records = records

    def __call__(self, config: ClusterConfig, request: PushJobRequest) -> JobResult:
        by_partition: dict[int, list[tuple[bytes, bytes]]] = {p: [] for p in range(PARTITIONS)}
        for key, value in self.records:
            by_partition[partition_for(key, PARTITIONS)].append((key, value))
        source = config.region(config.source_region)
        topic = source.version_topic(request.store, request.number)
        for partition, rows in by_partition.items():
            guid = deterministic_guid(request.push_job_id, request.number, partition)
            writer = VersionTopicWriter(source.kafka_bootstrap, topic, PARTITIONS, guid)
            writer.start_segment(partition)
            for key, value in sorted(rows):
                writer.put(key, value, SCHEMA_ID, partition=partition)
            writer.end_segment(partition)
            writer.flush()
        counts = {str(p): len(rows) for p, rows in by_partition.items()}
        return JobResult(counts, len(self.records), SCHEMA_ID)


def raw_kafka(
    bootstrap: str, source_topic: str, topic: str | None = None, compression: str = "none"
) -> tuple[float, int, float]:
    """Seconds for confluent-kafka to consume the source topic to its end and produce the same bytes (key and value
    as they are, same partition) to a new topic (or `topic`), flushed; the records and MB copied."""
    if topic is None:
        topic = f"raw-repush-{uuid.uuid4().hex[:8]}"
        admin.create_topic(bootstrap, topic, PARTITIONS)
    ends = admin.end_offsets(bootstrap, source_topic, PARTITIONS)
    started = time.perf_counter()
    consumer = Consumer(client_config(bootstrap, **CONSUMER_CONFIG, **{"group.id": "bench-repush"}))
    producer = Producer(client_config(bootstrap, **PRODUCER_CONFIG, **{"compression.type": compression}))
    consumer.assign([TopicPartition(source_topic, p, 0) for p in range(PARTITIONS)])
    copied, payload = 0, 0
    remaining = {p for p in range(PARTITIONS) if ends[p] > 0}
    while remaining:
        for message in consumer.consume(5000, 1.0):
            error = message.error()
            if error is not None:
                if error.code() != KafkaError._PARTITION_EOF:
                    raise RuntimeError(error.str())
                continue
            key, value, partition, offset = message.key(), message.value(), message.partition(), message.offset()
            # A record of the version topic: the protocol writer sends every one with a key and a value.
            assert key is not None and value is not None and partition is not None and offset is not None
            raw_topology.produce(producer, topic, key, value, partition)
            copied += 1
            payload += len(key) + len(value)
            if offset + 1 >= ends[partition]:
                remaining.discard(partition)
        producer.poll(0)
    assert producer.flush(120) == 0
    consumer.close()
    return time.perf_counter() - started, copied, payload / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--regions", default="dc-0,dc-1,dc-2", help="comma-separated region names (first: source)")
    parser.add_argument("--conf", action="append", default=[], type=conf_pair, help="a repush conf KEY=VALUE")
    args = parser.parse_args()
    with sandbox_platform({"regions": args.regions}) as (config, meta, home):
        _data, records = bench_store(config, meta, home, args.records)
        n = len(records)
        started = time.perf_counter()
        local.push(
            config,
            meta,
            "bench",
            "records://seeded-by-the-protocol-writer",
            progress=lambda _line: None,
            run_job=ProtocolWriterSeed(records),
        )
        print(f"  seeded version 1 ({n} records) and rolled it out in {time.perf_counter() - started:.1f}s")
        del records

        job_seconds: list[float] = []

        # Named as `local.PushJobRunner` names them (a protocol's parameters can be passed by name).
        def timed_job(config: ClusterConfig, request: PushJobRequest) -> JobResult:
            began = time.perf_counter()
            try:
                return local.run_spark_job(config, request)
            finally:
                job_seconds.append(time.perf_counter() - began)

        numbers: list[int] = []
        run = timed_rollout(
            config,
            lambda progress: numbers.append(
                local.repush(config, meta, "bench", dict(args.conf), progress=progress, run_job=timed_job)
            ),
        )
        repush_seconds = run.seconds
        assert numbers == [2], numbers

        source = config.region(config.source_region)
        source_topic = source.version_topic("bench", 1)
        compression = config.kafka.producer_compression
        baseline_seconds, copied, payload_mb = raw_kafka(source.kafka_bootstrap, source_topic, None, compression)
        with raw_topology.RawRegions(config, PARTITIONS, copied) as regions:
            floor_seconds = raw_topology.timed(
                regions, lambda: raw_kafka(source.kafka_bootstrap, source_topic, regions.topic, compression)
            )
        spark_seconds = job_seconds[0]
        report(
            f"repush throughput, {n} records ({copied} messages, {payload_mb:.1f} MB in the source topic), "
            f"{len(config.regions)} regions",
            [
                ("seconds", f"{repush_seconds:.1f}", f"{baseline_seconds:.1f}"),
                ("records/s", f"{n / repush_seconds:,.0f}", f"{copied / baseline_seconds:,.0f}"),
                ("MB/s", f"{payload_mb / repush_seconds:.1f}", f"{payload_mb / baseline_seconds:.1f}"),
            ],
        )
        print(f"  the Spark repush job alone: {spark_seconds:.1f}s, {n / spark_seconds:,.0f} records/s")
        run.print_cpu()
        print_timeline("repush", run.started, run.marks)
        count = len(config.regions)
        print(
            f"  the floor, confluent-kafka alone doing the Kafka work of a repush to {count} region(s) (the source "
            f"read once, {count} produces and {count} consumes of the copy, one process per region, at once): "
            f"{floor_seconds:.1f}s, {baseline_seconds / floor_seconds:.2f}x of the baseline (its Kafka work alone)"
        )
        spark_start = raw_topology.spark_start_seconds(config)
        print(f"  Spark's start (a spark-submit of one trivial task per core): {spark_start:.1f}s")
        print(f"  the floor (Kafka work + Spark's start): {floor_seconds + spark_start:.1f}s")
        print(f"  ratio (repush throughput / raw Kafka consume+produce): {baseline_seconds / repush_seconds:.2f}x")
        print(f"  ratio, the Spark job alone: {baseline_seconds / spark_seconds:.2f}x")
        print(f"platform / floor: {repush_seconds / (floor_seconds + spark_start):.2f}x")


if __name__ == "__main__":
    main()
