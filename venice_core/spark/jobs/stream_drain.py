"""Draining a streaming pipeline's Spark Structured Streaming query (issue 13), in the job's driver, once its
`DrainMonitor` has found a notification for the run:

1. The cut: the source's end offsets per partition now, written where the source reads it (`spark.tasks.kafka_source`'s
   `drainCutPath`). No batch planned after this reads past it.
2. Wait for the micro-batch in flight (if any) to finish: a batch is never cancelled mid-way.
3. Process everything up to the cut. Once the source has reached the cut, it emits one marker per partition whose
   event time is past every window: the watermark goes to infinity and the next (no-data) batch fires every
   pending window. `processAllAvailable` returns once a trigger finds nothing left to run: the markers read, the
   windows fired, each batch written and flushed by its tasks (`spark.tasks.stream_tasks.write_rows` closes its
   producers) before Spark commits it.
4. Commit: Spark's commit log holds every batch its offset log planned, and the offsets of the last one (the cut)
   are recorded with the pipeline; then the query stops, the run is DRAINED, and only then is the notification
   cleaned up.

A drain timeout (the notification's, else the job's `--drain-timeout-seconds`) bounds steps 2 and 3: past it the
query stops without cleaning up (the notification stays), and the run is FAILED with "drain timed out" as its
cause, which `venice stream status` shows. The phases' times go with the pipeline (`record.drain`). The markers
carry the run's id, and may already be in the checkpoint's logs: a run resumed on it undoes them before its query
starts (`spark.jobs.drain_resume`), so its own events are not dropped as late.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from venice_core.controller import drain, streams
from venice_core.controller.drain import StoredNotification
from venice_core.errors import VeniceError
from venice_core.meta import MetadataStore
from venice_core.spark.jobs.checkpoint_log import COMMITS, OFFSETS, batch_end_offsets, last_batch
from venice_core.spark.tasks.kafka_source import _consumer, topic_partitions, watermarks

CUT_FILE = "venice-drain-cut.json"
DEFAULT_TIMEOUT_SECONDS = 60.0
DRAINING, DRAINED, TIMED_OUT, STOPPED = "draining", "drained", "timed_out", "stopped"


def cut_path(checkpoint: Path) -> Path:
    return checkpoint / CUT_FILE


def take_cut(bootstrap: str, topic: str, path: Path) -> dict[str, int]:
    """The source's end offsets now, written (atomically) where the source reads its cut."""
    consumer = _consumer(bootstrap)
    try:
        marks = watermarks(consumer, topic, topic_partitions(consumer, topic, bootstrap))
    finally:
        consumer.close()
    cut = {p: high for p, (_low, high) in marks.items()}
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(cut))
    os.replace(temporary, path)
    return cut


