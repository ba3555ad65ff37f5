"""The repush without a broker or Spark: its configs, source selection (an in-memory topic admin), offset-range
splits, the envelope decoding, the combiner and the per-key compaction (chunks, TTL, tombstones, compression)."""

from __future__ import annotations

import json
import struct
import uuid
from typing import Any

import pytest

from tests.support.kafka_fakes import FakeMessage
from tests.support.topics import InMemoryTopics
from venice_core.controller import repush_config as rc
from venice_core.controller import stores, versions
from venice_core.errors import ComponentError, ConfigError, RepushRefused
from venice_core.meta import MetadataStore
from venice_core.meta.models import RegionCurrentVersion
from venice_core.protocol import chunking
from venice_core.protocol.compression import CompressionStrategy, compressor, decompressor
from venice_core.protocol.div import SegmentState
from venice_core.protocol.envelope import ControlMessageType, encode_control, encode_delete, encode_put
from venice_core.protocol.partitioner import partition_for
from venice_core.spark.specs.task_specs import RepushTaskSpec, WriterSpec
from venice_core.spark.submit import PushJobRequest, push_job_spec
from venice_core.spark.tasks.kafka_source import split
from venice_core.spark.tasks.repush_tasks import (
    CHUNK,
    DELETE,
    MANIFEST,
    PUT,
    Compactor,
    RepushJobError,
    SourceRecords,
    combine,
    decode_message,
)

KEY = '"string"'
VALUE = '{"type":"record","name":"V","fields":[{"name":"a","type":"int"}]}'


def test_configs_parse_with_venice_names_defaults_and_refusals() -> None:
    parsed = rc.parse({"source.kafka": "true"})
    assert parsed == rc.RepushConfig()
    assert parsed.max_records_per_mapper == 5_000_000 and not parsed.combiner and not parsed.ttl_enable
    full = rc.parse(
        {
            "source.kafka": "TRUE",
            "kafka.input.topic": "s_v7",
            "kafka.input.fabric": "dc-1",
            "kafka.input.broker.url": "h:1",
            "kafka.input.max.records.per.mapper": "1000",
            "kafka.input.combiner.enabled": "true",
            "repush.ttl.enable": "true",
            "repush.ttl.seconds": "60",
            "rewind.time.in.seconds.override": "0",
        }
    )
    assert (full.topic, full.fabric, full.broker_url, full.max_records_per_mapper) == ("s_v7", "dc-1", "h:1", 1000)
    assert full.combiner and full.ttl_enable and full.ttl_seconds == 60 and full.rewind_override == 0
    refusals = {
        "both": {"repush.ttl.enable": "true", "repush.ttl.seconds": "1", "repush.ttl.start.timestamp": "5"},
        "needs enable": {"repush.ttl.seconds": "1"},
        "bool": {"kafka.input.combiner.enabled": "yes"},
        "int": {"kafka.input.max.records.per.mapper": "many"},
        "min": {"kafka.input.max.records.per.mapper": "0"},
        "topic": {"kafka.input.topic": "not-a-version-topic"},
    }
    for what, confs in refusals.items():
        with pytest.raises(ConfigError):
            rc.parse({"source.kafka": "true", **confs})
            pytest.fail(what)
    with pytest.raises(ConfigError, match="both repush.ttl.seconds and repush.ttl.start.timestamp"):
        rc.parse({"source.kafka": "true", **refusals["both"]})
    assert rc.is_repush({"source.kafka": "true"}) and not rc.is_repush({})
    ttl = rc.RepushConfig(ttl_enable=True)
    assert rc.repush_job_id("s", rc.RepushConfig(), "x") == "venice_re_push_s-x"
    assert rc.repush_job_id("s", ttl).startswith("venice_ttl_re_push_s-")
    assert rc.new_version_rewind(rc.RepushConfig(), source_hybrid=True) == 86400
    assert rc.new_version_rewind(rc.RepushConfig(), source_hybrid=False) is None
    assert rc.new_version_rewind(rc.RepushConfig(rewind_override=30), source_hybrid=True) == 30


