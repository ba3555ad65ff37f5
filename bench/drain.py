"""Drain of a streaming pipeline at a steady input rate, and the freshness gap of an upgrade:

- drain: from the drain request to the clean stop, with the pipeline keeping up with `--rate` events/s, split into
  noticing the notification (the job's monitor polls every `--poll` s), waiting for the micro-batch in flight,
  processing to the cut (the markers and the windows they fire included), and committing and stopping. Target: at
  most one trigger interval + 5 s (the monitor's poll is reported beside it: it is a setting, not drain work);
- upgrade: the gap in the store's freshness, from the last write of the drained run to the first write of the new
  one (the real-time topic's message times), when the new run starts from the drained offsets with fresh state.

    .venv/bin/python -m bench.drain [--rate 10000] [--warmup 20] [--trigger 1] [--transform window_count]
"""

from __future__ import annotations

import argparse
import threading
import time
import uuid
from collections.abc import Callable
from typing import TypeVar

from confluent_kafka import Consumer, Producer, TopicPartition

from bench.harness import sandbox_platform
from venice_core.config import ClusterConfig
from venice_core.controller import stores, streams
from venice_core.meta import MetadataStore
from venice_core.pubsub import admin, client_config
from venice_core.spark.submit import StreamJobRequest
from venice_core.streams import control, upgrade

T = TypeVar("T")

STORE, PIPELINE, PARTITIONS = "drain_bench", "drain_bench", 2


class Paced:
    """Events `{"user": u<i % keys>, "n": i, "ts": now}` at a steady rate on a thread, in slices of 10 ms."""

    def __init__(self, bootstrap: str, topic: str, rate: float, keys: int = 100) -> None:
        self.bootstrap, self.topic, self.rate, self.keys = bootstrap, topic, rate, keys
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Paced:
        self._thread.start()
        return self

    def _run(self) -> None:
        producer = Producer(client_config(self.bootstrap, **{"linger.ms": 20}))
        started = time.monotonic()
        while not self._stop.is_set():
            due = int((time.monotonic() - started) * self.rate)
            now_ms = int(time.time() * 1000)
            for i in range(self.sent, due):
                value = f'{{"user": "u{i % self.keys}", "n": {i}, "ts": {now_ms}}}'.encode()
                producer.produce(self.topic, value, partition=i % PARTITIONS)
            self.sent = max(self.sent, due)
            producer.poll(0)
            time.sleep(0.01)
        producer.flush(30)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(60)
        return self.sent


def write_times(config: ClusterConfig, region: str) -> list[float]:
    """The broker times (s) of every message of the store's real-time topic."""
    r = config.region(region)
    topic = r.real_time_topic(STORE)
    ends = admin.end_offsets(r.kafka_bootstrap, topic, PARTITIONS)
    consumer = Consumer(client_config(r.kafka_bootstrap, **{"group.id": "bench-drain", "enable.auto.commit": False}))
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    times, left = [], sum(ends)
    while left > 0:
        for message in consumer.consume(1000, timeout=1.0):
            if not message.error():
                times.append(message.timestamp()[1] / 1000)
                left -= 1
    consumer.close()
    return sorted(times)


def wait(what: str, check: Callable[[], T], timeout: float = 600.0) -> T:
    deadline = time.monotonic() + timeout
    while not (result := check()):
        if time.monotonic() > deadline:
            raise SystemExit(f"{what} did not happen within {timeout:.0f}s")
        time.sleep(0.05)
    return result


