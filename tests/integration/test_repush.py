"""Repush against a real broker, three region servers and the repush job's own code on the session's SparkSession:
compaction against an oracle (duplicates a retried writer left, large chunked values, several offset ranges,
the combiner), partition count 4 to 8 and compression NO_OP to ZSTD and back with reads intact; a hybrid store
repaired from dc-1 after a region lost its storage, tombstones kept, TTL; and the CLI's refusals."""

from __future__ import annotations

import json
import shutil
import time
from typing import Any

from tests.support.jobs import RecordsJob
from tests.support.platform import PlatformEnv
from tests.support.reads import reads_equal, wait_for
from tests.support.topics import read_partition
from venice_core.config import ClusterConfig
from venice_core.controller import stores, versions
from venice_core.controller.store_description import StoreDescription, VersionDescription
from venice_core.controller.stores import describe_store
from venice_core.embedded import servers
from venice_core.nearline.writer import OnlineWriter
from venice_core.protocol import serde
from venice_core.protocol.compression import CompressionStrategy
from venice_core.protocol.div import deterministic_guid
from venice_core.protocol.envelope import decode
from venice_core.protocol.partitioner import partition_for
from venice_core.pubsub import admin
from venice_core.pubsub.writer import VersionTopicWriter
from venice_core.rollout import local
from venice_core.spark.specs.job_result import JobResult
from venice_core.spark.submit import PushJobRequest

LARGE = 2 * 1024 * 1024  # past the 900 KB chunk size: three chunks and a manifest


def _value(i: int, name: str = "") -> dict[str, Any]:
    return {"name": name or f"n{i}", "age": i % 90, "score": float(i)}