def test_region_pick_as_venice_controller() -> None:
    order = ["dc-0", "dc-1", "dc-2"]
    assert rc.pick_region({"dc-0": 3, "dc-1": 4, "dc-2": 4}, order, None) == ("dc-1", 4)
    assert rc.pick_region({"dc-0": 3, "dc-1": 4}, order, "dc-0") == ("dc-0", 3)
    with pytest.raises(RepushRefused, match="region dc-2 serves no version"):
        rc.pick_region({"dc-0": 3}, order, "dc-2")
    with pytest.raises(RepushRefused, match="no version yet"):
        rc.pick_region({"dc-0": 0}, order, None)


def _serve(meta: MetadataStore, store: str, current: dict[str, int]) -> None:
    with meta.session() as session:
        for region, number in current.items():
            session.merge(
                RegionCurrentVersion(store_name=store, region=region, current_version=number, backup_version=0)
            )


def test_source_resolution_and_its_refusals(meta: MetadataStore, config) -> None:
    topics = InMemoryTopics()
    store, other = f"rp_{uuid.uuid4().hex[:6]}", f"ot_{uuid.uuid4().hex[:6]}"
    for name in (store, other):
        stores.create_store(meta, config, name, KEY, VALUE, partitions=2, compression="GZIP")
    resolve = lambda confs, name=store: rc.resolve(  # noqa: E731
        meta, config, name, rc.parse({"source.kafka": "true", **confs}), now_ms=10_000_000, topics=topics
    )
    with pytest.raises(RepushRefused, match="no version yet"):
        resolve({})
    for number in (1, 2):
        versions.create_version(meta, config, store, f"job-{number}", topics=topics)
        versions.set_version_status(meta, store, number, versions.VersionStatus.ONLINE)
        versions.finish_push(meta, store, number)
    _serve(meta, store, {"dc-0": 1, "dc-1": 2, "dc-2": 1})
    source = resolve({})  # the region whose current version is largest
    assert (source.region, source.version, source.partitions, source.compression) == (
        "dc-1",
        2,
        2,
        CompressionStrategy.GZIP,
    )
    assert source.topic == config.region("dc-1").version_topic(store, 2) and source.ttl_start_ms is None
    assert (resolve({"kafka.input.fabric": "dc-2"}).region, resolve({"kafka.input.fabric": "dc-2"}).version) == (
        "dc-2",
        1,
    )
    # An explicit topic, named with or without its region's prefix.
    assert resolve({"kafka.input.topic": f"{store}_v1"}).region == "dc-0"
    prefixed = config.region("dc-2").version_topic(store, 1)
    assert resolve({"kafka.input.topic": prefixed, "kafka.input.fabric": "dc-2"}).topic == prefixed
    pinned = rc.resolved_confs(
        {"source.kafka": "true", "kafka.input.fabric": "dc-2"}, resolve({"kafka.input.fabric": "dc-2"})
    )
    assert pinned["kafka.input.topic"] == prefixed and rc.source_version(config, pinned) == 1
    refusals = [
        ({"kafka.input.topic": f"{other}_v1"}, f"topic of store '{other}'"),
        ({"kafka.input.topic": f"{store}_v9"}, "no longer exists"),
        ({"kafka.input.fabric": "dc-9"}, "unknown region"),
        ({"repush.ttl.enable": "true"}, "only supported for hybrid stores"),
    ]
    for confs, message in refusals:
        with pytest.raises((RepushRefused, ConfigError), match=message):
            resolve(confs)
    topics.delete_topics(config.region("dc-1").kafka_bootstrap, [config.region("dc-1").version_topic(store, 2)])
    with pytest.raises(RepushRefused, match="region dc-1 has no version 2"):
        resolve({})
    topics.unreachable.add("nowhere:1")
    with pytest.raises(ComponentError, match="unreachable"):
        resolve({"kafka.input.broker.url": "nowhere:1"})
    # TTL on a hybrid store: the store's rewind by default, else the seconds or the start given.
    stores.update_store(meta, config, store, hybrid_rewind_seconds=600, topics=topics)
    assert resolve({"repush.ttl.enable": "true", "kafka.input.fabric": "dc-0"}).ttl_start_ms == 10_000_000 - 600_000
    ttl = resolve({"repush.ttl.enable": "true", "repush.ttl.seconds": "5", "kafka.input.fabric": "dc-0"})
    assert ttl.ttl_start_ms == 10_000_000 - 5_000
    spec = push_job_spec(
        config,
        PushJobRequest(
            store,
            3,
            rc.REPUSH_INPUT,
            "key",
            "value",
            "venice_re_push_x",
            rc.resolved_confs({"kafka.input.max.records.per.mapper": "7", "repush.ttl.enable": "true"}, ttl),
        ),
        config.data_dir / "r.json",
    )
    assert spec.application.endswith("repush.py") and spec.name == f"venice-repush-{store}-v3"
    args = spec.args
    assert args[args.index("--source-version") + 1] == "1" and args[args.index("--max-records-per-mapper") + 1] == "7"
    assert args[args.index("--ttl-start-ms") + 1] == str(10_000_000 - 5_000)


