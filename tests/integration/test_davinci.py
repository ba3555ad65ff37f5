"""The Da Vinci client against a real broker and region servers, its copy in DuckDB: a push, nearline writes and
deletes reach the table; a new version is ingested while the rollout holds the region's Da Vinci swap for it, the
view follows the swap and the retired table is dropped; a restart resumes from the checkpoints in the DuckDB file.
A transformer of the user's own keeps the checkpoints in a store of its own (seed 002's `getStorageMetadataService`)."""

from __future__ import annotations

import base64
import dataclasses
import json
import logging
import signal
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib import error as urlerror
from urllib import request as urlrequest

import duckdb
import pytest

from tests.support.da_vinci import heartbeating_instance
from tests.support.ingestion import read_checkpoint
from tests.support.jobs import RecordsJob
from tests.support.platform import PlatformEnv
from tests.support.reads import NotYet, holds, wait_for
from tests.support.sandbox import free_ports
from venice_core.controller import da_vinci, stores, versions
from venice_core.davinci import DaVinciClient, DuckDBRecordTransformer
from venice_core.davinci.client import RegionServerUnreachable
from venice_core.davinci.columns import SchemaNotStorable
from venice_core.davinci.duckdb_store import (
    DuckDBCheckpointStore,
    DuckDBPartitionStore,
    DuckDBVersionTable,
    RecordTransformer,
)
from venice_core.errors import ConfigError, RolloutStopped, StoreNotFound, VeniceError
from venice_core.model.status import VersionStatus
from venice_core.nearline.writer import OnlineWriter
from venice_core.protocol import serde
from venice_core.protocol.partitioner import partition_for
from venice_core.storage.checkpoint import CheckpointStore, PubSubTopicPartition
from venice_core.storage.ingestion_checkpoint import IngestionCheckpoint

PARTITIONS = 2
VALUE = json.loads((Path(__file__).parents[2] / "examples" / "schemas" / "user_value_v1.avsc").read_text())


def _value(i: int, name: str = "") -> dict[str, Any]:
    return {"name": name or f"n{i}", "age": i % 90, "score": float(i)}


def _table(client: DaVinciClient, relation: str) -> dict[str, dict[str, Any]]:
    rows = client.sql(f'SELECT key, name, age, score FROM "{relation}"')
    return {key: {"name": name, "age": age, "score": score} for key, name, age, score in rows}


def _equals(client: DaVinciClient, expected: dict[str, Any]) -> Callable[[], bool | NotYet]:
    want = {k: v for k, v in expected.items() if v is not None}

    def check() -> bool | NotYet:
        got = _table(client, client.store)
        if got == want:
            return True
        diff = sorted(k for k in set(got) | set(want) if got.get(k) != want.get(k))
        return NotYet(f"{len(diff)} keys differ, e.g. {[(k, got.get(k), want.get(k)) for k in diff[:2]]}")

    return check