class RetriedRecordsJob(RecordsJob):
    """RecordsJob whose every partition is written twice under the same GUID, as a retried Spark task does: a
    first attempt writes half the partition and dies (no END_OF_SEGMENT), the retry writes it all. The version
    topic holds the first half twice; ingestion skips the copies as DIV duplicates, a repush must too."""

    def __call__(self, config: ClusterConfig, request: PushJobRequest) -> JobResult:
        info = describe_store(self.meta(config), request.store)
        partitions, schema = _version_in(info, request.number).partition_count, info.value_schemas[-1]
        key_schema, value_schema = serde.parse(info.key_schema), serde.parse(schema.schema)
        rows: dict[int, list[tuple[bytes, bytes]]] = {p: [] for p in range(partitions)}
        for key, value in self.records.items():
            key_bytes = serde.serialize(key_schema, key)
            rows[partition_for(key_bytes, partitions)].append((key_bytes, serde.serialize(value_schema, value)))
        source = config.region(config.source_region)
        topic = source.version_topic(request.store, request.number)
        for partition, partition_rows in rows.items():
            guid = deterministic_guid(request.push_job_id, request.number, partition)
            first = VersionTopicWriter(source.kafka_bootstrap, topic, partitions, guid)
            first.start_segment(partition)
            for key_bytes, value_bytes in sorted(partition_rows)[: len(partition_rows) // 2 + 1]:
                first.put(key_bytes, value_bytes, schema.id, partition=partition)
            first.flush()
        return super().__call__(config, request)

    @staticmethod
    def meta(config: ClusterConfig) -> Any:
        from venice_core.meta import MetadataStore

        return MetadataStore(config.metadata_db_url)


def _version_in(info: StoreDescription, number: int) -> VersionDescription:
    version = info.version(number)
    assert version is not None, f"no version {number}"
    return version


def _version(env: PlatformEnv, store: str, number: int) -> VersionDescription:
    return _version_in(describe_store(env.meta, store), number)


def test_repush_compacts_repartitions_and_recompresses(platform_env: PlatformEnv, spark_job: Any) -> None:
    env = platform_env
    store = env.create_user_store("repush", 4)
    records = {f"k{i:03d}": _value(i) for i in range(240)}
    for i in range(3):  # large values: chunked, their chunks written twice too
        records[f"big{i}"] = _value(i, chr(ord("a") + i) * LARGE)
    assert env.push(store, RetriedRecordsJob(records)) == 1
    wait_for("version 1 served", reads_equal(env, store, records), 90, 0.1)

    # NO_OP -> ZSTD, the partition count kept: the map-only plan (each task compacts a whole source partition).
    stores.update_store(env.meta, env.config, store, compression="ZSTD")
    lines: list[str] = []
    assert local.repush(env.config, env.meta, store, {}, progress=lines.append, run_job=spark_job) == 2
    v2 = _version(env, store, 2)
    assert (v2.partition_count, v2.compression) == (4, CompressionStrategy.ZSTD)
    assert v2.push_job_id is not None and v2.push_job_id.startswith(f"venice_re_push_{store}-")
    assert env.serving(store) == dict.fromkeys(env.config.region_names, 2)
    wait_for("version 2 (ZSTD) holding every record", reads_equal(env, store, records), 90, 0.1)
    assert any(f"(map-only) and wrote {len(records)} records and 0 tombstones" in line for line in lines), lines

    # 4 -> 8 partitions and ZSTD -> NO_OP, from dc-2's copy, read in ranges of at most 25 records, the combiner on:
    # the shuffled plan.
    stores.update_store(env.meta, env.config, store, partitions=8, compression="NO_OP")
    lines.clear()
    confs = {"kafka.input.max.records.per.mapper": "25", "kafka.input.combiner.enabled": "true"}
    confs["kafka.input.fabric"] = "dc-2"
    assert local.repush(env.config, env.meta, store, confs, progress=lines.append, run_job=spark_job) == 3
    assert (_version(env, store, 3).compression, _version(env, store, 3).partition_count) == (
        CompressionStrategy.NO_OP,
        8,
    )
    assert admin.partition_count(env.config.kafka.bootstrap, env.config.region("dc-0").version_topic(store, 3)) == 8
    assert any("from version 2 in dc-2" in line for line in lines), lines
    assert any(f"(shuffled) and wrote {len(records)} records" in line for line in lines), lines
    wait_for("version 3 (8 partitions, NO_OP) holding every record", reads_equal(env, store, records), 90, 0.1)


def test_a_partition_found_not_plain_past_what_was_copied_is_amended_and_served_everywhere(
    platform_env: PlatformEnv, spark_job: Any
) -> None:
    """The map-only repush copies a partition while it reads it, for as long as it is plain. A retried writer left
    more plain records than one consumed batch (10,000) before its retry wrote them again: the copy has written some
    when the duplicates show the partition is not plain. The task says START_OF_PUSH again in the partition, unsorted,
    and writes only the keys the copy had not reached (not the duplicates again); every region ingests the copied
    part as SST files and the rest as plain writes, and serves exactly the records, the count END_OF_PUSH carries
    checked by each."""
    env = platform_env
    store = env.create_user_store("rpamend", 1)
    records = {f"k{i:05d}": _value(i) for i in range(24_000)}
    assert env.push(store, RetriedRecordsJob(records)) == 1
    lines: list[str] = []
    assert local.repush(env.config, env.meta, store, {}, progress=lines.append, run_job=spark_job) == 2
    assert any(f"(map-only) and wrote {len(records)} records" in line for line in lines), lines
    topic = env.config.region("dc-0").version_topic(store, 2)
    said = [decode(key, value).control for key, value in read_partition(env.config.kafka.bootstrap, topic)]
    sorted_flags = [body["sorted"] for body in said if body is not None and "sorted" in body]
    assert sorted_flags == [True, False], sorted_flags  # the push's START_OF_PUSH, then the task's
    sample = {key: records[key] for key in list(records)[::97] + ["k00000", "k23999"]}
    wait_for("version 2 served in every region", reads_equal(env, store, sample), 90, 0.1)


def test_hybrid_repush_repairs_a_region_keeps_tombstones_and_expires_by_ttl(
    platform_env: PlatformEnv, spark_job: Any
) -> None:
    env = platform_env
    config = env.config
    store = env.create_user_store("rphy", 2)
    stores.update_store(env.meta, config, store, hybrid_rewind_seconds=3600, hybrid_offset_lag_threshold=0)
    oracle: dict[str, Any] = {f"b{i}": _value(i) for i in range(30)}
    oracle["bigbatch"] = _value(0, "B" * LARGE)
    env.push(store, RecordsJob(dict(oracle)))

    now = int(time.time() * 1000)
    old, cutoff = now - 2 * 86_400_000, now - 86_400_000
    writers = {r: OnlineWriter(store, r, config=config, meta=env.meta) for r in ("dc-0", "dc-1")}
    try:
        for i in range(10):  # written two days ago (logical time): TTL victims
            writers["dc-0"].put(f"o{i}", _value(i, "old"), timestamp=old + i)
            oracle[f"o{i}"] = _value(i, "old")
        for i in range(20):  # recent, from both regions, overwriting batch keys too
            writers[("dc-0", "dc-1")[i % 2]].put(f"n{i}", _value(i, "new"), timestamp=now + i)
            oracle[f"n{i}"] = _value(i, "new")
        for i in range(5):
            writers["dc-1"].put(f"b{i}", _value(i, "nearline"), timestamp=now + 100 + i)
            oracle[f"b{i}"] = _value(i, "nearline")
            writers["dc-0"].delete(f"b{5 + i}", timestamp=now + 200 + i)  # deleted batch keys: tombstones
            oracle[f"b{5 + i}"] = None
        writers["dc-1"].delete("n0", timestamp=now + 300)
        oracle["n0"] = None
        writers["dc-0"].put("x", _value(1, "first"), timestamp=now + 400)
        writers["dc-0"].delete("x", timestamp=now + 401)
        writers["dc-0"].put("x", _value(3, "third"), timestamp=now + 402)
        oracle["x"] = _value(3, "third")
        writers["dc-1"].put("bignear", _value(5, "N" * LARGE), timestamp=now + 500)
        oracle["bignear"] = _value(5, "N" * LARGE)
        for writer in writers.values():
            writer.flush()
        wait_for("version 1 with the nearline writes", reads_equal(env, store, oracle), 90, 0.1)

        # Repair: dc-2 loses its storage while its server is down; every region is rebuilt from dc-1's copy.
        servers.process(config, "dc-2").kill()
        shutil.rmtree(config.data_dir / "regions" / "dc-2" / f"{store}_v1")
        servers.start(config, "dc-2")
        lines: list[str] = []
        repair = {"kafka.input.fabric": "dc-1", "kafka.input.max.records.per.mapper": "20"}
        assert local.repush(config, env.meta, store, repair, progress=lines.append, run_job=spark_job) == 2
        assert any("from version 1 in dc-1" in line for line in lines), lines
        assert any("wrote" in line and " 6 tombstones" in line for line in lines), lines  # b5..b9 and n0
        v2 = versions.get_version(env.meta, store, 2)
        assert v2.lifecycle.hybrid.rewind_seconds == 86_400  # a hybrid source's repush rewinds a day
        wait_for("every region serving version 2, repaired from dc-1", reads_equal(env, store, oracle), 90, 0.1)

        # TTL: records written before the start are gone, newer and batch-marked ones stay; a nearline write made
        # during the repush (after the job read its source) is there after it. The rewind is a day (a hybrid
        # source's): the replay reads the expired writes again from the real-time topics (stamped two days ago, but
        # produced minutes ago) and must not apply them.
        def job_then_write(job_config: ClusterConfig, request: PushJobRequest) -> JobResult:
            result = spark_job(job_config, request)
            writers["dc-1"].put("during", _value(7, "during"), timestamp=int(time.time() * 1000))
            writers["dc-1"].flush()
            return result

        ttl = {"repush.ttl.enable": "true", "repush.ttl.start.timestamp": str(cutoff)}
        lines.clear()
        assert local.repush(config, env.meta, store, ttl, progress=lines.append, run_job=job_then_write) == 3
        v3 = versions.get_version(env.meta, store, 3)
        assert v3.push_job_id.startswith(f"venice_ttl_re_push_{store}-")
        assert (v3.lifecycle.hybrid.rewind_seconds, v3.lifecycle.hybrid.replay_after_ms) == (86_400, cutoff)
        # The source's end offsets were pinned when version 3 was created (a retried job reads no further).
        job_confs = v3.lifecycle.job_confs
        pinned = json.loads(job_confs["kafka.input.end.offsets"])
        ends = admin.end_offsets(job_confs["kafka.input.broker.url"], job_confs["kafka.input.topic"], 2)
        assert sorted(pinned) == ["0", "1"] and all(0 < pinned[str(p)] <= ends[p] for p in range(2)), (pinned, ends)
        assert any("10 expired by TTL" in line for line in lines), lines
        for i in range(10):
            oracle[f"o{i}"] = None
        oracle["during"] = _value(7, "during")
        wait_for("version 3 without the expired records", reads_equal(env, store, oracle), 90, 0.1)

        # The tombstones the repush kept hold against an older nearline write; a newer one is applied.
        writers["dc-0"].put("b5", _value(5, "older than its delete"), timestamp=now + 150)
        writers["dc-0"].put("b6", _value(6, "newer than its delete"), timestamp=now + 10_000)
        writers["dc-0"].flush()
        oracle["b6"] = _value(6, "newer than its delete")
        wait_for("b5 still deleted, b6 written again", reads_equal(env, store, oracle), 90, 0.1)
    finally:
        for writer in writers.values():
            writer.close()


def test_repush_refusals_create_nothing(platform_env: PlatformEnv) -> None:
    env = platform_env
    config = env.config
    empty = env.create_user_store("rpempty", 1)
    batch = env.create_user_store("rpbatch", 1)
    env.push(batch, RecordsJob({"a": _value(1)}))
    other = env.create_user_store("rpother", 1)
    env.push(other, RecordsJob({"a": _value(1)}))
    dc2_topic = config.region("dc-2").version_topic(batch, 1)

    def refused(store: str, *confs: str) -> str:
        before = describe_store(env.meta, store)
        result = env.cli("repush", store, "--local", *[arg for c in confs for arg in ("--conf", c)])
        assert result.returncode != 0, result.stdout
        errors = result.stderr.strip().splitlines()
        assert len(errors) == 1 and errors[0].startswith("error: "), result.stderr
        after = describe_store(env.meta, store)
        assert after.largest_used_version == before.largest_used_version  # nothing created
        assert after.regions == before.regions  # the old version serving
        return errors[0]

    assert "no version yet" in refused(empty)
    assert "only supported for hybrid stores" in refused(batch, "repush.ttl.enable=true")
    assert "both repush.ttl.seconds and repush.ttl.start.timestamp" in refused(
        batch, "repush.ttl.enable=true", "repush.ttl.seconds=5", "repush.ttl.start.timestamp=5"
    )
    assert f"topic of store '{other}'" in refused(batch, f"kafka.input.topic={other}_v1")
    assert "no longer exists" in refused(batch, f"kafka.input.topic={batch}_v7")
    assert "unreachable" in refused(batch, "kafka.input.broker.url=127.0.0.1:1")
    admin.delete_topics(config.region("dc-2").kafka_bootstrap, [dc2_topic])
    assert "region dc-2 has no version 1" in refused(batch, "kafka.input.fabric=dc-2")
    in_flight = versions.create_version(env.meta, config, batch, "a-push-in-flight")
    try:
        assert "already in progress" in refused(batch)
    finally:
        versions.kill_push(env.meta, batch, in_flight.number, "test")