def test_offset_range_splits() -> None:
    ranges = split({"0": 0, "1": 5, "2": 3}, {"0": 10, "1": 5, "2": 4}, 4)
    assert [(r.partition, r.start, r.end) for r in ranges] == [(0, 0, 4), (0, 4, 8), (0, 8, 10), (2, 3, 4)]
    assert [(r.partition, r.start, r.end) for r in split({"0": 2}, {"0": 9}, 0)] == [(0, 2, 9)]


def _row(offset: int, kind: int, value: bytes = b"", ts: int = 0, chunk: bytes = b"", key: bytes = b"k") -> tuple:
    return (0, key, offset, kind, 1 if kind in (PUT, DELETE) else -1, ts, value, chunk)


NO_OP, GZIP, ZSTD = CompressionStrategy.NO_OP, CompressionStrategy.GZIP, CompressionStrategy.ZSTD


def _spec(partitions: int = 1, **overrides: Any) -> RepushTaskSpec:
    return RepushTaskSpec(
        **{
            "writer": WriterSpec("job", 2, "", "s_v2", partitions, NO_OP),
            "source_topic": "s_v1",
            "source_bootstrap": "",
            "source_compression": NO_OP,
            "target_compression": NO_OP,
            **overrides,
        }
    )


def test_decoding_and_per_key_compaction() -> None:
    state = SegmentState(b"g" * 16)
    state.start_segment(0)
    kafka_key, kafka_value = encode_put(state.next(123), b"key", 5, b"value")
    assert decode_message(kafka_key, kafka_value) == (b"key", PUT, 5, 123, b"value", b"")
    assert decode_message(*encode_delete(state.next(7), b"key", 5)) == (b"key", DELETE, 5, 7, b"", b"")
    chunk_key = chunking.chunk_key(b"key", 3)
    assert decode_message(*encode_put(state.next(0), chunk_key, -10, b"c"))[:2] == (b"key", CHUNK)
    assert decode_message(*encode_control(state.next(), ControlMessageType.END_OF_PUSH, {})) is None

    # Latest by offset wins; a final delete is dropped, or kept as a tombstone for a hybrid version.
    compactor = Compactor(_spec())
    assert compactor.resolve([_row(1, PUT, b"a"), _row(2, PUT, b"b", ts=5)]) == (b"b", 1, 5)
    assert compactor.resolve([_row(1, PUT, b"a"), _row(2, DELETE, ts=9)]) is None
    assert Compactor(_spec(keep_tombstones=True)).resolve([_row(2, DELETE, ts=9)]) == (None, 1, 9)
    assert compactor.stats["superseded"] == 2 and compactor.stats["deleted"] == 1

    # Chunks: the latest copy of each named chunk written before the winning manifest.
    manifest = chunking.Manifest(4, [chunking.chunk_key(b"k", 0), chunking.chunk_key(b"k", 1)], 6).encode()
    c0, c1 = chunking.chunk_key(b"k", 0), chunking.chunk_key(b"k", 1)
    rows = [
        _row(1, CHUNK, b"old", chunk=c0),
        _row(2, CHUNK, b"abc", chunk=c0),
        _row(3, CHUNK, b"def", chunk=c1),
        _row(4, MANIFEST, manifest, ts=3),
        _row(5, CHUNK, b"zzz", chunk=c0),  # a later value whose manifest never came
    ]
    assert compactor.resolve(rows) == (b"abcdef", 4, 3)
    assert compactor.resolve(rows[-1:]) is None  # chunks alone: no record was ever written
    with pytest.raises(RepushJobError, match="chunk 1 of 2 .* missing"):
        compactor.resolve([rows[1], rows[3]])
    short = chunking.Manifest(4, [c0, c1], 7).encode()
    with pytest.raises(RepushJobError, match="hold 6 bytes, its manifest says 7"):
        compactor.resolve([*rows[:3], _row(4, MANIFEST, short)])
    # The combiner keeps what the reduce side may need: the winner with its chunks, and chunks after it.
    assert [r[2] for r in combine([_row(0, PUT, b"x"), *rows])] == [2, 3, 4, 5]
    assert [r[2] for r in combine([rows[0], rows[1], _row(4, PUT, b"p"), rows[4]])] == [4, 5]

    # TTL: written before the start is dropped, batch-marked (0) and newer kept.
    ttl = Compactor(_spec(ttl_start_ms=100))
    assert ttl.resolve([_row(1, PUT, b"old", ts=99)]) is None
    assert ttl.resolve([_row(1, PUT, b"new", ts=100)]) == (b"new", 1, 100)
    assert ttl.resolve([_row(1, PUT, b"batch", ts=0)]) == (b"batch", 1, 0)
    assert ttl.stats["expired"] == 1

    # Re-compression when the compression changed.
    gz = compressor(CompressionStrategy.GZIP)(b"payload" * 10)
    recompressed = Compactor(_spec(source_compression=GZIP, target_compression=ZSTD)).resolve([_row(1, PUT, gz)])
    assert decompressor(CompressionStrategy.ZSTD)(recompressed[0]) == b"payload" * 10


