"""Drain of streaming pipelines through real Kafka and spark-submit (issue 13).

The windowed pipeline (a shuffle and state) under events produced at a steady rate: first `query.stop()` where a
drain was asked for (the contrast: what an upgrade that must drop the state then loses), then the same pipeline
resumed, drained, and upgraded to a job whose state schema changed, which starts with fresh state from exactly the
drained offsets and is itself drained at start (its notification written before its job started). Every event up to
where the last run stopped is counted exactly once in the store, and every window open at the drain was written
early by the drained run. The map-only pipeline: drained at start on a single partition; then a drain that cannot
finish (a task hangs mid-batch) times out, stops without cleaning up, and says so. A drain stopped with its marker
batch committed (where a timeout stops it), then the pipeline resumed on its checkpoint: every event of the resumed run
is counted, none dropped as late."""

from __future__ import annotations

import collections
import json
import time
import uuid
from pathlib import Path

import pytest

from tests.support.drain import SteadyProducer, rt_puts
from tests.support.jobs import RecordsJob
from tests.support.platform import PlatformEnv
from tests.support.reads import wait_for
from venice_core.client import ReadClient
from venice_core.controller import drain, stores, streams
from venice_core.protocol import serde
from venice_core.pubsub import admin
from venice_core.spark.jobs.checkpoint_log import last_batch, source_offsets
from venice_core.spark.jobs.stream import HANG_AFTER_MARKERS_CONF, HOLD_BATCH_CONF, STOP_INSTEAD_OF_DRAIN_CONF
from venice_core.spark.specs.drain_markers import MARKER_KEY
from venice_core.spark.submit import StreamJobRequest
from venice_core.streams import control, upgrade

pytestmark = pytest.mark.spark  # every test here runs spark-submit

REGION = "dc-0"
WINDOW_SECONDS = 2.0


def _counts_store(env: PlatformEnv, partitions: int, ingested: bool = True) -> str:
    """A hybrid store for the windows' counts; `ingested`: with a version that ingests them (else the real-time
    topic only, read by the test)."""
    store = f"windows_{uuid.uuid4().hex[:8]}"
    stores.create_store(env.meta, env.config, store, '"string"', '"long"', partitions=partitions)
    stores.update_store(env.meta, env.config, store, hybrid_rewind_seconds=3600, hybrid_offset_lag_threshold=0)
    if ingested:
        env.push(store, RecordsJob({"seed": 0}))  # a hybrid version to ingest the nearline writes
    return store


def _windowed_pipeline(
    env: PlatformEnv, partitions: int, confs: dict[str, str], ingested: bool = True
) -> StreamJobRequest:
    """A `window_count` pipeline of its own: a new source topic of `partitions` into a new counts store."""
    store = _counts_store(env, partitions, ingested)
    bootstrap = env.config.region(REGION).kafka_bootstrap
    source = f"events_{uuid.uuid4().hex[:8]}"
    admin.create_topic(bootstrap, source, partitions)
    return StreamJobRequest(
        f"w{uuid.uuid4().hex[:8]}", store, REGION, source, bootstrap, "user", event_time_field="ts",
        trigger_seconds=0.5, transform="window_count", window_seconds=WINDOW_SECONDS, watermark_seconds=1.0,
        drain_poll_seconds=0.5, confs=confs,
    )  # fmt: skip


def _window(ts: int) -> int:
    size = int(WINDOW_SECONDS * 1000)
    return ts - ts % size


def _panes(puts: list[tuple[str, int]]) -> dict[tuple[str, int], dict[str, int]]:
    """(user, window start) -> {pane: count}; a pane written twice would be a duplicate key."""
    panes: dict[tuple[str, int], dict[str, int]] = collections.defaultdict(dict)
    for key, count in puts:
        user, start, pane = key.split("|")
        assert pane not in panes[(user, int(start))], f"pane {key} written twice"
        panes[(user, int(start))][pane] = count
    return panes


