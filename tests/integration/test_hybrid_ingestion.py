"""Hybrid stores against a real broker and three region servers: nearline writes from any region reach every
region, conflicts converge by write timestamp, deletes hold against older writes, a new version replays the
writes made since (END_OF_PUSH minus the rewind), and a region server killed mid-stream resumes exactly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.ingestion import read_checkpoint
from tests.support.jobs import RecordsJob
from tests.support.platform import PlatformEnv
from tests.support.reads import holds, reads_equal, wait_for
from tests.support.topics import read_partition
from venice_core.controller import stores
from venice_core.embedded import servers
from venice_core.nearline.writer import OnlineWriter
from venice_core.protocol import serde
from venice_core.protocol.envelope import MessageType, decode

PARTITIONS = 2


def _value(i: int, name: str = "") -> dict[str, Any]:
    return {"name": name or f"n{i}", "age": i % 90, "score": float(i)}


def _hybrid_store(env: PlatformEnv, prefix: str, rewind_seconds: int = 3600) -> str:
    store = env.create_user_store(prefix, PARTITIONS)
    stores.update_store(
        env.meta, env.config, store, hybrid_rewind_seconds=rewind_seconds, hybrid_offset_lag_threshold=0
    )
    return store


def test_nearline_writes_reach_every_region_and_conflicts_converge(platform_env: PlatformEnv) -> None:
    env = platform_env
    regions = env.config.region_names
    store = _hybrid_store(env, "hybrid")
    batch = {f"k{i}": _value(i) for i in range(20)}
    env.push(store, RecordsJob(batch))
    expected: dict[str, Any] = dict(batch)

    writers = {r: OnlineWriter(store, r, config=env.config, meta=env.meta) for r in regions}
    try:
        # A nearline write beats batch data (stamped 0), whichever region it comes from.
        writers["dc-0"].put("k1", _value(1, "nearline-dc-0"))
        writers["dc-2"].put("new", _value(100, "from-dc-2"))
        expected["k1"], expected["new"] = _value(1, "nearline-dc-0"), _value(100, "from-dc-2")

        # Two regions write one key: the later timestamp wins, in whatever order the writes are sent.
        writers["dc-0"].put("k2", _value(2, "older"), timestamp=1_000_000)
        writers["dc-1"].put("k2", _value(2, "newer"), timestamp=2_000_000)
        writers["dc-1"].put("k3", _value(3, "newer"), timestamp=2_000_000)
        writers["dc-0"].put("k3", _value(3, "older"), timestamp=1_000_000)
        expected["k2"], expected["k3"] = _value(2, "newer"), _value(3, "newer")
        # Equal timestamps: the larger region name wins, in both orders.
        writers["dc-2"].put("k4", _value(4, "dc-2"), timestamp=5_000_000)
        writers["dc-0"].put("k4", _value(4, "dc-0"), timestamp=5_000_000)
        writers["dc-0"].put("k5", _value(5, "dc-0"), timestamp=5_000_000)
        writers["dc-2"].put("k5", _value(5, "dc-2"), timestamp=5_000_000)
        expected["k4"], expected["k5"] = _value(4, "dc-2"), _value(5, "dc-2")
        # A delete, then an older put from another region: the key stays deleted (its tombstone is newer).
        writers["dc-1"].delete("k6", timestamp=9_000_000)
        writers["dc-2"].put("k6", _value(6, "resurrected?"), timestamp=8_000_000)
        expected["k6"] = None
        for writer in writers.values():
            writer.flush()
        wait_for("every region converging to the same values", reads_equal(env, store, expected, regions), 90, 0.1)
    finally:
        for writer in writers.values():
            writer.close()


def test_new_version_replays_writes_since_rewind_and_a_killed_server_resumes_exactly(
    platform_env: PlatformEnv,
) -> None:
    env = platform_env
    config, regions = env.config, env.config.region_names
    store = _hybrid_store(env, "replay")
    env.push(store, RecordsJob({f"b{i}": _value(i) for i in range(50)}))
    oracle: dict[str, Any] = {f"b{i}": _value(i) for i in range(50)}

    writer = OnlineWriter(store, "dc-0", config=config, meta=env.meta)
    count = 0

    def write(n: int) -> None:
        nonlocal count
        for _ in range(n):
            key = f"rt{count % 300}"
            oracle[key] = _value(count, f"w{count}")
            writer.put(key, oracle[key])
            count += 1
        writer.flush()

    try:
        write(200)
        # A full push while nearline writes go on: the new version holds its batch data plus every write since
        # (its END_OF_PUSH minus the rewind), i.e. all of them here.
        batch2 = {f"b{i}": _value(i + 1000) for i in range(50)}
        oracle.update(batch2)
        write(100)
        version = env.push(store, RecordsJob(batch2))
        write(100)
        assert version == 2
        assert env.serving(store) == dict.fromkeys(regions, 2)
        wait_for(
            "version 2 holding batch data and every nearline write", reads_equal(env, store, oracle, regions), 90, 0.1
        )

        # dc-1 killed during real-time ingestion, several times: it resumes from its checkpoint with exactly the
        # writes (none lost; none applied twice: every write here wins, so the applied count is the write count).
        dc1 = config.data_dir / "regions" / "dc-1" / f"{store}_v2"
        applied_before = _applied(dc1)
        for _round in range(3):
            applied = _applied(dc1)
            write(150)
            wait_for(
                "dc-1 checkpointing some of the writes", holds(lambda applied=applied: _applied(dc1) > applied), 90, 0.1
            )
            servers.process(config, "dc-1").kill()
            write(150)
            servers.start(config, "dc-1")
        write(50)
        wait_for("dc-1 resuming with exactly the writes", reads_equal(env, store, oracle, regions), 120, 0.1)

        def applied_once() -> bool | int:
            applied = _applied(dc1) - applied_before
            return applied == 3 * 300 + 50 or applied

        wait_for("dc-1's count of applied writes matching the writes made", holds(applied_once), 90, 0.1)

        # Every region's version topic holds what the version holds, nearline writes with their timestamps (a
        # repush reads it back). A leader applies a write to its storage as it produces it there, and the produce is
        # acknowledged later (by its next commit at the latest): on a loaded machine the last ones may still be on
        # their way when the reads already return them.
        def version_topics_hold_every_write() -> bool | dict[str, int]:
            behind = {}
            for region in regions:
                contents = _version_topic_contents(env, store, region, 2)
                assert all(ts > 0 for k, (_v, ts) in contents.items() if k.startswith("rt"))
                differing = sum(1 for k, v in oracle.items() if k not in contents or contents[k][0] != v)
                if differing or len(contents) != len(oracle):
                    behind[region] = differing
            return behind if behind else True

        wait_for("every region's version topic holding every write", holds(version_topics_hold_every_write), 60, 1)
    finally:
        writer.close()


def _version_topic_contents(env: PlatformEnv, store: str, region: str, number: int) -> dict[str, tuple[Any, int]]:
    """A version topic read back: each key's last value (None once deleted) and write timestamp, by offset."""
    info = stores.describe_store(env.meta, store)
    key_schema = serde.parse(info.key_schema)
    value_schemas = {entry.id: serde.parse(entry.schema) for entry in info.value_schemas}
    contents: dict[str, tuple[Any, int]] = {}
    topic = env.config.region(region).version_topic(store, number)
    for partition in range(PARTITIONS):
        for kafka_key, kafka_value in read_partition(env.config.kafka.bootstrap, topic, partition):
            message = decode(kafka_key, kafka_value)
            if message.type is MessageType.PUT:
                value = serde.deserialize(value_schemas[message.schema_id], message.value)
                contents[serde.deserialize(key_schema, message.key)] = (value, message.producer.timestamp_ms)
            elif message.type is MessageType.DELETE:
                contents[serde.deserialize(key_schema, message.key)] = (None, message.producer.timestamp_ms)
    return contents


def _applied(version_dir: Path) -> int:
    checkpoints = [read_checkpoint(version_dir / f"p{p}") for p in range(PARTITIONS)]
    return sum(c.real_time.applied for c in checkpoints if c is not None and c.real_time is not None)
