"""Push throughput end to end (input files -> every region serving) against confluent-kafka alone producing and
consuming the same serialised bytes, and against the floor, in the same run. Also where each process's core-seconds
went, and the region servers' resident memory afterwards.

    .venv/bin/python -m bench.push_throughput [--records 1000000] [--regions dc-0,dc-1,dc-2] [--marginal]
                                              [--profile cluster|hosts|security] [--conf K=V] [--set K=V]

The floor: `bench.raw_topology` (confluent-kafka alone doing the Kafka work such a rollout needs, no platform code)
plus Spark's own start (`raw_topology.spark_start_seconds`). The last line is `platform / floor: N.NNx` (issue 34's
target: at most 1.5x, with three regions and with one). `--marginal` pushes 1M records and then --records (4M, say),
and runs the floor at both: the last line is the marginal cost's ratio (target: at most 1.3x), with the push's fixed
cost printed. `--profile cluster` runs the push on the embedded platform and on the cluster profile (without
security) instead, and prints the cluster's overhead (no target on two cores: three brokers, a Spark cluster and nine
region servers share them). `--profile hosts` (root) runs it on the cluster profile and on the hosts profile (the same
processes, each on a host of its own) in the same run, and prints the hosts' ratio (no target). `--profile security`
runs it on the cluster profile without security and with it, and prints the secured one's ratio (issue 45's target:
at most 1.25x). Each pair also runs the floor's Kafka work (`raw_topology`) on both platforms after the push, and
prints its ratio: on the security pair, what TLS costs the Kafka work alone.
"""

from __future__ import annotations

import argparse
import resource
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from bench import raw_topology
from bench.harness import (
    SCHEMAS,
    cpu_seconds,
    print_timeline,
    report,
    rss_mb,
    running_pid,
    sandbox_platform,
    tree_cpu_seconds,
)
from scripts.generate_dataset import generate
from venice_core.config import ClusterConfig
from venice_core.controller import stores
from venice_core.embedded import kafka, platform, servers
from venice_core.embedded.process import ManagedProcess
from venice_core.meta import MetadataStore
from venice_core.protocol import serde
from venice_core.protocol.partitioner import partition_for
from venice_core.pubsub import CONSUMER_CONFIG, PRODUCER_CONFIG, admin, client_config
from venice_core.rollout.local import push

PARTITIONS = 4


def serialised_records(path: Path, key_schema: Any, value_schema: Any) -> list[tuple[bytes, bytes]]:
    rows = pq.read_table(path).to_pylist()
    return [(serde.serialize(key_schema, r.pop("key")), serde.serialize(value_schema, r)) for r in rows]


def raw_kafka(bootstrap: str, records: list[tuple[bytes, bytes]]) -> float:
    """Seconds for confluent-kafka to produce the records (same producer settings) and consume them back."""
    topic = f"raw-{uuid.uuid4().hex[:8]}"
    admin.create_topic(bootstrap, topic, PARTITIONS)
    started = time.perf_counter()
    produce_records(bootstrap, topic, records)
    consumer = Consumer(
        client_config(bootstrap, **CONSUMER_CONFIG, **{"group.id": "bench", "enable.partition.eof": True})
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    received, eof = 0, 0
    while eof < PARTITIONS:
        for message in consumer.consume(5000, 1.0):
            error = message.error()
            if error is not None:
                eof += error.code() == KafkaError._PARTITION_EOF
            else:
                received += 1
    consumer.close()
    assert received == len(records), (received, len(records))
    return time.perf_counter() - started


def produce_records(bootstrap: str, topic: str, records: list[tuple[bytes, bytes]], compression: str = "none") -> None:
    """The records to the topic, partitioned as the push partitions them, flushed (the push's producer settings)."""
    producer = Producer(client_config(bootstrap, **PRODUCER_CONFIG, **{"compression.type": compression}))
    for key, value in records:
        raw_topology.produce(producer, topic, key, value, partition_for(key, PARTITIONS))
    assert producer.flush(120) == 0


def conf_pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"a push conf is KEY=VALUE, got {text!r}")
    return key, value