def test_drain_then_upgrade_to_a_new_state_schema_counts_every_event_once(
    platform_env: PlatformEnv, tmp_path: Path
) -> None:
    env, config, meta = platform_env, platform_env.config, platform_env.meta
    partitions = 2
    request = _windowed_pipeline(env, partitions, {STOP_INSTEAD_OF_DRAIN_CONF: "true"})
    name, store, bootstrap, source = request.name, request.store, request.source_bootstrap, request.source_topic
    producer = SteadyProducer(bootstrap, source, partitions, rate=100).start()
    job = control.process(config, name)
    key_schema, value_schema = serde.parse("string"), serde.parse("long")

    def puts() -> list[tuple[str, int]]:
        return [(k, v) for k, v in rt_puts(env, REGION, store, partitions, key_schema, value_schema)]

    try:
        # The contrast: query.stop() where a drain was asked for.
        control.start(config, meta, request)
        wait_for("two batches", lambda: (streams.get_pipeline(meta, name).last_batch_id or 0) >= 1)
        stopped = upgrade.request_drain(config, meta, name)
        wait_for("the stop", lambda: job.pid() is None)
        record = streams.get_pipeline(meta, name)
        assert record.state == streams.STOPPED and record.drain["outcome"] == "stopped"
        read = producer.upto(record.offsets)  # what the stopped run had read and committed
        counted = sum(puts_count for _key, puts_count in puts())
        lost = len(read) - counted
        open_windows = {(p.event["user"], _window(p.event["ts"])) for p in read} - {
            (k.split("|")[0], int(k.split("|")[1])) for k, _v in puts()
        }
        print(
            f"\nquery.stop() in place of drain (run {stopped.run_id[:8]}): of {len(read)} events read and committed, "
            f"{counted} are counted in the store; {lost} sit only in the state of {len(open_windows)} open windows. "
            "An upgrade whose state schema changed must delete that state: those events are lost (or counted twice, "
            "if the new run rewinds to the windows' first events)."
        )
        assert lost > 0 and open_windows

        # The same pipeline resumed from its checkpoint (state intact), drained, upgraded to a new state schema.
        # Its first batch is held before it writes: the drain is asked for while that batch is in flight.
        hold = tmp_path / "hold"
        hold.touch()
        resumed = control.start(
            config, meta, StreamJobRequest.of({**request.to_json(), "confs": {HOLD_BATCH_CONF: str(hold)}})
        )
        first_run = resumed.record.run_id
        held = int(wait_for("a held batch", lambda: Path(f"{hold}.held").exists() and Path(f"{hold}.held").read_text()))
        requested = upgrade.request_drain(config, meta, name, timeout_seconds=120)
        wait_for("the cut", lambda: (streams.get_pipeline(meta, name).drain or {}).get("uuid") == requested.uuid)
        waiting = f"drain {requested.uuid}: waiting for batch {held} in flight"
        wait_for("the drain waiting for the held batch", lambda: waiting in job.log_file.read_text())
        waiting_seen = time.monotonic()
        assert upgrade.drain_outcome(config, meta, name, first_run) is None  # the drain is at the batch: held there
        released = time.monotonic()
        hold.unlink()
        outcome = wait_for("the drain", lambda: upgrade.drain_outcome(config, meta, name, first_run))
        drained = streams.get_pipeline(meta, name)
        assert outcome == streams.DRAINED, (outcome, job.log_tail())
        report = drained.drain
        assert report["uuid"] == requested.uuid and report["outcome"] == "drained"
        # Finished, not cancelled: the drain waited at least from its saying so to the batch's release.
        assert report["batch_in_flight"] == held
        assert report["waited_for_batch_s"] >= round(released - waiting_seen, 3), (report, released - waiting_seen)
        assert drained.offsets == report["cut"] == report["offsets"]  # processed exactly to the cut
        checkpoint = control.checkpoint_dir(config, name)
        assert last_batch(checkpoint, "offsets") == last_batch(checkpoint, "commits") == report["last_batch"]
        assert drain.read(meta, name) == []  # cleaned up after the clean stop
        assert job.pid() is None
        print(f"drained: {upgrade.describe_drain(report)}")

        # Every window open at the drain was written early by the drained run: all the events it had read.
        first_pane = stopped.run_id[:8]  # the checkpoint's pane: its first run's, kept by the resumed run
        read = producer.upto(drained.offsets)
        per_window = collections.Counter((p.event["user"], _window(p.event["ts"])) for p in read)
        panes = _panes(puts())
        assert {w: sum(panes[w].values()) for w in per_window} == dict(per_window)

        # The new deployment: another state schema, fresh state, from the drained offsets; drained at start.
        second_run = upgrade.start_upgraded(config, meta, name, {"transform": "window_count_v2"})
        drain.write(meta, name, second_run, timeout_seconds=120)  # before its job has started
        assert control.checkpoint_dir(config, name).with_name("checkpoint.drained").exists()
        outcome = wait_for("the drain at start", lambda: upgrade.drain_outcome(config, meta, name, second_run))
        assert outcome == streams.DRAINED, (outcome, job.log_tail())
        produced = producer.stop()
        final = streams.get_pipeline(meta, name)
        assert final.args["starting_offsets"] == json.dumps(drained.offsets, sort_keys=True)
        assert final.drain["cut"] == final.offsets and sum(final.offsets.values()) < len(produced)  # none past it

        # Every event up to where the last run stopped counted exactly once, split across the two runs' panes.
        read = producer.upto(final.offsets)
        expected = collections.Counter((p.event["user"], _window(p.event["ts"])) for p in read)
        panes = _panes(puts())
        assert {w: sum(c.values()) for w, c in panes.items()} == dict(expected)
        straddling = [w for w, c in panes.items() if set(c) == {first_pane, second_run[:8]}]
        assert straddling, "no window was open across the drain"
        print(f"drain + upgrade: {len(read)} events, each counted once; {len(straddling)} windows open at the drain, "
              "each written early by the drained run and completed by the new one")  # fmt: skip

        # And the store serves it.
        client = ReadClient("127.0.0.1", config.server_port(REGION))
        wanted = {f"{u}|{s}|{pane}": n for (u, s), c in panes.items() for pane, n in c.items()}
        wait_for("dc-0 to serve every pane", lambda: client.batch_get(store, sorted(wanted)) == wanted)
        client.close()
    finally:
        producer.stop()
        job.stop(timeout=10)