def test_a_replay_from_a_rewind_joins_producers_mid_segment() -> None:
    """A new version's real-time replay (a repush's short rewind) starts inside a live writer's segment."""
    from venice_core.protocol.div import DataIntegrityError, Validator
    from venice_core.protocol.envelope import decode

    state = SegmentState(b"w" * 16)
    messages = [encode_control(state.start_segment(), ControlMessageType.START_OF_SEGMENT, {})]
    for i in range(5):
        messages.append(encode_put(state.next(i + 1), b"k%d" % i, 1, b"v"))
        state.add(b"ignored")
    messages.append(encode_control(state.next(), ControlMessageType.END_OF_SEGMENT, {"checksum": state.checksum}))
    tail = [decode(*m) for m in messages[3:]]
    with pytest.raises(DataIntegrityError, match="not the start of a segment"):
        Validator().accept(tail[0], b"")
    joined = Validator(join_mid_segment=True)
    assert [joined.accept(m, b"" if not m.is_control else None) for m in tail] == [True] * len(tail)
    assert joined.producers[(b"w" * 16).hex()]["ended"]
    assert not joined.accept(tail[1], b"")  # duplicates still skipped
    gap = Validator(join_mid_segment=True)
    assert gap.accept(tail[0], b"")
    with pytest.raises(DataIntegrityError, match="jumped"):  # a gap after joining is still missing data
        gap.accept(tail[2], b"")


def test_end_offsets_are_pinned_at_version_creation_and_kept_for_a_retried_job(meta: MetadataStore, config) -> None:
    """Review finding: a retried job read up to "latest" again. The end offset of each source partition is resolved
    with the source, kept on the version the repush creates, and a retried job's spec reads no further."""
    from venice_core.rollout.steps import CreatedVersion, PushRequest, job_request

    topics = InMemoryTopics()
    store = f"rp_{uuid.uuid4().hex[:6]}"
    stores.create_store(meta, config, store, KEY, VALUE, partitions=2)
    versions.create_version(meta, config, store, "job-1", topics=topics)
    versions.set_version_status(meta, store, 1, versions.VersionStatus.ONLINE)
    versions.finish_push(meta, store, 1)
    _serve(meta, store, {"dc-0": 1, "dc-1": 1, "dc-2": 1})
    source_topic = config.region("dc-0").version_topic(store, 1)
    topics.ends[(config.region("dc-0").kafka_bootstrap, source_topic)] = [120, 87]
    repush = rc.parse({"source.kafka": "true"})
    pinned = rc.resolved_confs({"source.kafka": "true"}, rc.resolve(meta, config, store, repush, topics=topics))
    assert json.loads(pinned[rc.KAFKA_INPUT_END_OFFSETS]) == {"0": 120, "1": 87}
    assert rc.parse(pinned).end_offsets == {"0": 120, "1": 87}
    topics.ends[(config.region("dc-0").kafka_bootstrap, source_topic)] = [150, 90]  # a live source grows
    created = versions.create_version(meta, config, store, "venice_re_push_x", job_confs=pinned, topics=topics)
    kept = versions.get_version(meta, store, created.number).lifecycle.job_confs  # what a re-run step resumes
    assert kept == pinned
    resumed = CreatedVersion.from_json(CreatedVersion(2, 2, ["dc-0"], "venice_re_push_x", dict(kept)).to_json())
    request = job_request(PushRequest(store, rc.REPUSH_INPUT, confs={"source.kafka": "true"}), resumed)
    args = push_job_spec(config, request, config.data_dir / "r.json").args
    assert json.loads(args[args.index("--source-end-offsets") + 1]) == {"0": 120, "1": 87}
    with pytest.raises(ConfigError, match="kafka.input.end.offsets"):
        rc.parse({"source.kafka": "true", rc.KAFKA_INPUT_END_OFFSETS: '{"0": -1}'})


