"""A run that resumes a checkpoint in which another run drained (seed 004: a DrainMessage counts only for the run it
names). A drain's markers raise the watermark to infinity, and Spark keeps that watermark in the checkpoint's logs
(`spark.jobs.checkpoint_log`): a run resumed on it would drop every event of its own as late. That happens when a drain
timed out after its marker batch was planned (the notification is kept, the run FAILED, and `venice stream start`
resumes the checkpoint), or when a drained checkpoint is resumed rather than started after (`streams.control`).

Before its query starts, the run finds the first batch whose planned offsets carry a drain marker key (the id of
the run that drained, `spark.tasks.kafka_source`) and undoes what the markers did, in the logs Spark restores from:

- every batch planned after the marker batch runs with the watermark the marker batch ran with, and every commit
  from the marker batch on hands that watermark to the next batch: the markers' event time is forgotten (the
  events the marker batch read may have raised it a little: forgetting that only fires windows a batch later);
- the marker key leaves every batch's offsets, the last first (the marker batch stays findable until the end, so
  a crash part-way is finished by the next start): a replayed batch reads no markers, and this run's own drain
  emits its own.

The windows' state is kept: a window open at the drain goes on counting in the resumed run. Where a batch after the
markers committed, the markers fired every window (written early, then dropped from the state): the resumed run then
writes a pane of its own (`fired`), so a window it completes adds to the early pane rather than overwriting it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from venice_core.spark.jobs.checkpoint_log import COMMITS, OFFSETS, LogEntry, batch_ids, last_batch
from venice_core.spark.specs.drain_markers import MARKER_KEY

WATERMARK, NEXT_WATERMARK = "batchWatermarkMs", "nextBatchWatermarkMs"


@dataclass(frozen=True)
class EarlierDrain:
    """Another run's drain found in a checkpoint."""

    run_id: str  # the run whose markers they are ("" for markers written before they carried one)
    marker_batch: int
    watermark_ms: int  # the watermark the marker batch ran with, before the markers raised it
    fired: bool  # a batch after the markers committed: every window was fired and dropped from the state

    def describe(self) -> str:
        fired = "; its windows fired, so this run writes a pane of its own" if self.fired else ""
        return (
            f"drain markers of run {self.run_id or '(unnamed)'} at batch {self.marker_batch} in the checkpoint: "
            f"event-time watermark back to {self.watermark_ms} ms, the markers dropped{fired}"
        )


def find(checkpoint: Path) -> EarlierDrain | None:
    """The earliest drain whose markers the checkpoint's offset log still holds (read only)."""
    marked = [b for b in batch_ids(checkpoint, OFFSETS) if MARKER_KEY in LogEntry.read(checkpoint, OFFSETS, b).source]
    if not marked:
        return None
    entry = LogEntry.read(checkpoint, OFFSETS, marked[0])
    drained_by = entry.source[MARKER_KEY]
    committed = last_batch(checkpoint, COMMITS)
    return EarlierDrain(
        drained_by if isinstance(drained_by, str) else "",
        marked[0],
        int(entry.metadata.get(WATERMARK, 0)),
        committed is not None and committed > marked[0],
    )


def undo(checkpoint: Path, drain: EarlierDrain) -> None:
    """Rewrite the logs as the module says; run before the query starts, on a checkpoint no query runs on."""
    for batch in batch_ids(checkpoint, COMMITS):
        commit = LogEntry.read(checkpoint, COMMITS, batch)
        if batch >= drain.marker_batch and commit.metadata.get(NEXT_WATERMARK) != drain.watermark_ms:
            commit.metadata[NEXT_WATERMARK] = drain.watermark_ms
            commit.write(checkpoint, COMMITS, batch)
    planned = batch_ids(checkpoint, OFFSETS)
    for batch in planned:
        entry = LogEntry.read(checkpoint, OFFSETS, batch)
        if batch > drain.marker_batch and entry.metadata.get(WATERMARK) != drain.watermark_ms:
            entry.metadata[WATERMARK] = drain.watermark_ms
            entry.write(checkpoint, OFFSETS, batch)
    for batch in reversed(planned):
        entry = LogEntry.read(checkpoint, OFFSETS, batch)
        if MARKER_KEY in entry.source:
            del entry.source[MARKER_KEY]
            entry.write(checkpoint, OFFSETS, batch)
