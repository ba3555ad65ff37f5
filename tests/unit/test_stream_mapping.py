"""The streaming job's logic without Spark or Kafka: events to writes, a batch's check, the writers of a batch (their
GUIDs, what a retried task sends), and the source's offset planning."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from venice_core.errors import StreamInputError
from venice_core.nearline.writer import WriterTarget
from venice_core.protocol.div import deterministic_guid
from venice_core.spark.jobs.stream import PANE_FILE, WORKER_RESTARTS, checkpoint_pane, follow_restarting
from venice_core.spark.tasks.kafka_source import next_end, parse_offsets, plan, share
from venice_core.spark.tasks.stream_tasks import BatchSpec, EventMapping, check_rows, event_time, map_event, write_rows

USER_VALUE = {
    "type": "record",
    "name": "UserProfile",
    "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"}, {"name": "score", "type": "double"}],
}
TARGET = WriterTarget("users", "dc-0", "127.0.0.1:1", "dc-0.users_rt", 2, "string", ((1, USER_VALUE),))
MAPPING = EventMapping(TARGET, "user", event_time_field="ts")


def event(**fields: Any) -> bytes:
    return json.dumps(fields).encode()


@dataclass
class Row:
    """A source row as the job's tasks see it (`spark.tasks.stream_tasks.SourceRow`'s attributes)."""

    partition: int
    offset: int
    value: bytes | None
    timestamp: int = 1_000
    topic: str = "events"
    key: bytes | None = None


def test_an_event_maps_to_a_put_with_its_event_time() -> None:
    write = map_event(event(user="u1", name="a", age=3, score=1.5, ts=42), 7, "t/0@0", MAPPING)
    assert (write.key, write.value, write.timestamp) == ("u1", {"name": "a", "age": 3, "score": 1.5}, 42)


def test_without_an_event_time_field_the_kafka_timestamp_is_the_write_time() -> None:
    mapping = EventMapping(TARGET, "user")
    write = map_event(event(user="u1", name="a", age=3, score=1.5), 1234, "t/0@0", mapping)
    assert write.timestamp == 1234 and write.value == {"name": "a", "age": 3, "score": 1.5}


def test_value_fields_pick_the_value_and_leave_the_rest() -> None:
    mapping = EventMapping(TARGET, "user", value_fields=("name", "age", "score"))
    write = map_event(event(user="u1", name="a", age=3, score=2, extra="x"), 1, "t/0@0", mapping)
    assert write.value == {"name": "a", "age": 3, "score": 2}


def test_a_store_whose_values_are_not_records_takes_one_field() -> None:
    target = WriterTarget("s", "dc-0", "b", "s_rt", 1, "string", ((1, "long"),))
    assert map_event(event(k="a", n=5), 1, "t/0@0", EventMapping(target, "k", ("n",)).check()).value == 5
    with pytest.raises(StreamInputError, match="not records"):
        EventMapping(target, "k").check()


def test_iso_event_times_are_utc_unless_they_say() -> None:
    assert event_time("1970-01-01T00:00:01") == 1000
    assert event_time("1970-01-01T01:00:01+01:00") == 1000
    with pytest.raises(ValueError, match="neither"):
        event_time(1.5)


@pytest.mark.parametrize(
    ("raw", "cause"),
    [
        (b"not json", "is not a JSON object"),
        (b"[1, 2]", "is not a JSON object"),
        (None, "is not a JSON object"),
        (event(name="a", age=3, score=1.0, ts=1), "has no key field 'user'"),
        (event(user=None, name="a", age=3, score=1.0, ts=1), "has no key field 'user'"),
        (event(user=5, name="a", age=3, score=1.0, ts=1), "key 5 does not match the key schema"),
        (event(user="u", name="a", age=3, score=1.0), "has no event-time field 'ts'"),
        (event(user="u", name="a", age=3, score=1.0, ts="yesterday"), "event time 'yesterday' is neither"),
        (event(user="u", name="a", age="old", score=1.0, ts=1), "fits no value schema"),
        (event(user="u", name="a", age=3, score=1.0, nick="b", ts=1), "fits no value schema"),
        (event(user="u", name="a", age=3, score=1.0, ts=0), "write timestamp"),
    ],
)
def test_bad_events_are_named_with_their_cause(raw: bytes | None, cause: str) -> None:
    with pytest.raises(StreamInputError, match=f"event at t/1@9.*{cause}"):
        map_event(raw, 1, "t/1@9", MAPPING)


def test_a_batch_check_counts_events_and_stops_at_the_first_bad_event() -> None:
    good = [
        Row(0, 5, event(user="a", name="a", age=1, score=1.0, ts=1)),
        Row(0, 6, event(user="b", name="b", age=2, score=2.0, ts=2)),
    ]
    summary = check_rows(good, MAPPING)
    assert (summary.records, summary.error) == (2, None)
    bad = check_rows([*good, Row(0, 7, event(name="x")), Row(0, 8, b"{")], MAPPING)
    assert bad.error is not None and "events/0@7 has no key field 'user'" in bad.error


class FakeWriter:
    def __init__(self, guid: bytes, log: list[tuple[Any, ...]], fail_after: int | None = None) -> None:
        self.guid, self.log, self.fail_after, self.puts = guid, log, fail_after, 0

    def put(self, key: Any, value: Any, timestamp: int | None = None) -> None:
        if self.fail_after is not None and self.puts >= self.fail_after:
            raise RuntimeError("broker gone")
        self.puts += 1
        self.log.append(("put", self.guid, key, value["age"], timestamp))

    def flush(self) -> None:
        self.log.append(("flush", self.guid))

    def close(self) -> None:
        self.log.append(("close", self.guid))


def _rows() -> list[Row]:
    return [Row(p, o, event(user=f"u{p}{o}", name="n", age=o, score=1.0, ts=100 + o)) for p in (0, 1) for o in range(3)]


def test_each_source_partition_of_a_batch_writes_under_a_guid_of_the_batch() -> None:
    spec = BatchSpec("query-1", 4, MAPPING)
    log: list[tuple[Any, ...]] = []
    assert write_rows(_rows(), spec, lambda guid: FakeWriter(guid, log)) == 6
    guids = {entry[1] for entry in log}
    shape = MAPPING.fingerprint
    assert guids == {
        deterministic_guid("stream", "query-1", 4, 0, shape),
        deterministic_guid("stream", "query-1", 4, 1, shape),
    }
    # What shapes the bytes is part of the identity: a replay under another mapping is another producer.
    remapped = BatchSpec("query-1", 4, replace(MAPPING, value_fields=("name", "age", "score")))
    assert remapped.guid(0) != spec.guid(0)
    assert [e[0] for e in log][-2:] == ["close", "close"]
    assert [e[3] for e in log if e[0] == "put" and e[1] == spec.guid(1)] == [0, 1, 2]  # offset order
    again: list[tuple[Any, ...]] = []
    write_rows(_rows(), spec, lambda guid: FakeWriter(guid, again))
    assert again == log  # a replayed batch sends the same writes under the same identities
    other: list[tuple[Any, ...]] = []
    write_rows(_rows(), BatchSpec("query-1", 5, MAPPING), lambda guid: FakeWriter(guid, other))
    assert not {e[1] for e in other} & guids  # the next batch is another producer


def test_a_task_that_fails_part_way_ends_no_segment() -> None:
    log: list[tuple[Any, ...]] = []
    with pytest.raises(RuntimeError, match="broker gone"):
        write_rows(_rows(), BatchSpec("q", 0, MAPPING), lambda guid: FakeWriter(guid, log, fail_after=2))
    assert "close" not in {e[0] for e in log} and log[-1][0] == "flush"


def test_the_window_pane_belongs_to_the_checkpoint_not_the_run(tmp_path: Path) -> None:
    """A run resumed on a checkpoint replays its last uncommitted batch: the keys it writes (`<key>|<start>|<pane>`)
    must be the first attempt's, or the same GUIDs would send other messages to other real-time partitions."""
    checkpoint = tmp_path / "checkpoint"
    first = checkpoint_pane(checkpoint, "2a2966519c0e4b6f")
    assert first == "2a296651"
    assert checkpoint_pane(checkpoint, "a32a7d4a00000000") == first  # the resumed run
    fresh = tmp_path / "after-drain" / "checkpoint"  # a start after a drain: a new checkpoint, a new pane
    assert checkpoint_pane(fresh, "7c28029d95c64308") == "7c28029d"
    assert sorted(p.name for p in checkpoint.iterdir()) == [PANE_FILE]  # no staged file left behind


