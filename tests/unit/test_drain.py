"""Drain without a broker or Spark: the notification as the seed specifies it and its serialisation, the
DrainUtils-style helpers on a metadata store (namespaced by pipeline, stale runs ignored, cleanup), the monitor
(checks at start, polls at its interval), the source's cut and markers, and what a drain records."""

from __future__ import annotations

import json
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable

from venice_core.controller import drain, streams
from venice_core.controller.drain import DrainMode, DrainNotification, StoredNotification
from venice_core.errors import ConfigError
from venice_core.meta import MetadataStore
from venice_core.spark import kafka_source
from venice_core.spark.drain_monitor import DrainMonitor
from venice_core.spark.kafka_source import MARKER_EVENT_TIME_MS, MARKER_KEY, MarkerRange, OffsetRange
from venice_core.spark.stream_drain import BatchTracker, batch_end_offsets, last_batch
from venice_core.spark.stream_transforms import TransformSpec
from venice_core.spark.submit import StreamJobRequest
from venice_core.streams import upgrade


def test_a_notification_needs_all_three_fields_and_create_defaults_the_mode() -> None:
    made = DrainNotification.create(uuid.UUID(int=7), "run-1")
    assert made == DrainNotification(uuid.UUID(int=7), "run-1", DrainMode.DEFAULT)
    for bad in ((None, "run-1", DrainMode.DEFAULT), (uuid.UUID(int=7), "", DrainMode.DEFAULT),
                (uuid.UUID(int=7), "run-1", None)):  # fmt: skip
        with pytest.raises(ConfigError):
            DrainNotification(*bad)  # type: ignore[arg-type]


def test_a_notification_round_trips_through_its_serialised_form() -> None:
    notification = DrainNotification.create(uuid.uuid4(), "run-1")
    text = notification.to_json()
    assert json.loads(text) == {"uuid": str(notification.uuid), "runId": "run-1", "drainMode": "DEFAULT"}
    assert DrainNotification.from_json(text) == notification
    for bad in ("{}", "not json", '{"uuid": "x", "runId": "r", "drainMode": "DEFAULT"}',
                json.dumps({"uuid": str(uuid.uuid4()), "runId": "r", "drainMode": "FAST"})):  # fmt: skip
        with pytest.raises(ConfigError, match="not a drain notification"):
            DrainNotification.from_json(bad)


def test_utils_write_read_and_clean_up_per_pipeline_and_ignore_stale_runs(meta: MetadataStore) -> None:
    old = drain.write(meta, "p", "run-1")
    new = drain.write(meta, "p", "run-2", timeout_seconds=5)
    other = drain.write(meta, "q", "run-2")
    assert [n.notification for n in drain.read(meta, "p")] == [old, new]
    assert drain.read(meta, "q") == [StoredNotification(other, None)]
    assert drain.for_run(meta, "p", "run-2") == StoredNotification(new, 5.0)
    assert drain.for_run(meta, "p", "run-3") is None  # run-1's and run-2's are stale for run 3
    assert drain.cleanup(meta, "p", "run-2") == 1
    assert [n.notification for n in drain.read(meta, "p")] == [old] and drain.read(meta, "q")
    assert drain.cleanup(meta, "p") == 1 and drain.read(meta, "p") == []
    with pytest.raises(ConfigError, match="positive"):
        drain.write(meta, "p", "run-1", timeout_seconds=0)


def test_the_monitor_checks_at_start_and_then_polls_at_its_interval(meta: MetadataStore) -> None:
    drain.write(meta, "p", "run-1")  # a stale notification: ignored
    found: list[StoredNotification] = []
    seen, polled_thrice = threading.Event(), threading.Event()
    polls = 0

    def poll() -> StoredNotification | None:
        nonlocal polls
        polls += 1
        if polls == 3:
            polled_thrice.set()
        return drain.for_run(meta, "p", "run-2")

    monitor = DrainMonitor(poll, lambda n: (found.append(n), seen.set()), interval=0.05)
    assert monitor.check_now() is None and polls == 1
    monitor.start()
    try:
        assert polled_thrice.wait(5), "the monitor does not poll"
        assert not found  # two polls of its own, finding nothing for run-2
        notification = drain.write(meta, "p", "run-2")
        assert seen.wait(5)
        assert found == [StoredNotification(notification, None)]
        count = polls
        # Its thread ends once it has found one: it can poll no more, and it has not polled since.
        assert monitor._thread is not None
        monitor._thread.join(5)
        assert not monitor._thread.is_alive() and polls == count and found == [StoredNotification(notification, None)]
    finally:
        monitor.stop()


def test_a_notification_written_before_start_is_found_by_the_check_at_start(meta: MetadataStore) -> None:
    notification = drain.write(meta, "p", "run-1")
    found: list[StoredNotification] = []
    monitor = DrainMonitor(lambda: drain.for_run(meta, "p", "run-1"), found.append, interval=60)
    assert monitor.check_now() == StoredNotification(notification, None) and len(found) == 1
    assert monitor.check_now() is monitor.found and len(found) == 1


