"""The nearline streaming job: `spark-submit venice_core/spark/jobs/stream.py --name P --run-id R --store S ...`,
started and stopped by `venice stream` (`streams.control`), which renders its command line
(`spark.submit.stream_job_spec`).

A Spark Structured Streaming query reads the source topic's JSON events (`spark.tasks.kafka_source`, a Python data
source) and writes each micro-batch to the store's real-time topic in one region (`foreachBatch`): first every event of
the batch is mapped and checked on the executors, and only a batch with no bad event is written, a task per source
partition, each with a producer GUID derived from (query id, batch id, partition) (`spark.tasks.stream_tasks`). A bad
batch fails the query with the first bad event named, and nothing of it is written; run again, the query replays it.

The job reports to the metadata store as the pipeline's current run: running (with Spark's query id), each batch's
source offsets (from Spark's offset log), or failed and why. Spark's checkpoint (offsets log, commits, the query
id) is the one given. Between the source and the writes runs the pipeline's transform (`spark.jobs.stream_transforms`:
map only, or a windowed count with state). A `DrainMonitor` watches for a drain notification meant for the run, at
start and every `--drain-poll-seconds`; on one, the job drains (`spark.jobs.stream_drain`) and exits. A run started on a
checkpoint that another run's drain marked (that drain timed out or was stopped) first undoes those markers
(`spark.jobs.drain_resume`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from venice_core.config import ClusterConfig, load_config
from venice_core.controller import drain, streams
from venice_core.errors import StreamInputError, VeniceError
from venice_core.meta import MetadataStore
from venice_core.nearline.writer import resolve_target
from venice_core.pubsub import admin
from venice_core.spark.jobs import drain_resume
from venice_core.spark.jobs.checkpoint_log import batch_end_offsets, source_offsets
from venice_core.spark.jobs.drain_monitor import DEFAULT_INTERVAL_SECONDS, DrainMonitor
from venice_core.spark.jobs.stream_drain import (
    DEFAULT_TIMEOUT_SECONDS,
    DRAINED,
    STOPPED,
    BatchTracker,
    Drainer,
    DrainTimedOut,
    cut_path,
)
from venice_core.spark.jobs.stream_transforms import TransformSpec
from venice_core.spark.specs.drain_markers import MARKER_KEY
from venice_core.spark.tasks.stream_tasks import (
    CHECK_SCHEMA,
    WRITE_SCHEMA,
    BatchSpec,
    EventMapping,
    check_batches,
    write_batches,
)

MARKER = "StreamInputError: "
# Fault injection for the recovery test (see `BatchSpec.hang_after`); spark-submit passes on only `spark.*`.
HANG_AFTER_CONF = "spark.venice.stream.test.hang.after.records"
# The contrast of the drain test: on a drain notification, `query.stop()` (what Spark offers) instead of a drain.
STOP_INSTEAD_OF_DRAIN_CONF = "spark.venice.stream.test.stop.instead.of.drain"
# For the drain test: while this file exists, a batch waits before it writes (`<file>.held` names it), so a drain is
# asked for while a batch is surely in flight.
HOLD_BATCH_CONF = "spark.venice.stream.test.hold.batch.while"
# For the resume test: the batch after the drain markers' (the one that fires the windows) hangs in a task after one
# write, as `HANG_AFTER_CONF` does: the drain cannot finish, its marker batch committed (where a timeout stops it).
HANG_AFTER_MARKERS_CONF = "spark.venice.stream.test.hang.after.drain.markers"


# The mark of the checkpoint's window panes, in the checkpoint: a run resumed on it writes the panes its state
# continues, and a batch the last run wrote but did not commit is replayed with the same keys (the same bytes
# under the same producer GUIDs, skipped as duplicates). A run id as the pane put the replay's keys in other
# real-time partitions than the first attempt's, so a GUID's segment got more messages after it had ended.
PANE_FILE = "venice-pane"


def checkpoint_pane(checkpoint: Path, run_id: str, own: bool = False) -> str:
    """The pane of the windows written from this checkpoint: the first run's id (its first 8 characters), kept in
    the checkpoint. A start after a drain gets a fresh checkpoint, so the next deployment writes a pane of its own; a
    run resumed on a checkpoint whose windows a drain fired (`own`) takes the pane over with its id."""
    path = checkpoint / PANE_FILE
    if own or not path.exists():
        checkpoint.mkdir(parents=True, exist_ok=True)
        staged = path.with_name(f"{PANE_FILE}.{run_id}")
        staged.write_text(run_id[:8])
        staged.replace(path)  # whole or absent: a killed start leaves no empty pane
    return path.read_text().strip()


def transform_spec(args: argparse.Namespace, pane: str = "") -> TransformSpec:
    return TransformSpec(
        args.transform,
        key_field=args.key_field,
        event_time_field=args.event_time_field or None,
        window_seconds=args.window_seconds,
        watermark_seconds=args.watermark_seconds,
        pane=pane,
    )


def store_mapping(config: ClusterConfig, meta: MetadataStore, args: argparse.Namespace) -> EventMapping:
    """The event mapping for the store as it is now (the region's real-time topic, the key schema and every value
    schema); a VeniceError if the store cannot take nearline writes there, StreamInputError if no event could map
    to a write."""
    target = resolve_target(args.store, args.region, config=config, meta=meta)
    if admin.partition_count(target.bootstrap, target.topic) is None:
        raise StreamInputError(f"the real-time topic {target.topic} of '{args.store}' does not exist")
    return transform_spec(args).mapping(target, tuple(f for f in (args.value_fields or "").split(",") if f))


def check_source(bootstrap: str, topic: str) -> None:
    """StreamInputError if the source topic does not exist (before Spark starts: the cause in one line)."""
    from venice_core.spark.tasks.kafka_source import _consumer, topic_partitions

    consumer = _consumer(bootstrap)
    try:
        topic_partitions(consumer, topic, bootstrap)
    finally:
        consumer.close()


def query_id(checkpoint: Path) -> str:
    """Spark's id of the query, which its checkpoint keeps across restarts (`metadata`, written before any batch)."""
    return cast(str, json.loads((checkpoint / "metadata").read_text().splitlines()[0])["id"])