def test_offsets_parse_strictly() -> None:
    assert parse_offsets('{"0": 3, "1": 0}', "startingOffsets") == {"0": 3, "1": 0}
    for bad in ("{", "[1]", '{"a": 1}', '{"0": -1}', '{"0": "1"}'):
        with pytest.raises(StreamInputError, match="startingOffsets"):
            parse_offsets(bad, "startingOffsets")


def test_a_record_budget_is_shared_fairly_between_partitions() -> None:
    assert share({"0": 100, "1": 100}, 10) == {"0": 5, "1": 5}
    assert share({"0": 2, "1": 100, "2": 0}, 10) == {"0": 2, "1": 8, "2": 0}
    assert share({"0": 3, "1": 3}, 5) == {"0": 3, "1": 2}
    assert share({"0": 1}, 10) == {"0": 1}


def test_the_next_batch_ends_at_the_latest_offsets_bounded_by_the_cut_and_budget() -> None:
    start = {"0": 10, "1": 4}
    assert next_end(start, {"0": 20, "1": 4, "2": 3}, None, None) == {"0": 20, "1": 4, "2": 3}
    assert next_end(start, {"0": 20, "1": 8}, {"0": 12}, None) == {"0": 12, "1": 8}
    assert next_end(start, {"0": 20, "1": 8}, {"0": 5}, None) == {"0": 10, "1": 8}  # a cut never goes back
    assert next_end(start, {"0": 20, "1": 8}, None, 6) == {"0": 13, "1": 7}
    with pytest.raises(StreamInputError, match="before offset 10"):
        next_end(start, {"0": 3, "1": 4}, None, None)