def test_a_map_only_pipeline_drains_at_start_when_notified_before_it(platform_env: PlatformEnv) -> None:
    """One source partition, events already there; the drain notification is written once the run is recorded,
    before its job starts: the job takes its cut at start, writes every event up to it, commits, stops and cleans
    up. No shuffle, no state: the markers only end the source."""
    env, config, meta = platform_env, platform_env.config, platform_env.meta
    store = _counts_store(env, partitions=1)
    bootstrap = config.region(REGION).kafka_bootstrap
    source = f"events_{uuid.uuid4().hex[:8]}"
    admin.create_topic(bootstrap, source, 1)
    producer = SteadyProducer(bootstrap, source, 1, rate=500).start()
    wait_for("events in the source topic", lambda: producer.produced)  # there before the job starts: a cut past 0
    name = f"m{uuid.uuid4().hex[:8]}"
    request = StreamJobRequest(name, store, REGION, source, bootstrap, "user", ("n",), "ts", trigger_seconds=0.5)
    job = control.process(config, name)
    try:
        run_id = control.start(config, meta, request, wait=False).record.run_id
        drain.write(meta, name, "an-earlier-run")  # stale: ignored
        drained = env.cli("stream", "drain", name, "--local")  # while the job starts: it drains at start
        assert drained.returncode == 0, (drained.stderr, job.log_tail())
        assert f"drain of {name} requested (run {run_id}" in drained.stdout
        assert f"{name}: drained" in drained.stdout and "last drain: offsets" in drained.stdout, drained.stdout
        producer.stop()
        log = job.log_file.read_text()
        assert log.index("drain ") < log.index("query "), "the cut was not taken before the query started"
        record = streams.get_pipeline(meta, name)
        report = record.drain
        assert record.run_id == run_id and report["batch_in_flight"] is None
        assert record.offsets == report["cut"] == {"0": len(producer.upto(record.offsets))}
        assert 0 < record.offsets["0"] < len(producer.produced)  # producing went on past the cut: not read
        checkpoint = control.checkpoint_dir(config, name)
        assert last_batch(checkpoint, "offsets") == last_batch(checkpoint, "commits") == report["last_batch"]
        assert [n.notification.run_id for n in drain.read(meta, name)] == ["an-earlier-run"]  # its own cleaned up
        puts = rt_puts(env, REGION, store, 1, serde.parse("string"), serde.parse("long"))
        expected = [(p.event["user"], p.event["n"]) for p in producer.upto(record.offsets)]
        assert sorted(puts) == sorted(expected)  # each event up to the cut written once
        status = env.cli("stream", "status", name, check=True).stdout
        assert status.startswith(f"{name}: drained") and "last drain: offsets" in status, status
    finally:
        producer.stop()
        job.stop(timeout=10)