def run(config: ClusterConfig, meta: MetadataStore, args: argparse.Namespace) -> None:
    region = config.source_region
    bootstrap = config.region(region).kafka_bootstrap
    stores.create_store(meta, config, STORE, '"string"', '"long"', partitions=PARTITIONS)
    stores.update_store(meta, config, STORE, hybrid_rewind_seconds=3600)
    source = f"bench-events-{uuid.uuid4().hex[:6]}"
    admin.create_topic(bootstrap, source, PARTITIONS)
    value_fields = ("n",) if args.transform == "map" else ()
    request = StreamJobRequest(
        PIPELINE, STORE, region, source, bootstrap, "user", value_fields, "ts", trigger_seconds=args.trigger,
        transform=args.transform, window_seconds=args.window, watermark_seconds=1.0, drain_poll_seconds=args.poll,
        starting_offsets="latest",
    )  # fmt: skip
    producer = Paced(bootstrap, source, args.rate).start()
    try:
        control.start(config, meta, request)
        print(f"pipeline running ({args.transform}, trigger {args.trigger}s); {args.warmup:.0f}s at {args.rate:,.0f}/s")
        time.sleep(args.warmup)
        record = streams.get_pipeline(meta, PIPELINE)
        lag = sum(admin.end_offsets(bootstrap, source, PARTITIONS)) - sum(record.offsets.values())
        print(f"  before the drain: batch {record.last_batch_id}, {lag:,} events behind the source's end")
        requested_at = time.time()
        drained_run = upgrade.request_drain(config, meta, PIPELINE).run_id
        outcome = wait("the drain", lambda: upgrade.drain_outcome(config, meta, PIPELINE, drained_run))
        if outcome != streams.DRAINED:
            raise SystemExit(f"the drain {outcome}")
        report = streams.get_pipeline(meta, PIPELINE).drain or {}
        new_run = upgrade.start_upgraded(
            config, meta, PIPELINE, {"transform": "window_count_v2"} if args.transform != "map" else {}
        )
        started_at = time.time()
        wait("the new run", lambda: upgrade.consuming(config, meta, PIPELINE, new_run))
        rt = config.region(region)
        written = sum(admin.end_offsets(rt.kafka_bootstrap, rt.real_time_topic(STORE), PARTITIONS))
        wait(
            "the new run's first write",
            lambda: sum(admin.end_offsets(rt.kafka_bootstrap, rt.real_time_topic(STORE), PARTITIONS)) > written,
        )
    finally:
        sent = producer.stop()
        control.stop(config, meta, PIPELINE)
    times = write_times(config, region)
    stopped = report["stopped_at"]
    last_old = max((t for t in times if t <= stopped), default=None)
    first_new = min((t for t in times if t > stopped), default=None)

    noticed = report["requested_at"] - requested_at
    total = stopped - requested_at
    work = report["total_s"]
    target = args.trigger + 5
    print(f"\ndrain at {args.rate:,.0f} events/s ({sent:,} sent), trigger {args.trigger}s, monitor poll {args.poll}s")
    print(f"  noticing the notification     {noticed:6.2f} s   (the monitor's poll)")
    print(
        f"  waiting for the micro-batch   {report['waited_for_batch_s']:6.2f} s   (batch {report['batch_in_flight']})"
    )
    print(f"  processing to the cut         {report['processing_s']:6.2f} s   (markers, windows fired)")
    print(f"  committing and stopping       {report['committing_s']:6.2f} s")
    print(f"  request to clean stop         {total:6.2f} s   (drain work {work:.2f} s after the job saw it)")
    verdict = "met" if work <= target else "missed"
    print(f"  target <= trigger + 5 s = {target:.1f} s: {verdict} by the drain's work; with the poll {total:.2f} s")
    if last_old is not None and first_new is not None:
        print(
            f"\nupgrade freshness gap: {first_new - last_old:.2f} s from the drained run's last write to the new "
            f"run's first (the new run was started {started_at - stopped:.2f} s after the stop)"
        )
    else:
        print("\nupgrade freshness gap: no write on one side of the stop (a window longer than the run?)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=10_000.0, help="events per second into the source topic")
    parser.add_argument("--warmup", type=float, default=20.0, help="seconds at the rate before the drain")
    parser.add_argument("--trigger", type=float, default=1.0, help="the pipeline's micro-batch interval (s)")
    parser.add_argument("--poll", type=float, default=2.0, help="the drain monitor's interval (s)")
    parser.add_argument("--window", type=float, default=2.0, help="the windowed transforms' window (s)")
    parser.add_argument("--transform", default="window_count", choices=["map", "window_count"])
    args = parser.parse_args()
    if args.rate <= 0 or args.warmup < 0 or args.trigger <= 0 or args.poll <= 0:
        parser.error("--rate, --trigger and --poll must be positive")
    with sandbox_platform() as (config, meta, _home):
        run(config, meta, args)


if __name__ == "__main__":
    main()