def test_push_nearline_writes_swaps_and_restart_in_duckdb(platform_env: PlatformEnv, tmp_path: Path) -> None:
    env = platform_env
    store = env.create_user_store("dvc", PARTITIONS)
    stores.update_store(env.meta, env.config, store, hybrid_rewind_seconds=3600, hybrid_offset_lag_threshold=0)
    oracle: dict[str, Any] = {f"b{i}": _value(i) for i in range(200)}
    assert env.push(store, RecordsJob(dict(oracle))) == 1
    file = tmp_path / "client.duckdb"

    client = DaVinciClient(store, "dc-1", tmp_path, DuckDBRecordTransformer(file), config=env.config)
    client.start(timeout=60)
    try:
        assert client.serving == 1
        assert _table(client, store) == oracle
        assert client.get("b7") == _value(7)
        assert client.get("absent") is None

        # Nearline writes from two regions and deletes reach the client's table.
        writers = {r: OnlineWriter(store, r, config=env.config, meta=env.meta) for r in ("dc-0", "dc-2")}
        try:
            writers["dc-0"].put("b1", _value(1, "nearline"))
            writers["dc-2"].put("new", _value(500, "from-dc-2"))
            writers["dc-0"].delete("b2")
            writers["dc-2"].put("k", _value(3, "older"), timestamp=1_000)
            writers["dc-0"].put("k", _value(3, "newer"), timestamp=2_000)
            for w in writers.values():
                w.flush()
        finally:
            for w in writers.values():
                w.close()
        oracle.update({"b1": _value(1, "nearline"), "new": _value(500, "from-dc-2"), "b2": None})
        oracle["k"] = _value(3, "newer")
        wait_for("nearline writes and deletes in the DuckDB table", _equals(client, oracle), 30, 0.1)

        # A new version: the rollout opens dc-1's Da Vinci gate, and once dc-1's servers have ingested it, lets the
        # region's clients swap and waits for this one to serve it before dc-1's servers swap (VIP-4: the Da Vinci
        # clients serve first). The retired table is kept until the servers swap too, then dropped.
        batch2 = {f"b{i}": _value(i + 1000) for i in range(150)}
        for key in [k for k in oracle if k.startswith("b")]:
            del oracle[key]
        # The nearline writes replayed into v2 (all within the rewind) win over its batch data.
        oracle.update({**batch2, "b1": _value(1, "nearline"), "b2": None})
        served_at_server_swap: list[int] = []

        def progress(line: str) -> None:
            if line.startswith("swapped dc-1 "):
                served_at_server_swap.append(client.serving)

        assert env.push(store, RecordsJob(batch2), progress=progress) == 2
        assert served_at_server_swap == [2]  # the client served v2 before dc-1's servers did
        wait_for("v2's batch data and the replayed nearline writes", _equals(client, oracle), 30, 0.1)

        def v1_dropped() -> Any:
            tables = {r[0] for r in client.sql("SELECT table_name FROM duckdb_tables()")}
            return (f"{store}_v2" in tables and f"{store}_v1" not in tables) or sorted(tables)

        wait_for("v1's table dropped once dc-1's servers serve v2", holds(v1_dropped), 30, 0.1)
        instance = next(i for i in da_vinci.instances(env.meta, store) if i["instance"] == client.instance_id)
        assert (instance["version"], instance["status"], instance["live"]) == (2, "COMPLETED", True)
    finally:
        client.close()
    assert da_vinci.instances(env.meta, store) == []  # a clean stop leaves the registry at once

    # The checkpoints are in the DuckDB file; a restart resumes every partition from them, serving at once.
    with duckdb.connect(str(file)) as con:
        topic = env.config.region("dc-1").version_topic(store, 2)
        saved = {
            p: IngestionCheckpoint.decode(DuckDBCheckpointStore(con).get(PubSubTopicPartition(topic, p))).next_offset
            for p in range(PARTITIONS)
        }
    assert all(offset > 0 for offset in saved.values())
    restarted = DaVinciClient(store, "dc-1", tmp_path, DuckDBRecordTransformer(file), config=env.config)
    restarted.start(timeout=10)
    try:
        assert restarted.serving == 2
        assert restarted.status()["versions"][2]["resumed_from"] == saved
        assert _table(restarted, store) == {k: v for k, v in oracle.items() if v is not None}
    finally:
        restarted.close()


