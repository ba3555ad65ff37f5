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
from venice_core.spark.jobs import drain_resume
from venice_core.spark.jobs.checkpoint_log import LogEntry, batch_end_offsets, hadoop_crc, last_batch, source_offsets
from venice_core.spark.jobs.drain_monitor import DrainMonitor
from venice_core.spark.jobs.stream import checkpoint_pane
from venice_core.spark.jobs.stream_drain import BatchTracker
from venice_core.spark.jobs.stream_transforms import TransformSpec
from venice_core.spark.specs.drain_markers import MARKER_EVENT_TIME_MS, MARKER_KEY
from venice_core.spark.submit import StreamJobRequest
from venice_core.spark.tasks import kafka_source
from venice_core.spark.tasks.kafka_source import (
    MarkerRange,
    OffsetRange,
    marker_value,
)
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


def test_the_source_reads_to_the_cut_then_emits_one_marker_per_partition_with_its_run_id() -> None:
    latest, cut = {"0": 50, "1": 30}, {"0": 40, "1": 30}
    start = {"0": 10, "1": 10}
    end = kafka_source.with_markers(start, kafka_source.next_end(start, latest, cut, 25), cut, "run-2")
    assert end == {"0": 23, "1": 22}  # the budget shared; not at the cut yet: no markers
    end = kafka_source.with_markers(end, kafka_source.next_end(end, latest, cut, None), cut, "run-2")
    assert end == {"0": 40, "1": 30, MARKER_KEY: "run-2"}  # at the cut, nothing past it, this run's markers
    again = kafka_source.with_markers(
        end, kafka_source.next_end(kafka_source.data_offsets(end), latest, cut, None), cut, "run-2"
    )
    assert again == end  # nothing more: Spark runs no batch
    reader = kafka_source.KafkaStreamReader({"topic": "t", "bootstrap": "b", "runId": "run-2"})
    ranges = reader.partitions({"0": 23, "1": 22}, end)
    assert [(r.partition, r.start, r.end) for r in ranges if isinstance(r, OffsetRange)] == [(0, 23, 40), (1, 22, 30)]
    (markers,) = [r for r in ranges if isinstance(r, MarkerRange)]
    assert list(reader.read(markers)) == [("t", 0, -1, MARKER_EVENT_TIME_MS, None, b'{"run-id": "run-2"}'),
                                          ("t", 1, -1, MARKER_EVENT_TIME_MS, None, b'{"run-id": "run-2"}')]  # fmt: skip
    assert reader.partitions(end, end) == []  # markers are read once
    # Another run's key where this run starts: not carried on, so this run's own drain emits its own markers.
    theirs = {"0": 40, "1": 30, MARKER_KEY: "run-1"}
    assert kafka_source.with_markers(theirs, {"0": 45, "1": 30}, None, "run-2") == {"0": 45, "1": 30}
    mine = kafka_source.with_markers({"0": 45, "1": 30}, {"0": 50, "1": 30}, {"0": 50, "1": 30}, "run-2")
    assert mine[MARKER_KEY] == "run-2" and marker_value("run-2") == b'{"run-id": "run-2"}'


def test_the_cut_file_bounds_the_source(tmp_path: Path) -> None:
    path = tmp_path / "cut.json"
    reader = kafka_source.KafkaStreamReader({"topic": "t", "bootstrap": "b", "drainCutPath": str(path)})
    assert reader.cut() is None and reader.drain_cut() is None
    path.write_text('{"0": 5}')
    assert reader.cut() == reader.drain_cut() == {"0": 5}
    reader._watermarks = lambda: {"0": (0, 9), "1": (0, 4)}  # type: ignore[method-assign]  # 1: created after the cut
    assert reader.latestOffset({"0": 2}, ReadAllAvailable()) == {"0": 5, MARKER_KEY: ""}  # no run named


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


INFINITY = MARKER_EVENT_TIME_MS - 1_000  # the watermark a drain's markers leave (their event time less the delay)


