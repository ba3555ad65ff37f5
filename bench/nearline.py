"""Nearline writes of a hybrid store, against raw confluent-kafka on the same bytes in the same run:

- latency: writes in dc-0 at a steady rate, each timed until a read in dc-2 returns it (p50, p99), against the
  same messages produced and consumed by confluent-kafka alone;
- throughput: a backlog of writes in dc-0's real-time topic ingested by one region server at a time (records
  per second, per region), against one confluent-kafka consumer reading the same topic.

    .venv/bin/python -m bench.nearline [--rate 1000] [--seconds 20] [--backlog 200000]
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from bench.harness import SCHEMAS, report, sandbox_platform
from scripts.generate_dataset import generate
from venice_core.client import ReadClient
from venice_core.config import ClusterConfig
from venice_core.controller import stores
from venice_core.embedded import servers
from venice_core.ingestion.real_time import REAL_TIME_CONSUMER_CONFIG
from venice_core.meta import MetadataStore
from venice_core.nearline.writer import OnlineWriter
from venice_core.pubsub import CONSUMER_CONFIG, PRODUCER_CONFIG, admin, client_config
from venice_core.rollout.local import push

STORE = "nearline"
PARTITIONS = 2


def _value(i: int) -> dict[str, Any]:
    return {"name": f"user-{i}", "age": i % 90, "score": i / 7}


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered) * 1e3, ordered[int(0.99 * (len(ordered) - 1))] * 1e3


def _paced(rate: float, count: int, send: Callable[[int], None]) -> None:
    """Call `send(i)` `count` times at a steady `rate` per second (no catch-up bursts beyond the schedule)."""
    started = time.perf_counter()
    for i in range(count):
        due = started + i / rate
        delay = due - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        send(i)


def nearline_latency(config: ClusterConfig, meta: MetadataStore, rate: float, count: int) -> list[float]:
    """Write in dc-0, read in dc-2: seconds from each put to the first read that returns it."""
    written: dict[str, float] = {}
    seen: dict[str, float] = {}
    done = threading.Event()
    lock = threading.Lock()

    def poll() -> None:
        client = ReadClient("127.0.0.1", config.server_port("dc-2"))
        while not done.is_set() or len(seen) < len(written):
            with lock:
                pending = [k for k in list(written)[-2000:] if k not in seen][:100]
            if not pending:
                time.sleep(0.0005)
                continue
            found = client.batch_get(STORE, pending)
            now = time.perf_counter()
            for key, value in found.items():
                if value is not None:
                    seen[key] = now
        client.close()

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    with OnlineWriter(STORE, "dc-0", config=config, meta=meta, producer_config={"linger.ms": 1}) as writer:

        def send(i: int) -> None:
            key = f"lat-{i}"
            with lock:
                written[key] = time.perf_counter()
            writer.put(key, _value(i))  # sent within linger.ms by the producer's own thread

        _paced(rate, count, send)
        writer.flush()
    done.set()
    poller.join(timeout=120)
    return [seen[k] - written[k] for k in written if k in seen]


def raw_latency(config: ClusterConfig, rate: float, count: int) -> list[float]:
    """The baseline: the same number of similar-sized messages produced and consumed by confluent-kafka alone."""
    topic = f"bench-raw-latency-{uuid.uuid4().hex[:6]}"
    bootstrap = config.kafka.bootstrap
    admin.create_topic(bootstrap, topic, PARTITIONS)
    consumer = Consumer(client_config(bootstrap, **REAL_TIME_CONSUMER_CONFIG, **{"group.id": "bench-raw"}))
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    sent: dict[bytes, float] = {}
    latencies: list[float] = []
    done = threading.Event()

    def consume() -> None:
        while not done.is_set() or len(latencies) < len(sent):
            for message in consumer.consume(1000, timeout=0.05):
                key = message.key()
                if not message.error() and key is not None:
                    latencies.append(time.perf_counter() - sent[key])

    reader = threading.Thread(target=consume, daemon=True)
    reader.start()
    producer = Producer(client_config(bootstrap, **{**PRODUCER_CONFIG, "linger.ms": 1}))
    payload = b"x" * 64

    def send(i: int) -> None:
        key = f"lat-{i}".encode()
        sent[key] = time.perf_counter()
        producer.produce(topic, value=payload, key=key)
        producer.poll(0)

    _paced(rate, count, send)
    producer.flush()
    done.set()
    reader.join(timeout=60)
    consumer.close()
    admin.delete_topics(bootstrap, [topic])
    return latencies


def _last_keys(count: int) -> list[str]:
    return [f"tp-{i}" for i in range(count - 50, count)]


def _applied(config: ClusterConfig, region: str) -> int | None:
    """The nearline writes the region's server has applied to the store (its metrics), None while it starts."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{config.server_port(region)}/metrics", timeout=2) as response:
            text = response.read().decode()
    except OSError:
        return None
    prefix = "venice_nearline_writes_applied_total{"
    values = [float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(prefix) and STORE in line]
    return int(sum(values)) if values else None