def test_bad_input_is_one_clear_error_and_creates_nothing(platform_env: PlatformEnv, tmp_path: Path) -> None:
    env = platform_env
    store = env.create_user_store("dvcbad", 1)
    env.push(store, RecordsJob({"a": _value(1)}))

    def start(name: str, base: Path, config: Any = env.config, region: str = "dc-1") -> None:
        DaVinciClient(name, region, base, DuckDBRecordTransformer(base / "c.duckdb"), config=config).start(timeout=30)

    with pytest.raises(StoreNotFound, match="nope"):
        start("nope", tmp_path / "unknown-store")
    with pytest.raises(ConfigError, match="unknown region 'dc-9'"):
        start(store, tmp_path / "unknown-region", region="dc-9")
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    with pytest.raises(ConfigError, match="base dir .* cannot be created"):
        start(store, a_file / "below")
    elsewhere = dataclasses.replace(
        env.config, server=dataclasses.replace(env.config.server, port_base=free_ports(1, block=3)[0])
    )  # nothing listens there
    with pytest.raises(RegionServerUnreachable, match="region server of dc-1 .* is unreachable"):
        start(store, tmp_path / "no-server", config=elsewhere)
    array_key = json.dumps(
        {"type": "record", "name": "K", "fields": [{"name": "ids", "type": {"type": "array", "items": "long"}}]}
    )
    odd = f"dvcodd_{uuid.uuid4().hex[:6]}"
    stores.create_store(env.meta, env.config, odd, array_key, json.dumps(VALUE), partitions=1)
    with pytest.raises(SchemaNotStorable, match="key field 'ids'"):
        start(odd, tmp_path / "array-key")
    # Nothing half-created: no folder, no DuckDB file, no instance registered.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]
    assert da_vinci.instances(env.meta, store) == [] and da_vinci.instances(env.meta, odd) == []


def test_zstd_store_decompresses_in_the_client_and_the_dictionary_endpoint(
    platform_env: PlatformEnv, tmp_path: Path
) -> None:
    env = platform_env
    store = env.create_user_store("dvczstd", PARTITIONS, compression="ZSTD")
    records = {f"z{i}": _value(i) for i in range(100)}
    env.push(store, RecordsJob(records))
    url = f"http://127.0.0.1:{env.config.server_port('dc-0')}/dictionary"
    # A ZSTD version pushed without a dictionary: the endpoint says so; unknown stores and versions are 404s too.
    for path, kind in [
        (f"{store}/1", "no-dictionary"),
        (f"{store}/9", "VersionNotHosted"),
        ("nope/1", "StoreNotFound"),
    ]:
        with pytest.raises(urlerror.HTTPError) as failure:
            urlrequest.urlopen(f"{url}/{path}", timeout=10)
        assert (failure.value.code, failure.value.headers["X-Venice-Error"]) == (404, kind)
    client = DaVinciClient(store, "dc-0", tmp_path, DuckDBRecordTransformer(tmp_path / "z.duckdb"), config=env.config)
    client.start(timeout=60)
    try:
        assert _table(client, store) == records
        assert client.get("z5") == _value(5)
    finally:
        client.close()
    # A client of one partition holds that partition's records only.
    subset = DaVinciClient(
        store, "dc-0", tmp_path / "p1", DuckDBRecordTransformer(tmp_path / "p1" / "z.duckdb"), config=env.config,
        partitions=[1],
    )  # fmt: skip
    subset.start(timeout=60)
    try:
        key_schema = serde.parse("string")
        mine = {k: v for k, v in records.items() if partition_for(serde.serialize(key_schema, k), PARTITIONS) == 1}
        assert 0 < len(mine) < len(records) and _table(subset, store) == mine
        other = next(k for k in records if k not in mine)
        with pytest.raises(ConfigError, match="does not subscribe"):
            subset.get(other)
    finally:
        subset.close()


def test_without_a_transformer_the_copy_is_rocksdb_and_a_restart_resumes(
    platform_env: PlatformEnv, tmp_path: Path
) -> None:
    env = platform_env
    store = env.create_user_store("dvcrocks", PARTITIONS)
    records = {f"r{i}": _value(i) for i in range(120)}
    env.push(store, RecordsJob(records))
    client = DaVinciClient(store, "dc-2", tmp_path, config=env.config)
    client.start(timeout=60)
    try:
        assert client.serving == 1
        assert {k: client.get(k) for k in records} == records and client.get("absent") is None
        with pytest.raises(ConfigError, match="SQL needs the DuckDB transformer"):
            client.sql("SELECT 1")
    finally:
        client.close()
    assert sorted(p.name for p in (tmp_path / f"{store}_v1").iterdir()) == [f"p{p}" for p in range(PARTITIONS)]
    restarted = DaVinciClient(store, "dc-2", tmp_path, config=env.config).start(timeout=10)
    try:
        resumed = restarted.status()["versions"][1]["resumed_from"]
        assert restarted.serving == 1 and all(offset > 0 for offset in resumed.values()), resumed
        assert restarted.get("r7") == records["r7"]
    finally:
        restarted.close()