def test_a_ttl_repush_version_replays_nothing_at_or_before_its_cut_off(meta: MetadataStore, config) -> None:
    """Review finding: a TTL repush of a hybrid store with the day's rewind replayed nearline writes the TTL had
    evicted. Its version records the cut-off: the replay starts after it, and no write stamped at or before it is
    applied (`real_time`'s filter; the stamp is a logical time, which may be older than the write's production)."""
    from venice_core.model.hybrid import HybridSettings

    ttl = rc.parse({"source.kafka": "true", "repush.ttl.enable": "true", "repush.ttl.start.timestamp": "5000000"})
    assert rc.replay_after_ms(ttl) == 5_000_000 and rc.replay_after_ms(rc.parse({"source.kafka": "true"})) is None
    day = HybridSettings(86_400, 0, replay_after_ms=5_000_000)
    assert day.replay_from_ms(6_000_000) == 5_000_001  # the day's rewind, capped after the cut-off
    assert day.replay_from_ms(100_000_000) == 100_000_000 - 86_400_000  # the rewind alone is later: kept
    assert HybridSettings(86_400).replay_from_ms(90_000_000) == 90_000_000 - 86_400_000
    assert HybridSettings.of(day.to_json()) == day and "replay_after_ms" not in HybridSettings(5).to_json()
    topics = InMemoryTopics()
    store = f"rp_{uuid.uuid4().hex[:6]}"
    stores.create_store(meta, config, store, KEY, VALUE, partitions=1)
    stores.update_store(meta, config, store, hybrid_rewind_seconds=600, topics=topics)
    created = versions.create_version(
        meta, config, store, "venice_ttl_re_push_x", topics=topics, rewind_seconds=86_400, replay_after_ms=5_000_000
    )
    assert versions.get_version(meta, store, created.number).lifecycle.hybrid == HybridSettings(86_400, 1000, 5_000_000)


class _RecordingWriter:
    """Collects what a repush task writes, each record as (partition, key, value, schema id, write timestamp)."""

    def __init__(self) -> None:
        self.records: list[tuple[int, bytes, bytes | None, int, int]] = []

    def write_record(self, partition: int, key: bytes, value: bytes | None, schema_id: int, timestamp: int) -> None:
        self.records.append((partition, key, value, schema_id, timestamp))

    def write_stored(self, partition: int, kafka_key: bytes, body: bytes, timestamp: int) -> None:
        (schema_id,) = struct.unpack_from(">i", body)
        self.records.append((partition, kafka_key[1:], body[4:], schema_id, timestamp))

    def write_stored_run(self, partition: int, kafka_keys: list[bytes], bodies: list[bytes], stamps: list[int]) -> None:
        for kafka_key, body, stamp in zip(kafka_keys, bodies, stamps, strict=True):
            self.write_stored(partition, kafka_key, body, int(stamp))

    def start_of_push(self, partition: int, body: dict[str, Any]) -> None:
        self.records.append((partition, b"START_OF_PUSH", json.dumps(body, sort_keys=True).encode(), 0, 0))

    def state(self) -> dict[bytes, tuple[bytes | None, int, int]]:
        """What a region holds once it has ingested the records in order (a DELETE removes the key)."""
        held: dict[bytes, tuple[bytes | None, int, int]] = {}
        for _partition, key, value, schema_id, timestamp in self.records:
            if key == b"START_OF_PUSH":
                continue
            if value is None and timestamp == 0:
                held.pop(key, None)
            else:
                held[key] = (value, schema_id, timestamp)
        return held