def bench_store(
    config: ClusterConfig, meta: MetadataStore, home: Path, count: int
) -> tuple[Path, list[tuple[bytes, bytes]]]:
    """Create the store `bench` (the user schemas, PARTITIONS partitions) and generate `count` records for it: the
    input files, and the records as the push job serialises them."""
    data = generate(home / "data", count, files=4)
    key_text = (SCHEMAS / "user_key.avsc").read_text()
    value_text = (SCHEMAS / "user_value_v1.avsc").read_text()
    stores.create_store(meta, config, "bench", key_text, value_text, partitions=PARTITIONS)
    info = stores.describe_store(meta, "bench")
    return data, serialised_records(data, serde.parse(info.key_schema), serde.parse(info.value_schemas[0].schema))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--regions", default="dc-0,dc-1,dc-2", help="comma-separated region names (first: source)")
    parser.add_argument(
        "--conf", action="append", default=[], type=conf_pair, help="a push conf KEY=VALUE (repeatable)"
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        type=conf_pair,
        help="a platform config KEY=VALUE over the sandbox's (repeatable), e.g. kafka.embedded.jvm.options=...",
    )
    parser.add_argument(
        "--profile",
        choices=["embedded", *PROFILE_PAIRS],
        default="embedded",
        help="cluster: the same push on the embedded platform and on the cluster profile, one after the other, and "
        "the cluster's overhead as a ratio; hosts: on the cluster profile and on the hosts profile (root); "
        "security: on the cluster profile without security and with it (issue 45's target: at most 1.25x)",
    )
    parser.add_argument(
        "--marginal",
        action="store_true",
        help="push and floor at 1M records and at --records (4M, say): the marginal cost of the extra records, "
        "the push's fixed cost, and the marginal ratio",
    )
    args = parser.parse_args()
    if args.marginal and args.records <= MARGINAL_BASE:
        parser.error(f"--marginal needs --records above {MARGINAL_BASE:,} (4000000, say)")
    if args.profile in PROFILE_PAIRS:
        compare_profiles(args.records, dict(args.conf), PROFILE_PAIRS[args.profile])
        return
    with sandbox_platform({"regions": args.regions, **dict(args.set)}) as (config, meta, home):
        data, records = bench_store(config, meta, home, args.records)
        # One raw round first, not counted: the broker's JIT warms up on it. The push ran on a cold broker and the
        # baseline after it on a warm one (a first raw round took 6.0 s and 2.7 broker CPU-s, the next 5.1 and 1.6).
        print(f"  warm-up (not counted): a raw round in {raw_kafka(config.kafka.bootstrap, records):.1f}s")
        if args.marginal:
            marginal(config, meta, home, data, records, dict(args.conf))
        else:
            one_size(config, meta, data, records, dict(args.conf))


def timed_push(config: ClusterConfig, meta: MetadataStore, data: Path, confs: dict[str, str]) -> PushRun:
    """One push of `data` to the store `bench` (`venice push --local`'s steps)."""
    return timed_rollout(config, lambda said: push(config, meta, "bench", str(data), confs=confs, progress=said))


def spark_submit_reaped() -> None:
    """Wait until the spark-submit a push went on without (`rollout.local`: it stops in a reaper thread) is reaped:
    only then do this process's children's figures hold its CPU (they read 0.0 in runs that measured first)."""
    for thread in threading.enumerate():
        if thread.name == "spark-submit-reaper":
            thread.join(timeout=120)


def timed_rollout(config: ClusterConfig, rollout: Callable[[Callable[[str], None]], object]) -> PushRun:
    """A push or repush run in this process (`rollout(progress)`), with the core-seconds of each process of the
    platform and its own (the spark-submit it waits for among them), and its progress lines."""
    processes = {"kafka broker": running_pid(kafka.process(config))}
    processes.update({f"region server {r}": running_pid(servers.process(config, r)) for r in config.region_names})
    cpu_before = {name: cpu_seconds(pid) for name, pid in processes.items()}
    children_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    own_before = resource.getrusage(resource.RUSAGE_SELF)
    marks: list[tuple[float, str]] = []
    started = time.perf_counter()
    rollout(lambda line: marks.append((time.perf_counter(), line)))
    seconds = time.perf_counter() - started
    spark_submit_reaped()
    children, own = resource.getrusage(resource.RUSAGE_CHILDREN), resource.getrusage(resource.RUSAGE_SELF)
    cpu = {name: cpu_seconds(pid) - cpu_before[name] for name, pid in processes.items()}
    cpu["spark-submit (JVM + Python workers)"] = (
        children.ru_utime + children.ru_stime - children_before.ru_utime - children_before.ru_stime
    )
    cpu["push driver (this process)"] = own.ru_utime + own.ru_stime - own_before.ru_utime - own_before.ru_stime
    return PushRun(seconds, cpu, started, marks)