def test_a_rollback_after_the_clients_served_ahead_returns_them_to_the_version_they_kept(
    platform_env: PlatformEnv, tmp_path: Path
) -> None:
    """dc-2's clients are let swap to version 2 right before dc-2's servers (VIP-4), and a live client that does not
    report serving it holds that swap. The real one serves version 2 meanwhile, keeping version 1, which dc-2's servers
    still serve; an operator's `venice rollout abort --rollback` then returns it to version 1 at once (the same
    ingestion of it, nothing read again) and it drops version 2."""
    env = platform_env.with_settings(tmp_path / "slow.properties", **{"davinci.swap.timeout.seconds": "600"})
    store = env.create_user_store("dvcahead", PARTITIONS)
    v1, v2 = {f"a{i}": _value(i) for i in range(40)}, {f"a{i}": _value(i, "v2") for i in range(40)}
    env.push(store, RecordsJob(v1))
    client = DaVinciClient(store, "dc-2", tmp_path / "client", config=env.config).start(timeout=60)
    ended: list[BaseException] = []

    def push() -> None:
        try:
            env.push(store, RecordsJob(v2))
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            ended.append(exc)

    pushing = threading.Thread(target=push)
    try:
        with heartbeating_instance(env.meta, store, "dc-2", "laggard"):  # never reports serving version 2
            pushing.start()
            wait_for("the client to serve version 2 ahead of dc-2's servers", lambda: client.serving == 2, timeout=120)
            assert sorted(client.status()["versions"]) == [1, 2] and env.serving(store)["dc-2"] == 1
            kept = client.local[1]
            result = env.cli("rollout", "abort", store, "--rollback")
            assert result.returncode == 0, result.stderr
            pushing.join(timeout=60)
        assert len(ended) == 1 and isinstance(ended[0], RolloutStopped), ended
        wait_for("the client to serve version 1 again", lambda: client.serving == 1, timeout=30)
        assert client.get("a3") == v1["a3"]
        wait_for("version 2 dropped", lambda: sorted(client.status()["versions"]) == [1], timeout=30)
        assert client.local[1] is kept  # the same ingestion of version 1 throughout: nothing read again
        assert env.serving(store) == {"dc-0": 1, "dc-1": 1, "dc-2": 1}
    finally:
        client.close()


