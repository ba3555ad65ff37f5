"""Failover of a replicated region: gets in a loop through the routing client against a region of 3 instances
(replication factor 2), one instance SIGKILLed mid-loop. Prints the failed reads (target 0), the p99 and max get
latency in the second after the kill (target: p99 under 50 ms on loopback) against the same loop's p99 before the
kill in the same run (the floor: the region with every instance up), and the time until every partition has two
ready replicas again (target: `instance.offline.grace.seconds` + 10 s for 100k records).

With `--partition` (root: the hosts layout, each process in a network namespace of its own), the instance is cut off
instead (its link down: it keeps running, unreachable), and the figure is the time until its leaderships have moved
(target: `instance.lease.seconds` + 2 s).

    .venv/bin/python -m bench.failover [--records 100000] [--grace 30] [--partition]
"""

from __future__ import annotations

import argparse
import random
import threading
import time

from sqlalchemy import select

from bench.harness import SCHEMAS, report, sandbox_platform
from scripts.generate_dataset import generate
from venice_core.client import ReadClient
from venice_core.config import ClusterConfig
from venice_core.controller import stores
from venice_core.embedded import network, servers
from venice_core.meta import MetadataStore
from venice_core.meta.models import PartitionLeader, Replica
from venice_core.model.status import ExecutionStatus
from venice_core.rollout.local import push

REGION = "dc-0"
PARTITIONS = 4


def fully_replicated(meta: MetadataStore, store: str, without: int) -> bool:
    """Every partition of the store's version has two ready replicas, none on the killed instance."""
    with meta.session() as session:
        ready: dict[int, int] = {}
        for row in session.scalars(select(Replica).where(Replica.store_name == store, Replica.region == REGION)):
            if row.status == ExecutionStatus.COMPLETED and row.instance != without:
                ready[row.partition] = ready.get(row.partition, 0) + 1
    return len(ready) == PARTITIONS and all(count >= 2 for count in ready.values())


def leaderships(meta: MetadataStore, store: str, instance: int) -> int:
    """How many of the store's partitions in the region `instance` leads."""
    with meta.session() as session:
        rows = session.scalars(select(PartitionLeader).where(PartitionLeader.store_name == store))
        return sum(1 for row in rows if row.region == REGION and row.instance == instance)


def p99(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[int(0.99 * (len(ordered) - 1))] * 1e3 if ordered else float("nan")


def run(config: ClusterConfig, meta: MetadataStore, records: int, grace: float, partition: bool = False) -> None:
    store = "bench"
    rng = random.Random(11)
    keys = [f"user-{rng.randrange(records):09d}" for _ in range(50_000)]
    client = ReadClient.for_region(config, REGION)
    for key in keys[:1000]:  # warm up: routing table, connections, schemas
        client.get(store, key)
    failures: list[str] = []
    samples: list[tuple[float, float]] = []
    stop = threading.Event()

    def loop() -> None:
        index = 0
        while not stop.is_set():
            key = keys[index % len(keys)]
            started = time.perf_counter()
            try:
                if client.get(store, key) is None:
                    failures.append(f"{key}: not found")
            except Exception as exc:  # noqa: BLE001 - a failed read is the figure
                failures.append(f"{key}: {exc!r}")
            samples.append((time.monotonic(), time.perf_counter() - started))
            index += 1

    reader = threading.Thread(target=loop)
    reader.start()
    time.sleep(5)
    # A leader: its leaderships must move (the first instance leading a partition).
    victim = next((n for n in range(3) if leaderships(meta, store, n)), 1) if partition else 1
    killed = time.monotonic()
    if partition:
        network.cut(config, servers.name(REGION, victim))
    else:
        servers.process(config, REGION, victim).kill()
    replicated_after = moved_after = None
    try:
        while time.monotonic() - killed < grace + 120:
            if partition and moved_after is None and leaderships(meta, store, victim) == 0:
                moved_after = time.monotonic() - killed
            if fully_replicated(meta, store, victim):
                replicated_after = time.monotonic() - killed
                if not partition or moved_after is not None:
                    break
            time.sleep(0.2)
        time.sleep(1)
        stop.set()
        reader.join()
    finally:
        if partition:
            network.rejoin(config, servers.name(REGION, victim))
    before = [s for at, s in samples if killed - 4 <= at < killed]
    after = [s for at, s in samples if killed <= at < killed + 1]
    report(
        f"failover: {records:,} records, {PARTITIONS} partitions, 3 instances, replication factor 2, "
        f"instance {victim} {'cut off (link down)' if partition else 'SIGKILLed'} (ms)",
        [
            ("get p99", f"{p99(after):.2f}", f"{p99(before):.2f}"),
            ("get max", f"{max(after) * 1e3:.2f}", f"{max(before) * 1e3:.2f}"),
            ("gets", f"{len(after)}", f"{len(before) / 4:.0f}/s"),
        ],
    )
    again = "never" if replicated_after is None else f"{replicated_after:.1f} s"
    target = grace + 10
    print(f"  failed reads: {len(failures)} (target 0){': ' + failures[0] if failures else ''}")
    print(f"  fully replicated again after {again} (target: grace {grace:.0f} s + 10 s = {target:.0f} s)")
    if partition:
        lease = config.server.instance_lease_seconds
        moved = "never" if moved_after is None else f"{moved_after:.1f} s"
        print(f"  its leaderships moved after {moved} (target: the lease {lease:.0f} s + 2 s = {lease + 2:.0f} s)")
    fault = "cut" if partition else "kill"
    print(f"  targets: p99 in the second after the {fault} < 50 ms ({'met' if p99(after) < 50 else 'missed'})")
    ratio = p99(after) / p99(before)
    print(f"  project / floor (p99, the second after the {fault} / the seconds before it): {ratio:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--grace", type=float, default=30.0, help="instance.offline.grace.seconds")
    parser.add_argument(
        "--partition", action="store_true", help="cut the instance off (a host of its own, link down; root)"
    )
    args = parser.parse_args()
    extra = {
        "regions": REGION,
        f"region.{REGION}.instances": "3",
        "instance.offline.grace.seconds": str(args.grace),
    }
    if args.partition:  # each process on a host of its own, on a subnet and bridge of the benchmark's own
        network.require_root()
        # The metadata store on a host of its own too (PostgreSQL): SQLite's file would reach the cut-off instance.
        extra.update({"hosts.enabled": "true", "hosts.subnet": "10.216.0.0/16", "hosts.bridge": "vnbench"})
        extra.update({"postgres.embedded.enabled": "true", "postgres.embedded.port": "5732"})
    with sandbox_platform(extra) as (config, meta, home):
        data = generate(home / "data", args.records, files=2)
        key, value = (SCHEMAS / "user_key.avsc").read_text(), (SCHEMAS / "user_value_v1.avsc").read_text()
        stores.create_store(meta, config, "bench", key, value, partitions=PARTITIONS)
        push(config, meta, "bench", str(data), progress=lambda _line: None)
        run(config, meta, args.records, args.grace, args.partition)


if __name__ == "__main__":
    main()