@dataclass
class PushRun:
    seconds: float
    cpu: dict[str, float]
    started: float
    marks: list[tuple[float, str]]

    def print_cpu(self) -> None:
        print(f"  where its CPU went ({sum(self.cpu.values()):.0f} core-seconds in {self.seconds:.1f}s):")
        for name, seconds in sorted(self.cpu.items(), key=lambda item: -item[1]):
            print(f"    {seconds:6.1f}s  {name}")


def floor_seconds(config: ClusterConfig, records: list[tuple[bytes, bytes]]) -> float:
    """`raw_topology`: confluent-kafka alone doing the rollout's Kafka work for `records`."""
    with raw_topology.RawRegions(config, PARTITIONS, len(records)) as regions:
        compression = config.kafka.producer_compression
        return raw_topology.timed(
            regions, lambda: produce_records(regions.bootstrap, regions.topic, records, compression)
        )


def one_size(
    config: ClusterConfig, meta: MetadataStore, data: Path, records: list[tuple[bytes, bytes]], confs: dict[str, str]
) -> None:
    """The push of `data` against the raw baseline and the floor; the ratio to the floor last."""
    run = timed_push(config, meta, data, confs)
    baseline_seconds = raw_kafka(config.kafka.bootstrap, records)
    floor = floor_seconds(config, records)
    n, payload_mb = len(records), sum(len(k) + len(v) for k, v in records) / 1e6
    report(
        f"push throughput, {n} records, {payload_mb:.1f} MB serialised, {len(config.regions)} regions",
        [
            ("seconds", f"{run.seconds:.1f}", f"{baseline_seconds:.1f}"),
            ("records/s", f"{n / run.seconds:,.0f}", f"{n / baseline_seconds:,.0f}"),
            ("MB/s", f"{payload_mb / run.seconds:.1f}", f"{payload_mb / baseline_seconds:.1f}"),
        ],
    )
    run.print_cpu()
    print_timeline("push", run.started, run.marks)
    for region in config.region_names:
        pid = running_pid(servers.process(config, region))
        print(f"  region server {region} resident memory: {rss_mb(pid):.0f} MB")
    print(
        f"  the floor's Kafka work, confluent-kafka alone doing a rollout to {len(config.regions)} region(s) "
        f"({len(config.regions)} produces and {len(config.regions)} consumes, one process per region, at once): "
        f"{floor:.1f}s ({baseline_seconds / floor:.2f}x of the baseline's throughput)"
    )
    spark_start = raw_topology.spark_start_seconds(config)
    print(f"  Spark's start (a spark-submit of one trivial task per core): {spark_start:.1f}s")
    print(f"  the floor (Kafka work + Spark's start): {floor + spark_start:.1f}s")
    print(f"  ratio (project throughput / raw Kafka throughput): {baseline_seconds / run.seconds:.2f}x")
    print(f"platform / floor: {run.seconds / (floor + spark_start):.2f}x")


def marginal(
    config: ClusterConfig,
    meta: MetadataStore,
    home: Path,
    data: Path,
    records: list[tuple[bytes, bytes]],
    confs: dict[str, str],
) -> None:
    """The push and the floor at 1M records and at len(records): what the extra records cost each (per million),
    the push's fixed cost (its 1M time less 1M records at the marginal cost), and the marginal ratio last."""
    small = MARGINAL_BASE
    info = stores.describe_store(meta, "bench")
    small_data = generate(home / "data-small", small, files=4)
    small_records = serialised_records(
        small_data, serde.parse(info.key_schema), serde.parse(info.value_schemas[0].schema)
    )
    push_small = timed_push(config, meta, small_data, confs)
    push_large = timed_push(config, meta, data, confs)
    floor_small, floor_large = floor_seconds(config, small_records), floor_seconds(config, records)
    spark_start = raw_topology.spark_start_seconds(config)
    extra = (len(records) - small) / 1e6
    push_marginal = (push_large.seconds - push_small.seconds) / extra
    floor_marginal = (floor_large - floor_small) / extra
    print(f"\npush of {small:,} records: {push_small.seconds:.1f}s")
    push_small.print_cpu()
    print(f"push of {len(records):,} records: {push_large.seconds:.1f}s")
    push_large.print_cpu()
    print(f"floor's Kafka work: {floor_small:.1f}s and {floor_large:.1f}s; Spark's start {spark_start:.1f}s")
    print(f"  marginal cost per million records: push {push_marginal:.2f}s, floor {floor_marginal:.2f}s")
    fixed = push_small.seconds - push_marginal * small / 1e6
    print(f"  the push's fixed cost (its {small:,}-record time less those records at the marginal cost): {fixed:.1f}s")
    print(f"  platform / floor at {small:,}: {push_small.seconds / (floor_small + spark_start):.2f}x")
    print(f"marginal platform / floor: {push_marginal / floor_marginal:.2f}x")


