"""A Da Vinci client (`venice davinci run`, DuckDB) SIGKILLed at random points of its ingestion, ten times, while
nearline writes go on: after each kill the DuckDB file holds exactly what its checkpoints cover (the version topic
and the real-time topics replayed up to the checkpointed offsets, no row lost or duplicated), each restart resumes
from those checkpoints (the offsets it starts from are asserted), and at the end the table equals an oracle of
every write."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb

from tests.support.jobs import RecordsJob
from tests.support.platform import VENICE, PlatformEnv
from tests.support.reads import NotYet, holds, wait_for
from tests.support.topics import read_until
from venice_core.controller import stores
from venice_core.davinci import DaVinciClient, DuckDBRecordTransformer
from venice_core.davinci.duckdb_store import DuckDBCheckpointStore
from venice_core.nearline.writer import OnlineWriter
from venice_core.protocol import serde
from venice_core.protocol.envelope import MessageType, decode
from venice_core.storage.checkpoint import PubSubTopicPartition
from venice_core.storage.ingestion_checkpoint import IngestionCheckpoint

PARTITIONS = 2
KILLS = 10
REGION = "dc-1"


def _value(i: int, name: str = "") -> dict[str, Any]:
    return {"name": name or f"n{i}", "age": i % 90, "score": float(i)}


def _rows(file: Path, store: str, version: int) -> dict[str, dict[str, Any]]:
    with duckdb.connect(str(file), read_only=True) as con:
        rows = con.execute(f'SELECT key, name, age, score FROM "{store}_v{version}"').fetchall()
    return {k: {"name": n, "age": a, "score": s} for k, n, a, s in rows}


def _checkpoints(file: Path, topic: str) -> dict[int, IngestionCheckpoint]:
    with duckdb.connect(str(file), read_only=True) as con:
        store = DuckDBCheckpointStore(con)
        states = {p: store.get(PubSubTopicPartition(topic, p)) for p in range(PARTITIONS)}
    return {p: IngestionCheckpoint.decode(raw) for p, raw in states.items() if raw is not None}


_read: dict[tuple[str, int], list[tuple[bytes, bytes]]] = {}  # the topics' records read so far, by partition


def _records(bootstrap: str, topic: str, partition: int, end: int) -> list[tuple[bytes, bytes]]:
    """A partition's records below `end`, read once across rounds (each round reads only what is new)."""
    known = _read.setdefault((topic, partition), [])
    known.extend(read_until(bootstrap, topic, partition, end, start=len(known)))
    return known[:end]


def _covered(env: PlatformEnv, topic: str, checkpoints: dict[int, IngestionCheckpoint], schema: Any) -> dict[str, Any]:
    """What the checkpoints cover: each partition's version topic up to its next offset, then (past END_OF_PUSH)
    the real-time writes up to the checkpointed offsets (one writer here, with rising timestamps: the later wins)."""
    bootstrap = env.config.region(REGION).kafka_bootstrap
    parsed_key, parsed_value = serde.parse("string"), serde.parse(schema)
    rows: dict[str, Any] = {}

    def apply(records: list[tuple[bytes, bytes]]) -> None:
        for key, value in records:
            message = decode(key, value)
            if message.type is MessageType.PUT:
                rows[serde.deserialize(parsed_key, message.key)] = serde.deserialize(parsed_value, message.value)
            elif message.type is MessageType.DELETE:
                rows.pop(serde.deserialize(parsed_key, message.key), None)

    for partition, state in checkpoints.items():
        apply(_records(bootstrap, topic, partition, state.next_offset))
        real_time = state.real_time if state.end_of_push else None
        for (rt_topic, rt_partition), offset in real_time.offsets.items() if real_time is not None else ():
            assert rt_partition == partition
            apply(_records(bootstrap, rt_topic, partition, offset))
    return rows


class NearlineWrites(threading.Thread):
    """Puts and deletes from dc-0 at a steady pace, into an oracle, until stopped."""

    def __init__(self, env: PlatformEnv, store: str, oracle: dict[str, Any]) -> None:
        super().__init__(daemon=True)
        self.writer = OnlineWriter(store, "dc-0", config=env.config, meta=env.meta)
        self.oracle, self.stopping, self.count = oracle, threading.Event(), 0
        self.random = random.Random(7)

    def run(self) -> None:
        while not self.stopping.is_set():
            for _ in range(20):
                key = f"k{self.random.randrange(600)}"
                if self.random.random() < 0.2:
                    self.writer.delete(key)
                    self.oracle[key] = None
                else:
                    self.oracle[key] = _value(self.count, f"w{self.count}")
                    self.writer.put(key, self.oracle[key])
                self.count += 1
            self.writer.flush()
            self.stopping.wait(0.05)  # a steady pace, not a flood

    def stop(self) -> None:
        self.stopping.set()
        self.join()
        self.writer.close()