def test_a_run_resumed_after_a_drain_cut_short_past_its_markers_counts_every_event_of_its_own(
    platform_env: PlatformEnv,
) -> None:
    """The windowed pipeline on one partition. Its drain stops with the marker batch committed, as a drain timeout
    stops it there: the batch after the markers, which fires the windows, hangs in a task after one write, and the
    job is killed at that point (the checkpoint a timeout leaves, without waiting the timeout out; the timeout itself
    is `test_rollout_failures`'). Spark's checkpoint then holds the markers' watermark, infinity. The pipeline
    resumed on it (`venice stream start`) undoes the earlier run's markers, so it counts every event it reads, in the
    windows open at the cut-short drain too (none dropped as late), and its own drain emits markers of its own."""
    env, config, meta = platform_env, platform_env.config, platform_env.meta
    request = _windowed_pipeline(env, 1, {HANG_AFTER_MARKERS_CONF: "true"}, ingested=False)  # its writes read whole
    name, store = request.name, request.store
    producer = SteadyProducer(request.source_bootstrap, request.source_topic, 1, rate=50).start()
    job, checkpoint = control.process(config, name), control.checkpoint_dir(config, name)
    try:
        first_run = control.start(config, meta, request).record.run_id
        upgrade.request_drain(config, meta, name, timeout_seconds=600)
        hung = control.pipeline_dir(config, name) / "test-hang-claimed"  # `BatchSpec.hangs_now`'s

        def hanging() -> bool:
            assert hung.exists() or job.pid() is not None, f"the job exited first:\n{job.log_tail()}"
            return hung.exists()

        wait_for("the batch after the markers to hang", hanging)
        job.kill()
        cut = streams.get_pipeline(meta, name).drain["cut"]["0"]
        # The marker batch committed, its markers carrying the run's id; the batch after it did not.
        marker_batch = last_batch(checkpoint, "commits")
        assert marker_batch is not None and last_batch(checkpoint, "offsets") == marker_batch + 1, job.log_tail()
        assert source_offsets(checkpoint, marker_batch)[MARKER_KEY] == first_run

        resumed = control.start(config, meta, StreamJobRequest.of({**request.to_json(), "confs": {}}))
        second_run = resumed.record.run_id
        assert f"drain markers of run {first_run} at batch {marker_batch}" in job.log_file.read_text()
        wait_for("the resumed run reading on", lambda: streams.get_pipeline(meta, name).offsets.get("0", 0) > cut + 50)
        upgrade.request_drain(config, meta, name, timeout_seconds=120)
        outcome = wait_for("its drain", lambda: upgrade.drain_outcome(config, meta, name, second_run))
        assert outcome == streams.DRAINED, (outcome, job.log_tail())
        drained = streams.get_pipeline(meta, name)
        assert source_offsets(checkpoint, drained.drain["last_batch"])[MARKER_KEY] == second_run  # markers of its own
        producer.stop()

        # Every event up to where the resumed run drained counted once: each window's panes as the store keeps them
        # (the latest write of a key wins: the hung batch's early write of a window open at the first drain is
        # overwritten by the window's whole count).
        read = producer.upto(drained.offsets)
        assert sum(p.offset >= cut for p in read) > 50
        latest = dict(rt_puts(env, REGION, store, 1, serde.parse("string"), serde.parse("long")))
        counted: collections.Counter[tuple[str, int]] = collections.Counter()
        for key, count in latest.items():
            user, start, _pane = key.split("|")
            counted[(user, int(start))] += count
        assert counted == collections.Counter((p.event["user"], _window(p.event["ts"])) for p in read)
    finally:
        producer.stop()
        job.stop(timeout=10)