class BatchWriter:
    """The `foreachBatch` function: check the whole batch, then write it, then record the offsets it reached."""

    def __init__(
        self, meta: MetadataStore, args: argparse.Namespace, mapping: EventMapping, transform: TransformSpec
    ) -> None:
        self.meta, self.args, self.mapping, self.transform = meta, args, mapping, transform
        self._query_id: str | None = None
        self.failure: str | None = None  # why the last batch was refused, for the pipeline's status
        self.tracker = BatchTracker()

    def __call__(self, batch: Any, batch_id: int) -> None:
        self.tracker.started(batch_id)
        records = 0
        try:
            hold = batch.sparkSession.conf.get(HOLD_BATCH_CONF, "")
            if hold and Path(hold).exists():
                Path(f"{hold}.held").write_text(str(batch_id))
                while Path(hold).exists():
                    time.sleep(0.1)
            records = self._write(self.transform.batch_rows(batch), batch_id)
        finally:
            self.tracker.finished(records)

    def _follows_markers(self, batch_id: int) -> bool:
        """Whether the batch before this one read the drain markers (its offsets carry their key)."""
        return batch_id > 0 and MARKER_KEY in source_offsets(Path(self.args.checkpoint), batch_id - 1)

    def _write(self, batch: Any, batch_id: int) -> int:
        if self._query_id is None:
            self._query_id = query_id(Path(self.args.checkpoint))
        mapping = self.mapping
        hang_after = int(batch.sparkSession.conf.get(HANG_AFTER_CONF, "0"))
        if batch.sparkSession.conf.get(HANG_AFTER_MARKERS_CONF, "false") == "true" and self._follows_markers(batch_id):
            hang_after = 1
        marker = str(Path(self.args.checkpoint).parent / "test-hang-claimed")
        spec = BatchSpec(self._query_id, batch_id, mapping, hang_after, marker)
        began = time.monotonic()
        batch.persist()  # read the source once for both passes
        try:
            # Both passes are Arrow tasks over the cached batch (its partitions the source's ranges): the Python
            # workers that read the source run them too, where an RDD pass would start workers of its own.
            summaries = batch.mapInArrow(lambda it: check_batches(it, mapping), CHECK_SCHEMA).collect()
            errors = sorted(row.error for row in summaries if row.error)
            if errors:
                self.failure = f"batch {batch_id} not written: {errors[0]}"
                raise StreamInputError(self.failure)
            checked = time.monotonic()
            written_rows = batch.mapInArrow(lambda it: write_batches(it, spec), WRITE_SCHEMA).collect()
        finally:
            batch.unpersist()
        written = time.monotonic()
        offsets = batch_end_offsets(Path(self.args.checkpoint), batch_id)  # planned before the batch ran
        records: int = sum(row.records for row in written_rows)
        streams.record_batch(self.meta, self.args.name, self.args.run_id, batch_id, offsets)
        print(
            f"batch {batch_id}: {records} records written (checked in {checked - began:.2f}s, written in "
            f"{written - checked:.2f}s), offsets {json.dumps(offsets, sort_keys=True)}",
            flush=True,
        )
        return records