def region_throughput(config: ClusterConfig, meta: MetadataStore, backlog: int) -> dict[str, float]:
    """Records per second each region server alone ingests a backlog of nearline writes at, from its own count of
    applied writes (sampled every 20 ms from the first that moved to the last, so its start is not counted)."""
    for region in config.region_names:
        servers.stop(config, region)
    with OnlineWriter(STORE, "dc-0", config=config, meta=meta) as writer:
        for i in range(backlog):
            writer.put(f"tp-{i}", _value(i))
    rates = {}
    for region in config.region_names:
        servers.start(config, region)
        first: tuple[float, int] | None = None
        last: tuple[float, int] | None = None
        baseline_count = None
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            count = _applied(config, region)
            now = time.perf_counter()
            if count is not None:
                if baseline_count is None:
                    baseline_count = count
                if first is None and count > baseline_count:
                    first = (now, count)
                if first is not None and (last is None or count > last[1]):
                    last = (now, count)
                if last is not None and now - last[0] > 2.0:  # nothing more for 2 s: caught up
                    break
            time.sleep(0.02)
        assert first is not None and last is not None and last[0] > first[0], f"{region} applied nothing"
        assert baseline_count is not None  # set with the first count, before `first`
        rates[region] = (last[1] - first[1]) / (last[0] - first[0])
        print(f"  {region}: {last[1] - baseline_count} writes applied, {rates[region]:,.0f} records/s")
        servers.stop(config, region)
    for region in config.region_names:
        servers.start(config, region)
    return rates


def raw_throughput(config: ClusterConfig) -> float:
    """Records per second one confluent-kafka consumer reads the same real-time topic at (all of it)."""
    topic = config.region("dc-0").real_time_topic(STORE)
    bootstrap = config.kafka.bootstrap
    ends = admin.end_offsets(bootstrap, topic, PARTITIONS)
    consumer = Consumer(client_config(bootstrap, **CONSUMER_CONFIG, **{"group.id": "bench-raw-throughput"}))
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    total = sum(ends)
    read = 0
    started = 0.0
    while read < total:
        for message in consumer.consume(5000, timeout=1):
            if not message.error():
                started = started or time.perf_counter()  # from the first record: the consumer's start excluded
                read += 1
    elapsed = time.perf_counter() - started
    consumer.close()
    return read / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=1000.0, help="nearline writes per second in the latency run")
    parser.add_argument("--seconds", type=float, default=20.0, help="length of the latency run")
    parser.add_argument("--backlog", type=int, default=200_000, help="writes each region ingests in the throughput run")
    args = parser.parse_args()
    if args.rate <= 0 or args.seconds <= 0 or args.backlog <= 0:
        parser.error("--rate, --seconds and --backlog must be positive")
    with sandbox_platform() as (config, meta, home):
        stores.create_store(
            meta,
            config,
            STORE,
            (SCHEMAS / "user_key.avsc").read_text(),
            (SCHEMAS / "user_value_v1.avsc").read_text(),
            partitions=PARTITIONS,
        )
        stores.update_store(meta, config, STORE, hybrid_rewind_seconds=3600, hybrid_offset_lag_threshold=100)
        push(config, meta, STORE, str(generate(home / "data", 1000, files=1)), progress=lambda _line: None)

        count = int(args.rate * args.seconds)
        print(f"latency: {count} writes at {args.rate:.0f}/s in dc-0, read in dc-2")
        project = nearline_latency(config, meta, args.rate, count)
        baseline = raw_latency(config, args.rate, count)
        print(f"throughput: a backlog of {args.backlog} writes, one region server at a time")
        rates = region_throughput(config, meta, args.backlog)
        raw = raw_throughput(config)

    p50, p99 = percentiles(project)
    r50, r99 = percentiles(baseline)
    report(
        f"nearline write-to-readable latency, {len(project)} of {count} writes seen (ms)",
        [("p50", f"{p50:.1f}", f"{r50:.1f}"), ("p99", f"{p99:.1f}", f"{r99:.1f}")],
    )
    report(
        "nearline ingestion throughput (records/s)",
        [(region, f"{rate:,.0f}", f"{raw:,.0f}") for region, rate in rates.items()],
    )
    verdict = {True: "met", False: "missed"}
    worst = min(rates.values()) / raw
    print(f"  targets: p99 < 500 ms ({verdict[p99 < 500]}), throughput >= 0.5x raw ({verdict[worst >= 0.5]})")
    ratios = ", ".join(f"{region} {rate / raw:.2f}x" for region, rate in rates.items())
    print(f"  ratio: latency p99 {p99 / r99:.1f}x raw; throughput {ratios}")


if __name__ == "__main__":
    main()