def test_sigkill_at_random_points_loses_and_duplicates_nothing(platform_env: PlatformEnv, tmp_path: Path) -> None:
    env = platform_env
    store = env.create_user_store("dvckill", PARTITIONS)
    stores.update_store(env.meta, env.config, store, hybrid_rewind_seconds=3600, hybrid_offset_lag_threshold=0)
    schema = stores.describe_store(env.meta, store).value_schemas[-1].schema
    oracle: dict[str, Any] = {f"k{i}": _value(i) for i in range(3_000)}
    env.push(store, RecordsJob(dict(oracle)))
    topic = env.config.region(REGION).version_topic(store, 1)
    file = tmp_path / "client.duckdb"
    argv = [VENICE, "davinci", "run", store, "--region", REGION, "--duckdb", str(file), "--progress-seconds", "0.5"]
    chance = random.Random(11)
    writes = NearlineWrites(env, store, oracle)
    writes.start()
    saved: dict[int, IngestionCheckpoint] = {}
    try:
        for round_ in range(KILLS):
            log = tmp_path / f"run-{round_}.log"
            with log.open("w") as out:
                process = subprocess.Popen(argv, env=env.env, stdout=out, stderr=out, start_new_session=True)
            try:
                # The restart resumes every partition from the checkpoints the kill left, not from the start.
                expected = {p: s.next_offset for p, s in saved.items() if s.next_offset}
                started = f"ingesting {PARTITIONS} partitions" + (
                    f", resumed from checkpoints at {expected}" if expected else "\n"
                )
                wait_for("the restart", _logged(log, started), 30, 0.1)
                if round_ < KILLS - 1:
                    time.sleep(chance.uniform(0.1, 0.8))  # the subject: a random point of the batch or real-time phase
                else:  # the last kill in the real-time phase for sure (its progress counts nearline writes)
                    wait_for("the real-time phase", _logged(log, "nearline writes"), 60, 0.1)
            finally:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
            saved = _checkpoints(file, topic)
            covered = _covered(env, topic, saved, schema)
            assert _rows(file, store, 1) == covered, f"round {round_}: the table is not what its checkpoints cover"
            print(f"round {round_}: killed with {len(covered)} rows; checkpoints {_offsets(saved)}")
        # Ctrl-C stops a client cleanly: it commits and exits 0.
        with (tmp_path / "stopped.log").open("w") as out:
            process = subprocess.Popen(argv, env=env.env, stdout=out, stderr=out, start_new_session=True)
        try:
            wait_for(
                "the client starting", holds(lambda: "ingesting" in (tmp_path / "stopped.log").read_text()), 30, 0.1
            )
            os.killpg(process.pid, signal.SIGINT)
            assert process.wait(timeout=60) == 0, (tmp_path / "stopped.log").read_text()
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
        assert "stopped (checkpoints committed)" in (tmp_path / "stopped.log").read_text()
        saved = _checkpoints(file, topic)
    finally:
        writes.stop()
    assert any(s.end_of_push for s in saved.values()), "no kill reached the real-time phase"

    # A last restart catches up with every write: the table equals the oracle.
    client = DaVinciClient(store, REGION, tmp_path, DuckDBRecordTransformer(file), config=env.config)
    client.start(timeout=60)
    try:
        assert client.status()["versions"][1]["resumed_from"] == {p: s.next_offset for p, s in saved.items()}
        want = {k: v for k, v in oracle.items() if v is not None}

        def equal() -> Any:
            rows = client.sql(f'SELECT key, name, age, score FROM "{store}"')
            got = {k: {"name": n, "age": a, "score": s} for k, n, a, s in rows}
            return got == want or f"{len(set(got) ^ set(want))} keys differ"

        wait_for("the table equal to every write", holds(equal), 60, 0.1)
    finally:
        client.close()
    print(f"{writes.count} nearline writes, {KILLS} kills")


def _offsets(saved: dict[int, IngestionCheckpoint]) -> str:
    return ", ".join(
        f"p{p}: vt {s.next_offset}"
        + (f" rt {sum(s.real_time.offsets.values())}" if s.end_of_push and s.real_time is not None else "")
        for p, s in sorted(saved.items())
    )


def _logged(log: Path, text: str) -> Callable[[], bool | NotYet]:
    """A check for `wait_for`: True once `log` says `text`, else `NotYet` with the log's last lines."""

    def check() -> bool | NotYet:
        content = log.read_text()
        return True if text in content else NotYet(content[-300:])

    return check