class FileCheckpoints:
    """Seed 002's three calls over a JSON file of the test's own, rewritten whole at each `set`: a checkpoint store
    that outlives the client (the partitions' tasks call it from their threads)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def _states(self) -> dict[str, str]:
        return json.loads(self.path.read_text()) if self.path.exists() else {}

    def _write(self, states: dict[str, str]) -> None:
        staged = self.path.with_suffix(".tmp")
        staged.write_text(json.dumps(states))
        staged.replace(self.path)

    def get(self, topic_partition: PubSubTopicPartition) -> bytes | None:
        with self._lock:
            state = self._states().get(str(topic_partition))
        return None if state is None else base64.b64decode(state)

    def set(self, topic_partition: PubSubTopicPartition, state: bytes) -> None:
        with self._lock:
            self._write({**self._states(), str(topic_partition): base64.b64encode(state).decode()})

    def delete(self, topic_partition: PubSubTopicPartition) -> None:
        with self._lock:
            states = self._states()
            states.pop(str(topic_partition), None)
            self._write(states)

    def decoded(self) -> dict[str, IngestionCheckpoint]:
        return {tp: IngestionCheckpoint.decode(base64.b64decode(s)) for tp, s in self._states().items()}


class FileCheckpointTransformer(RecordTransformer):
    """A transformer of the user's own: its records in the client's RocksDB, its checkpoints in its own file."""

    def __init__(self, path: Path) -> None:
        self.checkpoints = FileCheckpoints(path)

    def get_storage_metadata_service(self) -> CheckpointStore | None:
        return self.checkpoints


def test_a_transformer_of_the_users_own_keeps_the_checkpoints_and_a_restart_resumes_from_them(
    platform_env: PlatformEnv, tmp_path: Path
) -> None:
    """Ingestion asks the transformer where checkpoints go: every partition's state is in its file and none in
    RocksDB; a restart (a new transformer on the same file) resumes each partition from those states, and nearline
    writes made while it was down are applied once each, none lost. A transformer answering None gets RocksDB's."""
    env = platform_env
    store = env.create_user_store("dvcown", PARTITIONS)
    stores.update_store(env.meta, env.config, store, hybrid_rewind_seconds=3600, hybrid_offset_lag_threshold=0)
    expected: dict[str, Any] = {f"o{i}": _value(i) for i in range(100)}
    assert env.push(store, RecordsJob(dict(expected))) == 1
    file, data = tmp_path / "checkpoints.json", tmp_path / "data"
    topic = env.config.region("dc-1").version_topic(store, 1)
    partition_dirs = [data / f"{store}_v1" / f"p{p}" for p in range(PARTITIONS)]

    def nearline(values: dict[str, Any]) -> None:
        writer = OnlineWriter(store, "dc-0", config=env.config, meta=env.meta)
        try:
            for key, value in values.items():
                writer.put(key, value)
            writer.flush()
        finally:
            writer.close()
        expected.update(values)

    def served(client: DaVinciClient) -> Any:
        got = {k: client.get(k) for k in expected}
        return got == expected or sorted(k for k in expected if got[k] != expected[k])

    client = DaVinciClient(store, "dc-1", data, FileCheckpointTransformer(file), config=env.config).start(timeout=60)
    try:
        nearline({"n1": _value(1, "first"), "n2": _value(2, "first")})
        wait_for("the batch data and the nearline writes", holds(lambda: served(client)), 30, 0.1)
    finally:
        client.close()
    saved = FileCheckpoints(file).decoded()
    assert sorted(saved) == [str(PubSubTopicPartition(topic, p)) for p in range(PARTITIONS)]
    assert all(c.end_of_push and c.real_time is not None for c in saved.values())
    assert sum(c.records for c in saved.values()) == 100
    assert sum(c.real_time.applied for c in saved.values() if c.real_time) == 2
    assert all((d / "db" / "CURRENT").exists() and read_checkpoint(d) is None for d in partition_dirs)  # data only

    nearline({"n3": _value(3, "while down"), "n1": _value(1, "while down")})
    restarted = DaVinciClient(store, "dc-1", data, FileCheckpointTransformer(file), config=env.config)
    restarted.start(timeout=30)
    try:
        resumed = restarted.status()["versions"][1]["resumed_from"]
        assert resumed == {p: saved[str(PubSubTopicPartition(topic, p))].next_offset for p in range(PARTITIONS)}
        wait_for("the writes made while the client was down", holds(lambda: served(restarted)), 30, 0.1)
    finally:
        restarted.close()
    final = FileCheckpoints(file).decoded()
    assert sum(c.real_time.applied for c in final.values() if c.real_time) == 4  # each nearline write once
    assert all(read_checkpoint(d) is None for d in partition_dirs)

    # A transformer answering None: the checkpoints are in RocksDB, beside the data.
    default = DaVinciClient(store, "dc-1", tmp_path / "default", RecordTransformer(), config=env.config)
    default.start(timeout=60)
    try:
        wait_for("the default transformer's copy", holds(lambda: served(default)), 30, 0.1)
    finally:
        default.close()
    in_rocksdb = [read_checkpoint(tmp_path / "default" / f"{store}_v1" / f"p{p}") for p in range(PARTITIONS)]
    assert all(c is not None and c.end_of_push for c in in_rocksdb), in_rocksdb
    assert FileCheckpoints(file).decoded() == final  # not touched