class BatchTracker:
    """Which micro-batch the job is writing (`foreachBatch` runs it whole), so a drain waits for it."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self.running: int | None = None
        self.last_written_at: float | None = None  # wall time the last batch with writes ended

    def started(self, batch_id: int) -> None:
        with self._changed:
            self.running = batch_id

    def finished(self, records: int) -> None:
        with self._changed:
            self.running = None
            if records:
                self.last_written_at = time.time()
            self._changed.notify_all()

    def wait_idle(self, deadline: float) -> tuple[int | None, bool]:
        """Wait until no batch is being written (or the deadline): (the batch that was in flight, idle now)."""
        with self._changed:
            in_flight = self.running
            while self.running is not None and time.monotonic() < deadline:
                self._changed.wait(min(0.2, max(0.0, deadline - time.monotonic())))
            return in_flight, self.running is None


@dataclass
class DrainReport:
    """One drain as recorded with the pipeline (`PipelineRecord.drain`)."""

    uuid: str
    requested_at: float  # wall time the job saw the notification
    timeout_seconds: float
    cut: dict[str, int]
    outcome: str = DRAINING
    batch_in_flight: int | None = None
    waited_for_batch_s: float | None = None
    processing_s: float | None = None
    committing_s: float | None = None
    total_s: float | None = None
    last_batch: int | None = None
    offsets: dict[str, int] = field(default_factory=dict)
    last_write_at: float | None = None
    stopped_at: float | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class DrainUnverified(VeniceError):
    """The drain could not verify what it committed (a bug, not a timeout; not `errors.DrainFailed`, a
    drain run that failed)."""


class DrainTimedOut(VeniceError):
    """The drain did not finish within its timeout: the job stopped without cleaning up."""


@dataclass
class Drainer:
    """Drains one run's query (see the module's steps)."""

    meta: MetadataStore
    name: str
    run_id: str
    checkpoint: Path
    tracker: BatchTracker
    default_timeout: float = DEFAULT_TIMEOUT_SECONDS
    report: DrainReport | None = None  # the drain begun, if any

    def begin(self, stored: StoredNotification, bootstrap: str, topic: str) -> DrainReport:
        """Step 1, the cut: taken as soon as the notification is seen (before the query starts, when it was
        written before the job started)."""
        cut = take_cut(bootstrap, topic, cut_path(self.checkpoint))
        timeout = stored.timeout_seconds or self.default_timeout
        report = DrainReport(str(stored.notification.uuid), time.time(), timeout, cut)
        streams.record_drain(self.meta, self.name, self.run_id, report.to_json())
        self.report = report
        print(f"drain {report.uuid}: cut {json.dumps(cut, sort_keys=True)}, timeout {timeout:.0f}s", flush=True)
        return report

    def finish(self, query: Any, report: DrainReport) -> DrainReport:
        """Steps 2 to 4; the report as recorded. The query is stopped either way."""
        began = time.monotonic()
        deadline = began + report.timeout_seconds
        if (running := self.tracker.running) is not None:  # what a drain that takes long is waiting on
            print(f"drain {report.uuid}: waiting for batch {running} in flight", flush=True)
        report.batch_in_flight, idle = self.tracker.wait_idle(deadline)
        waited = time.monotonic()
        report.waited_for_batch_s = round(waited - began, 3)
        done = idle and self._process_all_available(query, deadline)
        processed = time.monotonic()
        report.processing_s = round(processed - waited, 3)
        if not done:
            report.outcome, report.stopped_at = TIMED_OUT, time.time()
            report.total_s = round(time.monotonic() - began, 3)
            where = f"batch {report.batch_in_flight} in flight" if not idle else "not at the cut"
            error = (
                f"drain timed out after {report.timeout_seconds:.0f}s ({where}): stopped without cleaning up; "
                "the drain notification is kept"
            )
            # Recorded first: a task stuck in the batch may hold the stop up (`spark.sql.streaming.stopTimeout`).
            streams.record_drain(self.meta, self.name, self.run_id, report.to_json(), streams.FAILED, error)
            print(f"drain {report.uuid}: {error}", flush=True)
            try:
                query.stop()  # cancels the batch in flight: uncommitted, it is replayed by the next start
            except Exception as exc:  # noqa: BLE001 - the job exits anyway; the timeout is what to report
                print(f"drain {report.uuid}: stopping the query: {exc}", flush=True)
            return report
        report.last_batch, report.offsets = self._committed(report.cut)
        report.last_write_at = self.tracker.last_written_at
        streams.record_drain(self.meta, self.name, self.run_id, report.to_json(), offsets=report.offsets)
        query.stop()  # between triggers: nothing is running, nothing is left to run
        report.outcome, report.stopped_at = DRAINED, time.time()
        report.committing_s = round(time.monotonic() - processed, 3)
        report.total_s = round(time.monotonic() - began, 3)
        streams.record_drain(self.meta, self.name, self.run_id, report.to_json(), streams.DRAINED)
        drain.cleanup(self.meta, self.name, self.run_id)  # only after the clean stop
        print(
            f"drain {report.uuid}: drained at batch {report.last_batch}, offsets "
            f"{json.dumps(report.offsets, sort_keys=True)} (waited {report.waited_for_batch_s:.2f}s for batch "
            f"{report.batch_in_flight}, processed to the cut in {report.processing_s:.2f}s, committed and stopped in "
            f"{report.committing_s:.2f}s)",
            flush=True,
        )
        return report

    def _process_all_available(self, query: Any, deadline: float) -> bool:
        """Run the query until a trigger finds nothing left (the cut reached, the markers read, the windows fired);
        False at the deadline; the query's error if it failed."""
        outcome: list[BaseException | None] = []

        def run() -> None:
            try:
                query.processAllAvailable()
                outcome.append(None)
            except BaseException as exc:  # noqa: BLE001 - reported by the caller as a failed drain
                outcome.append(exc)

        worker = threading.Thread(target=run, name="drain-process-all", daemon=True)
        worker.start()
        worker.join(max(0.0, deadline - time.monotonic()))
        if outcome and outcome[0] is not None:
            raise outcome[0]  # the query failed while draining (a bad event): the job's failure, not a timeout
        return bool(outcome) and query.isActive

    def _committed(self, cut: dict[str, int]) -> tuple[int | None, dict[str, int]]:
        """The last batch, committed, and the offsets it reached: every batch Spark planned is in its commit log,
        and the source is at the cut."""
        planned, committed = last_batch(self.checkpoint, OFFSETS), last_batch(self.checkpoint, COMMITS)
        if planned != committed:
            raise DrainUnverified(f"batch {planned} was planned but the commit log ends at {committed}")
        offsets = batch_end_offsets(self.checkpoint, planned) if planned is not None else dict(cut)
        short = {p: (offsets.get(p, 0), c) for p, c in cut.items() if offsets.get(p, 0) < c}
        if short:
            raise DrainUnverified(f"the source stopped short of the cut: {short}")
        return planned, offsets
