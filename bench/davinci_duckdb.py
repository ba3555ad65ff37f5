"""Da Vinci ingestion into DuckDB (version topic -> `DaVinciClient` with `DuckDBRecordTransformer` -> serving)
against a raw DuckDB Arrow insert of the same rows, in the same run; and restart-to-ready of that client against
the full ingest.

    .venv/bin/python -m bench.davinci_duckdb [--records 1000000] [--profile]

The store's version is seeded with the protocol writer (`bench.repush_throughput.ProtocolWriterSeed`) through
`local.push`, so it is created and swapped in as a real push; the push's speed is not measured. Measured:
from the client's start to it serving the version (1M rows in its table), and the raw baseline: one
`INSERT INTO t SELECT * FROM arrow_table` of the same rows, already in memory as Arrow, into a table with the same
columns and primary key in a DuckDB file of its own. Then the client is closed and a new one started on the same
file: the seconds until it serves again (it resumes from the checkpoints in the file, nothing is re-ingested).
The client runs with the collector settings `venice davinci run` gives it (`gc_settings`; `--default-gc`: Python's).

The issue's targets: at least 200k rows/s and at least 0.5x raw; restart-to-ready under 2 s. `--profile` runs the
ingestion threads under cProfile (slower: its figures are not the benchmark's) and prints where their time went.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import resource
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq
from confluent_kafka import Consumer

from bench.davinci_floor import TABLE_COLUMNS, stripped_ingest
from bench.harness import cpu_now, report, sandbox_platform
from bench.push_throughput import PARTITIONS, bench_store
from bench.repush_throughput import ProtocolWriterSeed
from venice_core.controller import stores
from venice_core.davinci import DaVinciClient, DuckDBRecordTransformer, duckdb_store
from venice_core.host import gc_settings
from venice_core.ingestion import task as ingestion_task
from venice_core.protocol import serde
from venice_core.pubsub import admin
from venice_core.rollout import local

STORE = "bench"


class PhaseClock:
    """CPU seconds the ingestion threads spend in each phase (summed over the partitions' threads, which share the
    GIL), and the wall seconds DuckDB's transactions hold the file's lock (one at a time)."""

    def __init__(self) -> None:
        self.cpu: dict[str, float] = defaultdict(float)
        self.wall: dict[str, float] = defaultdict(float)
        self.lock = threading.Lock()
        self._undo: list[tuple[Any, str, Any]] = []

    def add(self, phase: str, cpu: float, wall: float) -> None:
        with self.lock:
            self.cpu[phase] += cpu
            self.wall[phase] += wall

    def timed(self, phase: str, function: Any) -> Any:
        clock, inside = self, threading.local()

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if getattr(inside, phase, False):  # a phase's functions may call one another: counted once
                return function(*args, **kwargs)
            setattr(inside, phase, True)
            cpu, wall = time.thread_time(), time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                clock.add(phase, time.thread_time() - cpu, time.perf_counter() - wall)
                setattr(inside, phase, False)

        return wrapper

    def patch(self, owner: Any, name: str, phase: str) -> None:
        original = getattr(owner, name)
        self._undo.append((owner, name, original))
        setattr(owner, name, self.timed(phase, original))

    def install(self) -> None:
        clock = self

        class TimedConsumer(Consumer):
            def consume(self, *args: Any, **kwargs: Any) -> Any:
                cpu, wall = time.thread_time(), time.perf_counter()
                try:
                    return super().consume(*args, **kwargs)
                finally:
                    clock.add("Kafka consume (confluent-kafka)", time.thread_time() - cpu, time.perf_counter() - wall)

        # The task module's own name for confluent-kafka's Consumer (an import, not its API), patched for profiling.
        self._undo.append((ingestion_task, "Consumer", ingestion_task.Consumer))  # type: ignore[attr-defined]  # not exported
        ingestion_task.Consumer = TimedConsumer  # type: ignore[attr-defined]  # not exported: patched all the same
        self.patch(ingestion_task.PartitionIngestionTask, "run", "ingestion threads in all")
        self.patch(duckdb_store.DuckDBPartitionStore, "commit", "commit in all")
        self.patch(duckdb_store.DuckDBVersionTable, "rows", "records -> Arrow (decode, columns)")
        self.patch(duckdb_store.DuckDBVersionTable, "rows_in_place", "records -> Arrow (decode, columns)")

    def uninstall(self) -> None:
        for owner, name, original in reversed(self._undo):
            setattr(owner, name, original)
        self._undo.clear()

    def print(self, seconds: float, process_cpu: float) -> None:
        total = self.cpu.pop("ingestion threads in all", 0.0)
        commit_cpu = self.cpu.pop("commit in all", 0.0)
        commit_wall = self.wall.pop("commit in all", 0.0)
        decode_cpu, decode_wall = (
            self.cpu["records -> Arrow (decode, columns)"],
            self.wall["records -> Arrow (decode, columns)"],
        )
        consume_cpu = self.cpu["Kafka consume (confluent-kafka)"]
        rows = [
            ("Kafka consume (confluent-kafka)", consume_cpu),
            ("records -> Arrow (decode, columns)", decode_cpu),
            ("DuckDB transaction (upsert + checkpoint)", commit_cpu - decode_cpu),
            ("the loop: envelope, DIV, batch puts", total - consume_cpu - commit_cpu),
        ]
        print(
            f"  where the ingest's time went ({process_cpu:.1f} CPU seconds in this process in {seconds:.1f}s "
            f"on 2 shared cores; ingestion threads' own CPU {total:.1f}s):"
        )
        for name, cpu in rows:
            print(f"    {cpu:6.2f}s CPU  {name}")
        print(
            f"    commits spent {commit_wall - decode_wall:.2f}s of wall time beyond decoding, summed over partitions "
            f"(the DuckDB transactions, one at a time, and waits for one another)"
        )


class Profiled:
    """cProfile in every ingestion thread, merged."""

    def __init__(self) -> None:
        self.profiles: list[cProfile.Profile] = []
        self.original = ingestion_task.PartitionIngestionTask.run

    def install(self) -> None:
        profiled, original = self, self.original

        # The task's method, profiled: its parameters named as the method's (a method's can be passed by name).
        def run(self: ingestion_task.PartitionIngestionTask[Any], stop: threading.Event) -> None:
            profile = cProfile.Profile()
            profiled.profiles.append(profile)
            profile.runcall(original, self, stop)

        ingestion_task.PartitionIngestionTask.run = run  # type: ignore[method-assign]  # patched for profiling

    def uninstall(self) -> None:
        ingestion_task.PartitionIngestionTask.run = self.original  # type: ignore[method-assign]  # the patch undone

    def print(self, top: int = 25) -> None:
        if not self.profiles:
            return
        stats = pstats.Stats(self.profiles[0])
        for profile in self.profiles[1:]:
            stats.add(profile)
        print("\n  cProfile of the ingestion threads (summed over partitions), by own time:")
        stats.sort_stats("tottime").print_stats(top)


def raw_duckdb(path: Path, arrow_table: Any) -> float:
    """Seconds for one `INSERT INTO ... SELECT FROM` the Arrow table into a table of the same columns and primary key
    in a DuckDB file of its own."""
    con = duckdb.connect(str(path))
    try:
        con.execute(f"CREATE TABLE raw ({TABLE_COLUMNS}, PRIMARY KEY (key))")
        con.register("rows_in_memory", arrow_table)
        started = time.perf_counter()
        con.execute("INSERT INTO raw SELECT key, name, age, score FROM rows_in_memory")
        seconds = time.perf_counter() - started
        counted = con.execute("SELECT count(*) FROM raw").fetchone()
        assert counted is not None and counted[0] == arrow_table.num_rows, counted
        return seconds
    finally:
        con.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--profile", action="store_true", help="cProfile the ingestion threads (slower)")
    parser.add_argument(
        "--workers", type=int, default=None, help="ingestion worker processes (default: the client's, one per core)"
    )
    parser.add_argument(
        "--default-gc", action="store_true", help="keep Python's collector settings (`venice davinci run --default-gc`)"
    )
    args = parser.parse_args()
    with sandbox_platform({"regions": "dc-0"}) as (config, meta, home):
        region = config.source_region
        data, records = bench_store(config, meta, home, args.records)
        n = len(records)
        started = time.perf_counter()
        local.push(
            config,
            meta,
            STORE,
            "records://seeded-by-the-protocol-writer",
            progress=lambda _line: None,
            run_job=ProtocolWriterSeed(records),
        )
        print(f"  seeded version 1 ({n} records) and rolled it out in {time.perf_counter() - started:.1f}s")
        del records
        arrow_table = pq.read_table(data).combine_chunks()
        raw_seconds = raw_duckdb(home / "raw.duckdb", arrow_table)
        del arrow_table

        base = home / "davinci"
        file = base / "client.duckdb"
        clock, profiled = PhaseClock(), Profiled()
        if args.profile:
            profiled.install()
        else:
            clock.install()
        if not args.default_gc:
            gc_settings.tune_for_throughput()  # as `venice davinci run` does
        cpu_before, children_before = cpu_now(), cpu_now(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        client = DaVinciClient(
            STORE, region, base, DuckDBRecordTransformer(file), config=config, ingest_workers=args.workers
        )
        try:
            client.start(wait=True, timeout=900)
            workers = len(client.local[1].workers)
            ingest_seconds = time.perf_counter() - started
            process_cpu = cpu_now() - cpu_before
            assert client.serving == 1, client.status()
            count = client.sql(f'SELECT count(*) FROM "{STORE}"')[0][0]
            assert count == n, (count, n)
        finally:
            client.close()
            workers_cpu = cpu_now(resource.RUSAGE_CHILDREN) - children_before  # the workers are waited for
            clock.uninstall()
            profiled.uninstall()

        started = time.perf_counter()
        restarted = DaVinciClient(STORE, region, base, DuckDBRecordTransformer(file), config=config)
        try:
            restarted.start(wait=True, timeout=120)
            restart_seconds = time.perf_counter() - started
            assert restarted.serving == 1
            resumed = restarted.status()["versions"][1]["resumed_from"]
            assert all(offset > 0 for offset in resumed.values()), resumed  # from the checkpoints, not offset 0
            assert restarted.sql(f'SELECT count(*) FROM "{STORE}"')[0][0] == n
        finally:
            restarted.close()

        # The same parts with none of the client's duties (`bench.davinci_floor`), after the client, same collector.
        info = stores.describe_store(meta, STORE)
        region_config = config.region(region)
        topic = region_config.version_topic(STORE, 1)
        stripped_workers = workers or 2  # as many as the client used; two where it used threads
        ends = dict(enumerate(admin.end_offsets(region_config.kafka_bootstrap, topic, list(range(PARTITIONS)))))
        stripped_seconds, stripped_cpu, stripped_workers_cpu, stripped_rows = stripped_ingest(
            region_config.kafka_bootstrap,
            topic,
            ends,
            serde.parse(info.key_schema),
            serde.parse(info.value_schemas[0].schema),
            home / "stripped.duckdb",
            stripped_workers,
        )
        assert stripped_rows == n, (stripped_rows, n)

        report(
            f"Da Vinci ingestion into DuckDB, {n} records (4 partitions){' - PROFILED' if args.profile else ''}",
            [
                ("seconds", f"{ingest_seconds:.2f}", f"{raw_seconds:.2f}"),
                ("rows/s", f"{n / ingest_seconds:,.0f}", f"{n / raw_seconds:,.0f}"),
            ],
        )
        print(
            "  (project: client start to serving the version; baseline: one raw DuckDB Arrow insert; collector "
            f"{'at Python defaults' if args.default_gc else 'as `venice davinci run` sets it (gc_settings)'})"
        )
        print(f"  batch phase ingested by {workers} worker processes" if workers else "  ingested by threads")
        if args.profile:
            profiled.print()
        elif not workers:  # the phases are timed in this process's threads
            clock.print(ingest_seconds, process_cpu)
        else:
            print(
                f"  this process (commits: decode + DuckDB transactions) used {process_cpu:.1f} CPU-s, "
                f"the workers {workers_cpu:.1f} CPU-s, in {ingest_seconds:.1f}s on {os.cpu_count()} cores"
            )
        print(
            f"  restart-to-ready of the {n}-row client: {restart_seconds:.2f}s "
            f"(the full ingest took {ingest_seconds:.2f}s; resumed from offsets {resumed})"
        )
        print(
            f"  the same parts stripped of the client's duties (confluent-kafka in {stripped_workers} processes, the "
            f"client's Arrow decoder, DuckDB appends and the key; no DIV, checkpoints or commits per partition): "
            f"{stripped_seconds:.2f}s, {raw_seconds / stripped_seconds:.2f}x of the raw insert "
            f"(this process {stripped_cpu:.1f} CPU-s, its workers {stripped_workers_cpu:.1f})"
        )
        print(f"  ratio (project rows/s / raw DuckDB Arrow insert rows/s): {raw_seconds / ingest_seconds:.2f}x")


if __name__ == "__main__":
    main()