def test_after_an_operators_rollback_the_client_serves_the_backup_and_never_takes_the_version_back(
    platform_env: PlatformEnv, tmp_path: Path
) -> None:
    """`venice store rollback` returns the region to version 1: the client swaps back with it and drops version 2,
    which is ROLLED_BACK (its topic still there, its region gate still open) and must never be ingested again. A
    heartbeat sent after the rollback was seen comes from a sync round that saw the rolled-back version, and says
    the newest version the client holds is 1."""
    env = platform_env
    store = env.create_user_store("dvcback", PARTITIONS)
    v1, v2 = {f"a{i}": _value(i) for i in range(40)}, {f"b{i}": _value(i, "v2") for i in range(40)}
    env.push(store, RecordsJob(v1))
    env.push(store, RecordsJob(v2))
    client = DaVinciClient(store, "dc-2", tmp_path, config=env.config).start(timeout=60)
    try:
        assert client.serving == 2 and client.get("b3") == v2["b3"]
        versions.rollback_store(env.meta, store)
        assert versions.get_version(env.meta, store, 2).status == VersionStatus.ROLLED_BACK
        wait_for("the client to serve version 1 again", lambda: client.serving == 1, timeout=60)
        rolled_back_at = time.time()

        def heartbeat_after_rollback() -> dict[str, Any] | None:
            (instance,) = [i for i in da_vinci.instances(env.meta, store) if i["region"] == "dc-2"]
            sent_at = time.time() - float(instance["heartbeat_age_seconds"])
            return instance if sent_at > rolled_back_at + 0.5 else None  # (the age is rounded to 0.1 s)

        instance = wait_for("a heartbeat after the rollback", heartbeat_after_rollback, timeout=30)
        assert instance["version"] == 1 and 2 not in client.status()["versions"], (instance, client.status())
        assert client.get("a3") == v1["a3"] and client.get("b3") is None
    finally:
        client.close()