def _messages(records: list[tuple[bytes, bytes, int]]) -> SourceRecords:
    """The records as a repush task reads them from a partition a push wrote (one batch)."""
    state = SegmentState(b"g" * 16)
    state.start_segment(0)
    messages = [encode_put(state.next(ts), key, 1, value) for key, value, ts in records]
    read = SourceRecords()
    read.take([key for key, _ in messages], [value for _, value in messages], list(range(len(messages))))
    return read


def _plain(records: SourceRecords) -> tuple[list[bytes], list[bytes], Any]:
    """All of a plain partition's records, to copy."""
    assert records.plain
    return records.uncopied(records.plain_count)


@pytest.mark.parametrize(
    "overrides",
    [{}, {"ttl_start_ms": 100}, {"source_compression": NO_OP, "target_compression": GZIP}],
    ids=["as-stored", "ttl", "recompressed"],
)
def test_a_plain_partition_is_copied_as_the_general_compaction_would_write_it(overrides: dict) -> None:
    from venice_core.spark.tasks.repush_tasks import _compact_partition, _copy_plain

    keys = sorted(f"k{i}".encode() for i in range(200) if partition_for(f"k{i}".encode(), 2) == 1)
    records = [(key, b"v" + key, 0 if i % 7 == 0 else 50 + i) for i, key in enumerate(keys)]
    spec = _spec(partitions=2, **overrides)
    plain, general = _RecordingWriter(), _RecordingWriter()
    plain_compactor, general_compactor = Compactor(spec), Compactor(spec)
    _copy_plain(*_plain(_messages(records)), 1, spec, plain_compactor, plain)
    _compact_partition(_messages(records), 1, spec, general_compactor, general)
    assert plain.records == general.records and plain_compactor.stats == general_compactor.stats
    assert len(plain.records) == len(records) - plain_compactor.stats["expired"]
    if "ttl_start_ms" in overrides:
        assert 0 < plain_compactor.stats["expired"] < len(records)  # newer and batch-marked records stay
    # A source another partitioner wrote fails the copy, as it fails the compaction: every key elsewhere, or half.
    with pytest.raises(RepushJobError, match="belongs to partition 1"):
        _copy_plain(*_plain(_messages(records)), 0, spec, Compactor(spec), _RecordingWriter())
    others = sorted(f"z{i}".encode() for i in range(400) if partition_for(f"z{i}".encode(), 2) == 0)
    mixed = sorted([*keys, *others[: len(keys)]])
    with pytest.raises(RepushJobError, match="belongs to partition 0"):
        _copy_plain(*_plain(_messages([(key, b"v", 0) for key in mixed])), 1, spec, Compactor(spec), _RecordingWriter())