def failure_reason(exc: BaseException) -> str:
    """One line: the bad input if that is what failed (a StreamInputError, raised on the driver or inside Spark),
    else the error's first line."""
    if isinstance(exc, StreamInputError | VeniceError):
        return str(exc)
    text = str(exc)
    if MARKER in text:
        return text.split(MARKER, 1)[1].splitlines()[0]
    text = text.strip()
    return text.splitlines()[0] if text else type(exc).__name__


def run_query(spark: Any, meta: MetadataStore, args: argparse.Namespace, mapping: EventMapping) -> None:
    from venice_core.spark.tasks.kafka_source import KafkaDataSource

    checkpoint = Path(args.checkpoint)
    cut_file = cut_path(checkpoint)
    cut_file.unlink(missing_ok=True)  # an earlier run's cut (a drain that timed out) bounds no later run
    earlier = drain_resume.find(checkpoint)  # an earlier run's drain markers: their watermark must not hold here
    pane = checkpoint_pane(checkpoint, args.run_id, own=earlier is not None and earlier.fired)
    if earlier is not None:
        drain_resume.undo(checkpoint, earlier)  # after the pane: a start that dies between finds the drain again
        print(earlier.describe(), flush=True)
    requested = threading.Event()
    monitor = DrainMonitor(
        lambda: drain.for_run(meta, args.name, args.run_id),
        lambda _stored: requested.set(),
        interval=args.drain_poll_seconds,
        on_error=lambda exc: print(f"drain monitor: {exc}", flush=True),
    )
    transform = transform_spec(args, pane)
    writer = BatchWriter(meta, args, mapping, transform)
    drainer = Drainer(meta, args.name, args.run_id, checkpoint, writer.tracker, args.drain_timeout_seconds)
    stop_instead = spark.conf.get(STOP_INSTEAD_OF_DRAIN_CONF, "false") == "true"
    found = monitor.check_now()
    if found is not None and not stop_instead:  # written before the start: drains at start
        drainer.begin(found, args.source_bootstrap, args.source_topic)

    spark.dataSource.register(KafkaDataSource)

    def start() -> Any:
        reader = (
            spark.readStream.format(KafkaDataSource.name())
            .option("topic", args.source_topic)
            .option("bootstrap", args.source_bootstrap)
            .option("startingOffsets", args.starting_offsets)
            .option("maxRecordsPerBatch", str(args.max_records_per_batch))
            .option("initialOffsetsPath", str(checkpoint / "venice-initial-offsets.json"))
            .option("drainCutPath", str(cut_file))
            .option("runId", args.run_id)
        )
        started = (
            transform.apply(reader.load())
            .writeStream.queryName(f"venice-stream-{args.name}")
            .foreachBatch(writer)
            .option("checkpointLocation", args.checkpoint)
            .trigger(processingTime=f"{round(args.trigger_seconds * 1000)} milliseconds")
            .start()
        )
        streams.record_running(meta, args.name, args.run_id, str(started.id))
        print(f"query {started.id} running (run {args.run_id})", flush=True)
        return started

    monitor.start()
    try:
        follow_restarting(
            start,
            lambda query: follow(query, requested, monitor, drainer, stop_instead, args),
            lambda: writer.failure,
        )
    finally:
        monitor.stop()


# A Python worker Spark's driver starts itself (the data source's planner and offsets runner, not a task, which
# Spark retries) has 10 s to connect back, which a saturated machine can miss. The query then fails before or
# between batches; restarted from its checkpoint, it replans what was not committed and writes nothing twice (a
# replayed batch's writes carry the same producer GUIDs and sequence numbers, skipped as duplicates).
WORKER_RESTARTS = 3
WORKER_DID_NOT_CONNECT = "Python worker failed to connect back"


def worker_did_not_connect(exc: BaseException) -> bool:
    return WORKER_DID_NOT_CONNECT in str(exc)


