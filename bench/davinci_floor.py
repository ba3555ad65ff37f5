"""A Da Vinci ingest into DuckDB stripped of every duty of the platform: what the same parts cost on their own.

`stripped_ingest` reads a version topic into a DuckDB table the way the client does, with none of its guarantees:
worker processes (as many as the client starts) consume their partitions with confluent-kafka and the platform's
consumer settings, keep each message's key and value, and hand them over in frames of 50,000 records; this
process decodes them with the client's own Arrow decoder (`davinci.arrow_decode`), appends them to an unindexed
table (one transaction a frame, no checkpoint row), and adds the primary key at the end, as the client does for a
sorted push. No DIV, no run detection, no checkpoints, no per-partition commits, no END_OF_PUSH handling: control
messages are dropped by their type byte. Set against the raw DuckDB insert of the same run, it shows how much of
the client's ratio the parts themselves take on this machine (an empirical figure, not a proof of a floor).

    python -m bench.davinci_floor worker   (one worker: its spec on stdin, frames on stdout)
"""

from __future__ import annotations

import resource
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from venice_core.davinci.ingest_worker import read_frame, write_frame

FRAME_RECORDS = 50_000
# The benchmark store's columns (`bench.push_throughput.bench_store`: a string key, the user value schema), here and
# in the raw insert's table.
TABLE_COLUMNS = "key VARCHAR NOT NULL, name VARCHAR, age INTEGER, score DOUBLE"


def worker() -> None:
    """Consume the spec's partitions to their end offsets; send (keys, key lengths, values, value lengths) frames."""
    from confluent_kafka import Consumer, TopicPartition

    from venice_core.pubsub import CONSUMER_CONFIG, client_config

    spec = read_frame(sys.stdin.buffer)
    if spec is None:
        raise SystemExit("davinci_floor worker: no spec on stdin")
    out = sys.stdout.buffer
    consumer = Consumer(client_config(spec["bootstrap"], **CONSUMER_CONFIG, **{"group.id": "bench-davinci-floor"}))
    consumer.assign([TopicPartition(spec["topic"], p, 0) for p in spec["ends"]])
    left = {p: end for p, end in spec["ends"].items() if end > 0}
    keys: list[bytes] = []
    values: list[bytes] = []

    def ship() -> None:
        if values:
            key_lengths = np.fromiter(map(len, keys), np.int64, len(keys))
            value_lengths = np.fromiter(map(len, values), np.int64, len(values))
            write_frame(out, (b"".join(keys), key_lengths, b"".join(values), value_lengths))
            keys.clear()
            values.clear()

    while left:
        for message in consumer.consume(5000, 0.2):
            error = message.error()
            if error is not None:  # not a record: a fatal error ends the run, the consumer retries any other
                if error.fatal():
                    raise RuntimeError(error.str())
                continue
            key, value, partition, offset = message.key(), message.value(), message.partition(), message.offset()
            # A record of the version topic: the protocol writer sends every one with a key and a value.
            assert key is not None and value is not None and partition is not None and offset is not None
            keys.append(key)
            values.append(value)
            if offset + 1 >= left.get(partition, 1 << 62):
                del left[partition]
        if len(values) >= FRAME_RECORDS:
            ship()
    ship()
    consumer.close()


def stripped_ingest(
    bootstrap: str, topic: str, ends: dict[int, int], key_schema: Any, value_schema: Any, path: Path, workers: int
) -> tuple[float, float, float, int]:
    """Seconds, this process's CPU-s, the workers' CPU-s and the rows ingested, for the stripped pipeline into a new
    DuckDB file at `path`. The schemas are parsed ones (a string key, a flat record value, as the benchmark's)."""
    # Here, not at the top: a worker (this module run as a process) needs none of them.
    import duckdb
    import pyarrow as pa

    from bench.harness import cpu_now
    from venice_core.davinci import arrow_decode
    from venice_core.protocol.envelope import HEADER, SCHEMA_ID, MessageType

    key_plan = arrow_decode.plan(key_schema, "key")
    value_plan = arrow_decode.plan(value_schema, "value")
    assert key_plan is not None and value_plan is not None, "the floor decodes flat schemas only"
    self_before, children_before = cpu_now(), cpu_now(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    con = duckdb.connect(str(path))
    lock, rows = threading.Lock(), [0]
    processes: list[subprocess.Popen[bytes]] = []
    try:
        con.execute(f"CREATE TABLE t ({TABLE_COLUMNS})")
        partitions = sorted(ends)
        for group in (partitions[i::workers] for i in range(workers)):
            process = subprocess.Popen(
                [sys.executable, "-m", "bench.davinci_floor", "worker"], stdin=subprocess.PIPE, stdout=subprocess.PIPE
            )
            assert process.stdin is not None
            write_frame(process.stdin, {"bootstrap": bootstrap, "topic": topic, "ends": {p: ends[p] for p in group}})
            processes.append(process)

        def serve(process: subprocess.Popen[bytes]) -> None:
            assert process.stdout is not None
            while (frame := read_frame(process.stdout)) is not None:
                key_bytes, key_lengths, value_bytes, value_lengths = frame
                buffer = key_bytes + value_bytes
                key_ends = np.cumsum(key_lengths)
                value_ends = np.cumsum(value_lengths) + len(key_bytes)
                value_starts = value_ends - value_lengths
                puts = np.frombuffer(buffer, np.uint8)[value_starts + 1] == MessageType.PUT
                columns = arrow_decode.decode(key_plan, buffer, (key_ends - key_lengths)[puts] + 1, key_ends[puts])
                columns.update(
                    arrow_decode.decode(
                        value_plan, buffer, value_starts[puts] + HEADER.size + SCHEMA_ID.size, value_ends[puts]
                    )
                )
                table = pa.table({name: columns[name] for name in ("key", "name", "age", "score")})
                with lock:
                    con.execute("BEGIN")
                    con.register("frame", table)
                    con.execute("INSERT INTO t SELECT * FROM frame")
                    con.unregister("frame")
                    con.execute("COMMIT")
                    rows[0] += table.num_rows

        threads = [threading.Thread(target=serve, args=(p,)) for p in processes]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        con.execute("ALTER TABLE t ADD PRIMARY KEY (key)")
        seconds = time.perf_counter() - started
        for process in processes:
            process.wait()
    finally:
        con.close()
        for process in processes:  # still running only if this run failed part-way
            if process.poll() is None:
                process.kill()
            process.wait()
    return seconds, cpu_now() - self_before, cpu_now(resource.RUSAGE_CHILDREN) - children_before, rows[0]


if __name__ == "__main__":
    if sys.argv[1:] != ["worker"]:
        raise SystemExit(__doc__)
    worker()