def _spark_log(checkpoint: Path, planned: int, committed: int | None, marker_batch: int, drained_by: Any) -> None:
    """A checkpoint's logs as Spark writes them (each file beside its checksum): batches 0..`planned`, committed up to
    `committed`; the markers in `marker_batch`, whose key the later batches carry, and the watermark at infinity
    from the batch after them on."""
    for log in ("offsets", "commits"):
        (checkpoint / log).mkdir(parents=True)
    for batch in range(planned + 1):
        watermark = INFINITY if batch > marker_batch else 100 * batch
        metadata = {"batchWatermarkMs": watermark, "batchTimestampMs": 7, "conf": {"spark.sql.shuffle.partitions": "2"}}
        offsets = {"0": min(batch, marker_batch) * 10, **({MARKER_KEY: drained_by} if batch >= marker_batch else {})}
        LogEntry("v1", metadata, [offsets]).write(checkpoint, "offsets", batch)
    for batch in range(-1 if committed is None else committed + 1):
        watermark = INFINITY if batch >= marker_batch else 100 * batch + 50
        LogEntry("v1", {"nextBatchWatermarkMs": watermark}, []).write(checkpoint, "commits", batch)
    for file in [*(checkpoint / "offsets").iterdir(), *(checkpoint / "commits").iterdir()]:
        file.with_name(f".{file.name}.crc").write_bytes(hadoop_crc(file.read_bytes()))


def _restored_watermark(checkpoint: Path) -> int:
    """The watermark a restarted query runs its next batch with (Spark's `populateStartOffsets`)."""
    planned, committed = last_batch(checkpoint, "offsets"), last_batch(checkpoint, "commits")
    assert planned is not None
    watermark = int(LogEntry.read(checkpoint, "offsets", planned).metadata["batchWatermarkMs"])
    if committed == planned:
        watermark = max(
            watermark, int(LogEntry.read(checkpoint, "commits", committed).metadata["nextBatchWatermarkMs"])
        )
    return watermark


@pytest.mark.parametrize(
    ("planned", "committed"),
    [(3, 2), (4, 3), (4, 4)],
    ids=["timed out, marker batch planned", "timed out, marker batch committed", "windows fired"],
)
def test_a_resumed_run_undoes_an_earlier_runs_drain_markers(tmp_path: Path, planned: int, committed: int) -> None:
    """Whatever point the earlier run's drain reached, the restarted query's watermark is the one the marker batch
    ran with, no batch reads markers again, the rest of the logs is as Spark wrote it, each file's checksum matches,
    and a second look finds nothing to undo. The pane changes only where the markers fired the windows."""
    checkpoint = tmp_path / "checkpoint"
    marker_batch = 3
    _spark_log(checkpoint, planned, committed, marker_batch, "run-1")
    assert _restored_watermark(checkpoint) == (100 * marker_batch if planned == marker_batch else INFINITY)
    untouched = {(log, b): (checkpoint / log / str(b)).read_bytes() for log in ("offsets", "commits") for b in range(3)}

    found = drain_resume.find(checkpoint)
    assert found == drain_resume.EarlierDrain("run-1", marker_batch, 300, committed > marker_batch)
    drain_resume.undo(checkpoint, found)
    assert _restored_watermark(checkpoint) == 300
    assert all(MARKER_KEY not in source_offsets(checkpoint, b) for b in range(planned + 1))
    assert LogEntry.read(checkpoint, "offsets", planned).metadata["conf"] == {"spark.sql.shuffle.partitions": "2"}
    assert {key: (checkpoint / key[0] / str(key[1])).read_bytes() for key in untouched} == untouched
    for file in [*(checkpoint / "offsets").glob("[0-9]*"), *(checkpoint / "commits").glob("[0-9]*")]:
        assert file.with_name(f".{file.name}.crc").read_bytes() == hadoop_crc(file.read_bytes()), file
    assert drain_resume.find(checkpoint) is None
    assert sorted(p.name for p in (checkpoint / "offsets").iterdir() if not p.name.startswith(".")) == [
        str(b) for b in range(planned + 1)
    ]  # nothing staged left behind

    pane = checkpoint_pane(checkpoint, "run-0-first")
    assert checkpoint_pane(checkpoint, "run-2-resumed", own=found.fired) == ("run-2-re" if found.fired else pane)


def test_a_start_that_died_while_undoing_is_finished_by_the_next_and_old_markers_name_no_run(tmp_path: Path) -> None:
    checkpoint = tmp_path / "checkpoint"
    _spark_log(checkpoint, 4, 3, 3, 1)  # markers written before they carried the run's id
    found = drain_resume.find(checkpoint)
    assert found is not None and found.run_id == "" and "run (unnamed) at batch 3" in found.describe()
    entry = LogEntry.read(checkpoint, "offsets", 4)  # the first start removed the last batch's key, then died
    del entry.source[MARKER_KEY]
    entry.write(checkpoint, "offsets", 4)
    assert drain_resume.find(checkpoint) == found
    drain_resume.undo(checkpoint, found)
    assert drain_resume.find(checkpoint) is None and _restored_watermark(checkpoint) == 300


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