def follow_restarting(
    start: Callable[[], Any], follow_query: Callable[[Any], None], bad_input: Callable[[], str | None]
) -> None:
    """Start the query and follow it; a query that failed because a Python worker did not connect back is started
    again, up to `WORKER_RESTARTS` times. A bad batch (`bad_input`) fails at once, as its error."""
    restarts = 0
    while True:
        query = start()
        try:
            follow_query(query)
            return
        except Exception as exc:
            if (failure := bad_input()) is not None:
                raise StreamInputError(failure) from exc
            if restarts >= WORKER_RESTARTS or not worker_did_not_connect(exc):
                raise
            restarts += 1
            print(f"query failed ({failure_reason(exc)}): restarted from its checkpoint ({restarts})", flush=True)


def follow(
    query: Any,
    requested: threading.Event,
    monitor: DrainMonitor,
    drainer: Drainer,
    stop_instead: bool,
    args: argparse.Namespace,
) -> None:
    """Wait on the running query until a drain (or a stop instead) is asked for and done; the query's error if it
    fails. A drain begun before a restart goes on with the next query (its cut, `drainer.report`, stays)."""
    while not query.awaitTermination(0.2):
        if not requested.is_set():
            continue
        assert monitor.found is not None
        if stop_instead:
            query.stop()
            note = {"uuid": str(monitor.found.notification.uuid), "outcome": STOPPED, "stopped_at": time.time()}
            streams.record_drain(drainer.meta, args.name, args.run_id, note, streams.STOPPED)
            drain.cleanup(drainer.meta, args.name, args.run_id)
            print("query stopped (query.stop()) instead of draining", flush=True)
            return
        report = drainer.report or drainer.begin(monitor.found, args.source_bootstrap, args.source_topic)
        report = drainer.finish(query, report)
        if report.outcome != DRAINED:  # recorded as FAILED with the cause; the notification stays
            raise DrainTimedOut(streams.get_pipeline(drainer.meta, args.name).last_error or "drain timed out")
        return


def run(args: argparse.Namespace, config: ClusterConfig | None = None) -> None:
    config = config or load_config()
    meta = MetadataStore(config.metadata_db_url)
    try:
        try:
            mapping = store_mapping(config, meta, args)
            check_source(args.source_bootstrap, args.source_topic)
            from pyspark.sql import SparkSession

            spark = SparkSession.builder.appName(f"venice-stream-{args.name}").getOrCreate()
            spark.sparkContext.setLogLevel("WARN")
            try:
                run_query(spark, meta, args, mapping)
            finally:
                spark.stop()
        except Exception as exc:
            reason = failure_reason(exc)
            streams.record_failure(meta, args.name, args.run_id, reason)
            raise StreamInputError(reason) from exc
    finally:
        meta.dispose()


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="venice-stream-job", description=__doc__.splitlines()[0])
    parser.add_argument("--name", required=True, help="the pipeline")
    parser.add_argument("--run-id", required=True, help="this start of the pipeline")
    parser.add_argument("--store", required=True)
    parser.add_argument("--region", required=True, help="whose real-time topic to write")
    parser.add_argument("--source-topic", required=True)
    parser.add_argument("--source-bootstrap", required=True)
    parser.add_argument("--key-field", required=True)
    parser.add_argument("--value-fields", default="", help="comma-separated; default: every field but key and time")
    parser.add_argument("--event-time-field", default="")
    parser.add_argument("--starting-offsets", default="earliest")
    parser.add_argument("--max-records-per-batch", type=int, default=100_000, help="0: no limit")
    parser.add_argument("--trigger-seconds", type=float, default=1.0)
    parser.add_argument("--checkpoint", required=True, help="Spark's checkpoint directory")
    parser.add_argument("--transform", default="map", help="map, window_count or window_count_v2")
    parser.add_argument("--window-seconds", type=float, default=10.0)
    parser.add_argument("--watermark-seconds", type=float, default=5.0)
    parser.add_argument("--drain-poll-seconds", type=float, default=DEFAULT_INTERVAL_SECONDS)
    parser.add_argument("--drain-timeout-seconds", type=float, default=DEFAULT_TIMEOUT_SECONDS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        run(args)
    except Exception as exc:  # noqa: BLE001 - one line for the log; the cause is recorded with the pipeline
        print(f"error: {failure_reason(exc)}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