def test_a_large_plain_batch_is_checked_on_a_sample_of_its_keys_first_and_last_among_them() -> None:
    from venice_core.spark.tasks import repush_tasks

    keys = sorted(k for k in (f"k{i:06d}".encode() for i in range(20_000)) if partition_for(k, 2) == 1)
    spec = _spec(partitions=2)
    checked: list[bytes] = []
    real = repush_tasks._check_partition

    def check(key: bytes, *args: object) -> None:
        checked.append(key)
        real(key, *args)  # type: ignore[arg-type]

    writer = _RecordingWriter()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(repush_tasks, "_check_partition", check)
        records = _plain(_messages([(k, b"v", 0) for k in keys]))
        repush_tasks._copy_plain(*records, 1, spec, Compactor(spec), writer)
    assert len(writer.records) == len(keys)
    assert len(checked) == -(-(len(keys) - 1) // repush_tasks.PARTITION_CHECK_EVERY) + 1 < len(keys) // 100
    assert checked[0] == keys[0] and checked[-1] == keys[-1] and checked == sorted(set(checked))


def test_a_partition_is_plain_only_with_puts_in_strictly_increasing_key_order(monkeypatch) -> None:
    from venice_core.spark.tasks import kafka_source
    from venice_core.spark.tasks.repush_tasks import _data_batches

    def read(*messages: tuple[bytes, bytes, int], batch_size: int = 100) -> tuple[list[int], bool]:
        batch = [FakeMessage(*m) for m in messages]
        batches = [batch[at : at + batch_size] for at in range(0, len(batch), batch_size)]
        monkeypatch.setattr(kafka_source, "read_range_messages", lambda *_args, **_kwargs: iter(batches))
        records = SourceRecords()
        for taken in _data_batches(_spec(), 0, 0, len(batch)):
            records.take(*taken)
        return records.offsets, records.plain

    state = SegmentState(b"g" * 16)
    state.start_segment(0)
    a, b = encode_put(state.next(1), b"a", 1, b"x"), encode_put(state.next(1), b"b", 1, b"y")
    control = encode_control(state.next(), ControlMessageType.END_OF_PUSH, {})
    offsets, plain = read((*a, 0), (*b, 1), (*control, 2))
    assert plain and offsets == [0, 1]  # control messages left out
    assert read((*a, 0), (*b, 1), batch_size=1)[1]  # in order across consumed batches too
    assert not read((*b, 0), (*a, 1))[1]  # out of order
    assert not read((*b, 0), (*a, 1), batch_size=1)[1]  # out of order across two consumed batches
    assert not read((*a, 0), (*a, 1))[1]  # a duplicate a retried writer left
    assert not read((*a, 0), (*a, 1), batch_size=1)[1]
    assert not read((*a, 0), (*encode_delete(state.next(2), b"c", 1), 1))[1]
    chunk = encode_put(state.next(0), chunking.chunk_key(b"c", 0), -10, b"c")
    assert not read((*chunk, 0))[1]


def test_a_stored_record_is_written_as_put_writes_it() -> None:
    """`put_stored` (a repush's copy) sends what `put` sends for the same record, chunked above the chunk size."""
    from venice_core.protocol.envelope import KEY_TYPE_DATA, SCHEMA_ID
    from venice_core.pubsub.writer import VersionTopicWriter

    def writer() -> tuple[VersionTopicWriter, list[tuple[int, bytes, bytes]]]:
        sent: list[tuple[int, bytes, bytes]] = []
        w = VersionTopicWriter("127.0.0.1:1", "s_v2", 2, b"w" * 16, max_chunk_bytes=100)  # never connects
        w._send = lambda partition, key, value: sent.append((partition, key, value))  # type: ignore[method-assign]
        w.start_segment(1, timestamp_ms=5)
        return w, sent

    by_put, put_sent = writer()
    by_copy, copy_sent = writer()
    for key, value, timestamp in [(b"a", b"small", 0), (b"b", b"x" * 250, 7), (b"c", b"", 9)]:
        by_put.put(key, value, 3, partition=1, timestamp_ms=timestamp)
        by_copy.put_stored(KEY_TYPE_DATA + key, SCHEMA_ID.pack(3) + value, 1, timestamp)
    assert copy_sent == put_sent and len(put_sent) > 4  # the large value went as chunks and a manifest
    assert by_copy._segments[1].checksum == by_put._segments[1].checksum


def _source_batches() -> list[list[FakeMessage]]:
    """A partition a push wrote (50 keys in order: plain), then what makes it not plain in its second consumed
    batch: a retried writer's duplicate, keys overwritten (by a newer write, and by one older than the TTL), one
    deleted, one smaller than any before, a chunk of a value never finished; and a third batch after that. Of the
    first 50, those from k17 on are newer than the TTL's cut-off (100), and k00, k09, ... are batch-marked (0)."""
    state = SegmentState(b"g" * 16)
    state.start_segment(0)
    first = [encode_put(state.next(0 if i % 9 == 0 else 50 + 3 * i), b"k%02d" % i, 1, b"v%d" % i) for i in range(50)]
    second = [
        first[25],
        encode_put(state.next(200), b"k10", 2, b"newer"),
        encode_put(state.next(205), b"k21", 2, b"newer too"),
        encode_delete(state.next(210), b"k20", 1),
        encode_put(state.next(220), b"a00", 1, b"first in key order"),
        encode_put(state.next(10), b"k30", 1, b"older than the ttl"),
        encode_put(state.next(0), chunking.chunk_key(b"k40", 0), -10, b"c"),
        encode_put(state.next(230), b"k99", 1, b"last"),
    ]
    third = [encode_put(state.next(240), b"k11", 1, b"third batch")]
    offsets = iter(range(100))
    return [[FakeMessage(k, v, next(offsets)) for k, v in batch] for batch in (first, second, third)]


def _streamed(monkeypatch, spec: RepushTaskSpec, batches: list[list[FakeMessage]]) -> tuple[_RecordingWriter, Any]:
    """What `_repush_partition` writes of the batches, copying 8 records at a time."""
    from venice_core.spark.specs.task_specs import SourceRange
    from venice_core.spark.tasks import kafka_source, repush_tasks

    monkeypatch.setattr(repush_tasks, "COPY_UNIT", 8)
    monkeypatch.setattr(kafka_source, "read_range_messages", lambda *_args, **_kwargs: iter(batches))
    writer, compactor = _RecordingWriter(), Compactor(spec)
    repush_tasks._repush_partition(spec, SourceRange(0, 0, 100), compactor, writer)
    return writer, compactor


@pytest.mark.parametrize(
    "overrides",
    [{}, {"ttl_start_ms": 100}, {"keep_tombstones": True, "ttl_start_ms": 100}, {"target_compression": GZIP}],
    ids=["batch", "ttl", "hybrid-ttl", "recompressed"],
)
@pytest.mark.parametrize("plain_batches", [1, 0, 3], ids=["found-midway", "found-at-once", "plain"])
def test_a_partition_is_copied_while_read_and_amended_if_found_not_plain_midway(
    monkeypatch, overrides: dict, plain_batches: int
) -> None:
    """Whenever the partition turns out not plain, a region that ingests what the task wrote holds what the general
    compaction writes, and the same records are counted left out. Copied first, then amended after START_OF_PUSH
    says the rest is unsorted; or, not plain from its first batch, compacted and written sorted."""
    from venice_core.spark.tasks.repush_tasks import _compact_partition

    batches = _source_batches()
    if plain_batches == 0:
        batches = [batches[1], batches[0], batches[2]]  # not plain from the first batch
    elif plain_batches == 3:
        batches = [batches[0]]
    spec = _spec(**overrides)
    streamed, streamed_compactor = _streamed(monkeypatch, spec, batches)

    reference, reference_compactor = _RecordingWriter(), Compactor(spec)
    everything = SourceRecords()
    for batch in batches:
        everything.take([m.key() for m in batch], [m.value() for m in batch], [m.offset() for m in batch])
    _compact_partition(everything, 0, spec, reference_compactor, reference)

    assert streamed.state() == reference.state() and streamed_compactor.stats == reference_compactor.stats
    said = [record for record in streamed.records if record[1] == b"START_OF_PUSH"]
    if plain_batches == 1:
        assert len(said) == 1 and json.loads(said[0][2])["sorted"] is False
        copied = streamed.records[: streamed.records.index(said[0])]
        assert [r[1] for r in copied] == sorted({r[1] for r in copied})
        expired = spec.ttl_start_ms is not None  # then k01-k16 were not written, but k09 (batch-marked)
        assert len(copied) == (48 - 15 if expired else 48)  # 6 units of 8 (k00-k47), what the TTL left of them
        amended = {r[1] for r in streamed.records[len(copied) + 1 :]}  # what the copy got wrong, and k48, k49
        assert {b"k21", b"k20", b"k30", b"a00", b"k48", b"k49"} <= amended  # k20: its delete (or tombstone)
        assert not {b"k25", b"k40"} & amended  # a retried writer's copy; a chunk of a value never finished
    else:
        assert not said and streamed.records == reference.records  # sorted, each key once


def test_what_a_repush_task_writes_does_not_depend_on_how_its_records_came_in_batches(monkeypatch) -> None:
    """A retried task (or a re-run job, under the same producer GUIDs) must send the same messages in the same
    order: DIV drops what an earlier attempt sent by its sequence numbers alone."""
    batches = _source_batches()
    records = [message for batch in batches for message in batch]
    spec = _spec(ttl_start_ms=100)
    sent = set()
    for sizes in ([50, 8, 1], [20, 20, 19], [7] * 9, [59]):
        cuts = [sum(sizes[:i]) for i in range(len(sizes) + 1)]
        split = [records[start:end] for start, end in zip(cuts, cuts[1:], strict=False)]
        writer, compactor = _streamed(monkeypatch, spec, split)
        sent.add((tuple(writer.records), tuple(sorted(compactor.stats.items()))))
    assert len(sent) == 1