MARGINAL_BASE = 1_000_000


# What each process of a profile is, for the CPU table (`platform.plan`'s names).
KINDS = (
    ("kafka", "kafka brokers"),
    ("server-", "region servers"),
    ("spark-worker-", "spark workers (their executors)"),
    ("spark-master", "spark master"),
    ("airflow-", "airflow"),
    ("postgres", "postgresql"),
    ("redis", "redis"),
)


def _kind(name: str) -> str:
    return next((kind for prefix, kind in KINDS if name.startswith(prefix)), name)


def _timed_push(
    config: ClusterConfig, meta: MetadataStore, data: Path, confs: dict[str, str]
) -> tuple[float, dict[str, float]]:
    """Seconds of one push (`venice push --local`'s steps, as the default benchmark), and the core-seconds each
    kind of process spent on it (a process's tree: a Spark worker's executors, reaped or running, count as its)."""
    pids = {p.name: pid for p in platform.plan(config) if (pid := ManagedProcess(p.name, config.run_dir).pid())}
    before = {name: tree_cpu_seconds(pid) for name, pid in pids.items()}
    children_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    own_before = resource.getrusage(resource.RUSAGE_SELF)
    started = time.perf_counter()
    push(config, meta, "bench", str(data), confs=confs)
    seconds = time.perf_counter() - started
    spark_submit_reaped()
    cpu: dict[str, float] = {}
    for name, pid in pids.items():
        cpu[_kind(name)] = cpu.get(_kind(name), 0.0) + tree_cpu_seconds(pid) - before[name]
    children, own = resource.getrusage(resource.RUSAGE_CHILDREN), resource.getrusage(resource.RUSAGE_SELF)
    cpu["spark-submit (the driver)"] = (
        children.ru_utime + children.ru_stime - children_before.ru_utime - children_before.ru_stime
    )
    cpu["push driver (this process)"] = own.ru_utime + own.ru_stime - own_before.ru_utime - own_before.ru_stime
    return seconds, cpu


# A run: its label, its profile, its settings over the profile's.
Run = tuple[str, str, dict[str, str]]
PROFILE_PAIRS: dict[str, tuple[Run, Run]] = {
    "cluster": (("embedded", "embedded", {}), ("cluster", "cluster", {"security.enabled": "false"})),
    "hosts": (("cluster", "cluster", {}), ("hosts", "hosts", {})),
    "security": (
        ("cluster without security", "cluster", {"security.enabled": "false"}),
        ("cluster with security", "cluster", {}),
    ),
}


def compare_profiles(count: int, confs: dict[str, str], pair: tuple[Run, Run]) -> None:
    """The same push on two platforms, one after the other: the embedded platform and the cluster profile (three
    brokers with topics of three replicas, Spark standalone with two one-core workers, PostgreSQL, three instances
    per region with two replicas of every partition), the cluster profile and the hosts profile (the same, each
    process on a host of its own), or the cluster profile without and with security (Kafka over SASL_SSL with its
    ACLs); Airflow off, as the push runs `venice push --local`'s steps in each, each on a platform of its own, the
    dataset the same."""
    results, floors = {}, {}
    for label, profile, settings in pair:
        with sandbox_platform({"airflow.enabled": "false", **settings}, profile=profile) as (config, meta, home):
            data, records = bench_store(config, meta, home, count)
            push_seconds, cpu = _timed_push(config, meta, data, confs)
            results[label] = push_seconds
            print(f"\n{label}: {count} records pushed to {len(config.regions)} regions in {push_seconds:.1f}s")
            print(f"  where its CPU went ({sum(cpu.values()):.0f} core-seconds on 2 cores):")
            for name, seconds in sorted(cpu.items(), key=lambda item: -item[1]):
                print(f"    {seconds:6.1f}s  {name}")
            floors[label] = floor_seconds(config, records)
            print(f"  the floor's Kafka work (confluent-kafka alone, `raw_topology`): {floors[label]:.1f}s")
    (first, *_), (second, *_) = pair
    print(f"\nthe floor's Kafka work, {second} / {first}: {floors[second] / floors[first]:.2f}x")
    print(f"{second} / {first}: {results[second] / results[first]:.2f}x")


if __name__ == "__main__":
    main()