def test_a_batch_plans_one_range_per_partition_with_records() -> None:
    ranges = plan({"1": 4, "0": 0}, {"1": 9, "0": 0, "10": 2, "2": 1})
    assert [(r.partition, r.start, r.end) for r in ranges] == [(1, 4, 9), (2, 0, 1), (10, 0, 2)]


def test_the_arrow_tasks_check_and_write_the_rows_they_are_given() -> None:
    import pyarrow as pa

    from venice_core.spark.tasks.stream_tasks import check_batches, rows_of

    rows = _rows()
    table = pa.RecordBatch.from_pylist([{**vars(r)} for r in rows])
    assert [tuple(r) for r in rows_of([table])] == [
        (r.topic, r.partition, r.offset, r.timestamp, None, r.value) for r in rows
    ]
    (summary,) = check_batches([table], MAPPING)
    assert summary.to_pylist() == [{"records": 6, "error": None}]


class FailingQuery:
    """A query that fails with `error` when followed (None: runs to its end)."""

    def __init__(self, error: Exception | None) -> None:
        self.error = error


def follow_queries(errors: list[Exception | None], bad_input: str | None = None) -> list[FailingQuery]:
    started: list[FailingQuery] = []
    pending = iter(errors)

    def start() -> FailingQuery:
        started.append(FailingQuery(next(pending)))
        return started[-1]

    def follow(query: FailingQuery) -> None:
        if query.error is not None:
            raise query.error

    follow_restarting(start, follow, lambda: bad_input)
    return started


NOT_CONNECTED = RuntimeError("[STREAM_FAILED] Query terminated with exception: Python worker failed to connect back.")


def test_a_query_whose_python_worker_did_not_connect_back_is_started_again_a_few_times() -> None:
    assert len(follow_queries([NOT_CONNECTED, NOT_CONNECTED, None])) == 3
    with pytest.raises(RuntimeError, match="connect back"):
        follow_queries([NOT_CONNECTED] * (WORKER_RESTARTS + 1))


def test_any_other_failure_or_a_bad_batch_ends_the_query_at_once() -> None:
    with pytest.raises(ValueError, match="boom"):
        follow_queries([ValueError("boom"), None])
    with pytest.raises(StreamInputError, match="event 3 has no key"):
        follow_queries([NOT_CONNECTED, None], bad_input="event 3 has no key")