def test_the_source_reads_to_the_cut_then_emits_one_marker_per_partition() -> None:
    latest, cut = {"0": 50, "1": 30}, {"0": 40, "1": 30}
    end = kafka_source.with_markers({"0": 10, "1": 10}, kafka_source.next_end({"0": 10, "1": 10}, latest, cut, 25), cut)
    assert end == {"0": 23, "1": 22}  # the budget shared; not at the cut yet: no markers
    end = kafka_source.with_markers(end, kafka_source.next_end(end, latest, cut, None), cut)
    assert end == {"0": 40, "1": 30, MARKER_KEY: 1}  # at the cut, nothing past it, markers
    again = kafka_source.with_markers(
        end, kafka_source.next_end(kafka_source.data_offsets(end), latest, cut, None), cut
    )
    assert again == end  # nothing more: Spark runs no batch
    reader = kafka_source.KafkaStreamReader({"topic": "t", "bootstrap": "b"})
    ranges = reader.partitions({"0": 23, "1": 22}, end)
    assert [(r.partition, r.start, r.end) for r in ranges if isinstance(r, OffsetRange)] == [(0, 23, 40), (1, 22, 30)]
    (markers,) = [r for r in ranges if isinstance(r, MarkerRange)]
    assert list(reader.read(markers)) == [("t", 0, -1, MARKER_EVENT_TIME_MS, None, None),
                                          ("t", 1, -1, MARKER_EVENT_TIME_MS, None, None)]  # fmt: skip
    assert reader.partitions(end, end) == []  # markers are read once


def test_the_cut_file_bounds_the_source(tmp_path: Path) -> None:
    path = tmp_path / "cut.json"
    reader = kafka_source.KafkaStreamReader({"topic": "t", "bootstrap": "b", "drainCutPath": str(path)})
    assert reader.cut() is None and reader.drain_cut() is None
    path.write_text('{"0": 5}')
    assert reader.cut() == reader.drain_cut() == {"0": 5}
    reader._watermarks = lambda: {"0": (0, 9), "1": (0, 4)}  # type: ignore[method-assign]  # 1: created after the cut
    assert reader.latestOffset({"0": 2}, ReadAllAvailable()) == {"0": 5, MARKER_KEY: 1}


def test_offsets_reached_are_read_from_sparks_offset_log(tmp_path: Path) -> None:
    (tmp_path / "offsets").mkdir()
    (tmp_path / "commits").mkdir()
    for batch in (0, 1):
        (tmp_path / "offsets" / str(batch)).write_text(
            f'v1\n{{"batchWatermarkMs":0}}\n{{"0": {batch + 5}, "drain": 1}}'
        )
    (tmp_path / "offsets" / ".1.crc").write_text("")
    (tmp_path / "commits" / "0").write_text("v1\n{}")
    assert batch_end_offsets(tmp_path, 1) == {"0": 6}
    assert (last_batch(tmp_path, "offsets"), last_batch(tmp_path, "commits")) == (1, 0)


def test_the_tracker_says_which_batch_a_drain_waits_for() -> None:
    tracker = BatchTracker()
    assert tracker.wait_idle(time.monotonic() + 1) == (None, True)
    tracker.started(4)
    threading.Timer(0.2, tracker.finished, args=(10,)).start()
    began = time.monotonic()
    assert tracker.wait_idle(time.monotonic() + 5) == (4, True)
    assert time.monotonic() - began >= 0.15 and tracker.last_written_at is not None
    tracker.started(5)
    assert tracker.wait_idle(time.monotonic() + 0.1) == (5, False)  # past the deadline: still in flight


def test_a_drain_is_recorded_with_the_run_and_a_stale_run_cannot_record_one(meta: MetadataStore) -> None:
    first = streams.new_run(meta, "p", "s", "dc-0", "events", {})
    second = streams.new_run(meta, "p", "s", "dc-0", "events", {})
    assert not streams.record_drain(meta, "p", first.run_id, {"outcome": "drained"}, streams.DRAINED)
    assert streams.record_drain(meta, "p", second.run_id, {"outcome": "drained"}, streams.DRAINED, offsets={"0": 3})
    record = streams.get_pipeline(meta, "p")
    assert (record.state, record.drain, record.offsets) == (streams.DRAINED, {"outcome": "drained"}, {"0": 3})


def test_a_windowed_transform_needs_an_event_time_and_known_names() -> None:
    with pytest.raises(ConfigError, match="needs --event-time-field"):
        TransformSpec("window_count", key_field="user")
    with pytest.raises(ConfigError, match="unknown transform 'reduce'"):
        TransformSpec("reduce")
    assert TransformSpec("window_count_v2", "user", "ts").stateful and not TransformSpec().stateful


def test_an_upgrade_changes_the_job_not_the_pipeline(meta: MetadataStore, config: Any) -> None:
    args = StreamJobRequest("p", "s", "dc-0", "events", "b:1", "k").to_json()
    streams.new_run(meta, "p", "s", "dc-0", "events", args)
    for fixed in ("store", "source_topic", "starting_offsets", "source_bootstrap"):
        with pytest.raises(ConfigError, match=f"an upgrade cannot set {fixed}"):
            upgrade.upgraded_request(meta, config, "p", {fixed: "x"})
    request = upgrade.upgraded_request(meta, config, "p", {"transform": "window_count_v2", "confs": {}})
    assert (request.transform, request.key_field, request.store, request.source_bootstrap) == (
        "window_count_v2",
        "k",
        "s",
        "b:1",
    )