def test_reads_of_the_served_version_go_on_while_the_next_versions_key_is_built(
    platform_env: PlatformEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bulk-loaded version gets its primary key once ingested, which takes seconds on a large table: meanwhile the
    client serves the previous version's reads, and it swaps once the key is built."""
    env = platform_env
    store = env.create_user_store("dvckey", 1)
    env.push(store, RecordsJob({"a": _value(1)}))
    building, release = threading.Event(), threading.Event()
    original = DuckDBVersionTable.ensure_keyed

    def slow_key(table: DuckDBVersionTable) -> None:
        if table.version == 2 and not table.keyed:
            building.set()
            release.wait(60)
        original(table)

    monkeypatch.setattr(DuckDBVersionTable, "ensure_keyed", slow_key)
    client = DaVinciClient(store, "dc-0", tmp_path, DuckDBRecordTransformer(tmp_path / "c.duckdb"), config=env.config)
    client.start(timeout=60)
    pushed: list[int] = []
    pusher = threading.Thread(target=lambda: pushed.append(env.push(store, RecordsJob({"a": _value(2)}))))
    pusher.start()
    try:
        assert building.wait(60), "v2's key was never built"
        read: list[Any] = []
        reader = threading.Thread(target=lambda: read.append(client.get("a")), daemon=True)
        reader.start()
        reader.join(15)
        assert read == [_value(1)], "a read of v1 waited for v2's key"
    finally:
        release.set()
        pusher.join(120)
    try:
        assert pushed == [2]
        wait_for("the client swapping to v2", holds(lambda: client.serving == 2 or client.status()), 30, 0.1)
        assert client.get("a") == _value(2)
    finally:
        client.close()


class _Commits:
    """The partitions whose commits the client has applied, for a test to act once some have."""

    def __init__(self) -> None:
        self.partitions: set[int] = set()
        self.changed = threading.Condition()

    def add(self, partition: int) -> None:
        with self.changed:
            self.partitions.add(partition)
            self.changed.notify_all()

    def wait(self, partitions: list[int] | None = None, timeout: float = 30.0) -> bool:
        """Until a commit of any partition (of one of `partitions`) is applied."""
        with self.changed:
            return self.changed.wait_for(
                lambda: bool(self.partitions if partitions is None else self.partitions & set(partitions)), timeout
            )


def _slowed_commits(monkeypatch: pytest.MonkeyPatch, seconds: float) -> _Commits:
    """A commit per consumed batch, each held `seconds`, so a test can act part-way."""
    original_commit = DuckDBPartitionStore.commit
    commits = _Commits()

    def slow_commit(self: DuckDBPartitionStore, batch: Any, checkpoint: IngestionCheckpoint) -> None:
        time.sleep(seconds)
        original_commit(self, batch, checkpoint)
        commits.add(self.topic_partition.partition)

    monkeypatch.setattr(DuckDBPartitionStore, "commit_every_messages", 100)
    monkeypatch.setattr(DuckDBPartitionStore, "commit", slow_commit)
    return commits


def test_a_batch_phase_in_worker_processes_stops_resumes_and_leaves_no_process(
    platform_env: PlatformEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ingest_worker`: the batch phase in two worker processes, each commit applied by the client's process. Slowed
    (a commit per consumed batch, each held a second) so the client is closed part-way: the workers commit what they
    have and exit; the next client resumes from those checkpoints, and then runs without workers once END_OF_PUSH is
    in."""
    env = platform_env
    store = env.create_user_store("dvwork", PARTITIONS)
    oracle: dict[str, Any] = {f"w{i:05d}": _value(i) for i in range(30_000)}
    assert env.push(store, RecordsJob(dict(oracle))) == 1
    file = tmp_path / "client.duckdb"
    commits = _slowed_commits(monkeypatch, 1.0)
    client = DaVinciClient(
        store, "dc-1", tmp_path, DuckDBRecordTransformer(file), config=env.config, worker_min_records=0
    )
    client.ingest_workers = 2
    client.start(wait=False)
    try:
        wait_for(
            "two workers", holds(lambda: client.local.get(1) is not None and len(client.local[1].workers) == 2), 90, 0.1
        )
        workers = list(client.local[1].workers)
        # A commit of every partition: each worker has set its SIGTERM handler (a worker still starting when the
        # client closes dies of the signal, which the client takes as a kill; that case is the kill test's).
        assert all(commits.wait([partition]) for partition in range(PARTITIONS))
    finally:
        client.close()
    assert all(worker.process.poll() == 0 for worker in workers), [w.process.returncode for w in workers]
    with duckdb.connect(str(file), read_only=True) as con:
        committed = con.execute(f'SELECT count(*) FROM "{store}_v1"').fetchone()[0]
    assert 0 < committed < len(oracle)

    monkeypatch.undo()
    restarted = DaVinciClient(store, "dc-1", tmp_path, DuckDBRecordTransformer(file), config=env.config)
    restarted.worker_min_records = 0
    restarted.start(timeout=60)
    try:
        resumed = restarted.status()["versions"][1]["resumed_from"]
        assert sum(resumed.values()) > 0, resumed  # from the workers' checkpoints
        assert _table(restarted, store) == oracle
        workers = list(restarted.local[1].workers)
        # Each worker said its partitions were done before it exited: it may still be on its way out (a loaded machine).
        assert workers and all(worker.process.wait(timeout=30) == 0 for worker in workers)
    finally:
        restarted.close()
    again = DaVinciClient(store, "dc-1", tmp_path, DuckDBRecordTransformer(file), config=env.config)
    again.worker_min_records = 0
    again.start(timeout=60)
    try:
        assert again.local[1].workers == []  # every partition past END_OF_PUSH: nothing left for a worker
        assert _table(again, store) == oracle
    finally:
        again.close()


def test_a_commit_the_client_cannot_apply_fails_the_workers_partition_naming_it(
    platform_env: PlatformEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = platform_env
    store = env.create_user_store("dvworkerr", PARTITIONS)
    assert env.push(store, RecordsJob({f"e{i}": _value(i) for i in range(50)})) == 1

    def refuse(self: DuckDBPartitionStore, batch: Any, checkpoint: IngestionCheckpoint) -> None:
        raise SchemaNotStorable("column 'age' is INTEGER, the new schema makes it VARCHAR")

    monkeypatch.setattr(DuckDBPartitionStore, "commit", refuse)
    client = DaVinciClient(
        store, "dc-1", tmp_path, DuckDBRecordTransformer(tmp_path / "e.duckdb"), config=env.config, worker_min_records=0
    )
    try:
        with pytest.raises(VeniceError, match="column 'age' is INTEGER"):
            client.start(timeout=60)
        workers = [w for local in client.local.values() for w in local.workers]
        assert workers
    finally:
        client.close()
    assert all(worker.process.poll() is not None for worker in workers)


def _two_worker_client(
    env: PlatformEnv, store: str, oracle: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> DaVinciClient:
    """A client ingesting `oracle`, pushed as version 1 of `store`, in two worker processes (commits slowed),
    returned once its first worker has committed part of its partition: a signal to it then leaves a checkpoint."""
    assert env.push(store, RecordsJob(dict(oracle))) == 1
    commits = _slowed_commits(monkeypatch, 0.5)
    client = DaVinciClient(
        store, "dc-1", tmp_path, DuckDBRecordTransformer(tmp_path / "c.duckdb"), config=env.config, worker_min_records=0
    )
    client.ingest_workers = 2
    client.start(wait=False)
    try:
        wait_for(
            "two workers", holds(lambda: client.local.get(1) is not None and len(client.local[1].workers) == 2), 90, 0.1
        )
        assert commits.wait(client.local[1].workers[0].partitions)
    except BaseException:
        client.close()
        raise
    return client


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_a_worker_stopped_from_outside_leaves_its_partitions_to_the_client(
    platform_env: PlatformEnv,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    stop: signal.Signals,
) -> None:
    """A worker SIGTERMed by someone else (an operator, a supervisor) commits what it has and exits; one SIGKILLed
    (the OOM killer) leaves what it last committed. Either way the client's own tasks go on from the checkpoints in
    the file and the version is served whole: nothing lost, nothing twice."""
    caplog.set_level(logging.INFO, logger="venice_core.ingestion.task")
    env = platform_env
    store = env.create_user_store(f"dvwork{stop.name[3:].lower()}", PARTITIONS)
    oracle: dict[str, Any] = {f"t{i:05d}": _value(i) for i in range(30_000)}
    client = _two_worker_client(env, store, oracle, tmp_path, monkeypatch)
    try:
        worker = client.local[1].workers[0]
        worker.process.send_signal(stop)
        assert worker.process.wait(30) == (0 if stop is signal.SIGTERM else -signal.SIGKILL)
        client.wait_until_serving(120)
        assert _table(client, store) == oracle
        assert client.sql(f'SELECT count(*) FROM "{store}"') == [(len(oracle),)]
    finally:
        client.close()
    resumed = [r.getMessage() for r in caplog.records if r.getMessage().startswith("resuming ")]
    assert any(f"[{worker.partitions[0]}] from its checkpoint at offset" in line for line in resumed), resumed
    # No row applied twice (ensure_keyed would have kept one and said so).
    assert "came in more than one partition" not in caplog.text
    killed = "was killed (exit code -9) before they were done: the client's own tasks go on" in caplog.text
    assert killed == (stop is signal.SIGKILL)


def test_a_worker_that_crashes_fails_the_ingestion_and_names_its_exit_code(
    platform_env: PlatformEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker that dies of its own fault (a native crash: SIGSEGV) is not taken over by the client's own tasks:
    the same input would crash the process that serves reads. Its partitions fail, naming the exit code; the
    version is not swapped in, and closing the client leaves no worker behind."""
    env = platform_env
    store = env.create_user_store("dvcrash", PARTITIONS)
    client = _two_worker_client(env, store, {f"c{i:05d}": _value(i) for i in range(30_000)}, tmp_path, monkeypatch)
    workers = list(client.local[1].workers)
    try:
        workers[0].process.send_signal(signal.SIGSEGV)
        assert workers[0].process.wait(30) == -signal.SIGSEGV
        with pytest.raises(VeniceError, match=r"its ingestion worker exited with code -11"):
            client.wait_until_serving(120)
        assert client.serving == 0
    finally:
        client.close()
    assert all(worker.process.poll() is not None for worker in workers)
