"""What a streaming pipeline computes between its source and its writes (`--transform`):

- `map` (the default): each event is one write (`spark.tasks.stream_tasks`), no shuffle, no state. The source's drain
  markers are dropped.
- `window_count`: events counted per key per tumbling event-time window (`--window-seconds`), with a watermark
  (`--watermark-seconds`): a shuffle and state. A window is written once, when the watermark passes its end
  (append mode), or early, as a partial pane, when the pipeline drains: the source's drain markers carry an event
  time past every window, so the watermark goes to infinity and every window in the state fires. Each checkpoint
  (the state's lineage) writes its own pane of a window, under the key `<key>|<window start ms>|<pane>` (the pane:
  the checkpoint's first run id's first 8 characters, `spark.jobs.stream.checkpoint_pane`) with the count as the value
  and the window's end as the write timestamp: a window open at a drain has the drained run's early pane and the next
  deployment's pane (a fresh checkpoint), which add up to the window's count. A run resumed on a checkpoint keeps
  its pane, so a batch it replays sends the very bytes the first attempt sent.
- `window_count_v2`: the same output from a different state schema (a count and the latest event time): starting
  it on a `window_count` checkpoint fails, as an incompatible state schema does; it is what an upgrade after a
  drain starts, with fresh state.

Events of the windowed transforms give their event time in epoch milliseconds (`--event-time-field`); an event
without one is not counted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from venice_core.errors import ConfigError
from venice_core.nearline.writer import WriterTarget
from venice_core.spark.specs.drain_markers import MARKER_EVENT_TIME_MS, MARKER_OFFSET
from venice_core.spark.tasks.stream_tasks import EventMapping

MAP, WINDOW_COUNT, WINDOW_COUNT_V2 = "map", "window_count", "window_count_v2"
TRANSFORMS = (MAP, WINDOW_COUNT, WINDOW_COUNT_V2)
# The windowed transforms' output, as the events the batch writer maps to writes.
OUT_KEY, OUT_COUNT, OUT_WINDOW_END = "key", "count", "window_end"


@dataclass(frozen=True)
class TransformSpec:
    """A pipeline's transform and its settings (from the job's arguments)."""

    name: str = MAP
    key_field: str = "key"
    event_time_field: str | None = None
    window_seconds: float = 10.0
    watermark_seconds: float = 5.0
    pane: str = ""  # the checkpoint's mark on its panes

    def __post_init__(self) -> None:
        if self.name not in TRANSFORMS:
            raise ConfigError(f"unknown transform {self.name!r}: one of {', '.join(TRANSFORMS)}")
        if self.stateful:
            if not self.event_time_field:
                raise ConfigError(f"the {self.name} transform needs --event-time-field (epoch milliseconds)")
            if self.window_seconds <= 0 or self.watermark_seconds < 0:
                raise ConfigError("the window must be positive and the watermark delay at least 0")

    @property
    def stateful(self) -> bool:
        return self.name != MAP

    def mapping(self, target: WriterTarget, value_fields: tuple[str, ...]) -> EventMapping:
        """How the transform's rows become writes: the events themselves for `map`, else the windows' counts."""
        if not self.stateful:
            return EventMapping(target, self.key_field, value_fields, self.event_time_field).check()
        return EventMapping(target, OUT_KEY, (OUT_COUNT,), OUT_WINDOW_END).check()

    def apply(self, source: Any) -> Any:
        """The streaming plan from the source's rows to rows of the source's shape that the batch writer writes
        (`spark.tasks.stream_tasks.SourceRow`)."""
        from pyspark.sql import functions as F

        if not self.stateful:
            return source.where(F.col("offset") != MARKER_OFFSET)
        value = F.col("value").cast("string")
        marker = F.col("offset") == MARKER_OFFSET
        event_ms = F.get_json_object(value, f"$.{self.event_time_field}").cast("long")
        # A marker's key is not null: a filter on the key alone would be pushed below the watermark, which must
        # see the markers.
        events = source.select(
            F.when(marker, F.lit("")).otherwise(F.get_json_object(value, f"$.{self.key_field}")).alias("k"),
            F.timestamp_millis(F.when(marker, F.col("timestamp")).otherwise(event_ms)).alias("event_time"),
        )
        aggregates = [F.count(F.lit(1)).alias("n")]
        if self.name == WINDOW_COUNT_V2:
            aggregates.append(F.max("event_time").alias("last_event"))
        windows = (
            events.withWatermark("event_time", f"{round(self.watermark_seconds * 1000)} milliseconds")
            # On the event-time column, so the optimiser keeps it above the watermark, which sees the markers.
            .where(F.col("event_time") < F.timestamp_millis(F.lit(MARKER_EVENT_TIME_MS)))
            .where(F.col("k").isNotNull())
            .groupBy(F.window("event_time", f"{round(self.window_seconds * 1000)} milliseconds"), "k")
            .agg(*aggregates)
        )
        start, end = F.unix_millis(F.col("window.start")), F.unix_millis(F.col("window.end"))
        out_key = F.concat_ws("|", F.col("k"), start.cast("string"), F.lit(self.pane))
        record = F.struct(out_key.alias(OUT_KEY), F.col("n").alias(OUT_COUNT), end.alias(OUT_WINDOW_END))
        return windows.select(
            F.lit("windows").alias("topic"),
            F.lit(0).alias("partition"),
            F.lit(0).cast("long").alias("offset"),
            end.alias("timestamp"),
            F.lit(None).cast("binary").alias("key"),
            F.to_json(record).cast("binary").alias("value"),
        )

    def batch_rows(self, batch: Any) -> Any:
        """A micro-batch as the writer takes it. The windows' rows get their task's partition as their
        `partition` (each task writes with a producer of its own) and a fixed order, so a replayed batch sends the
        same bytes."""
        if not self.stateful:
            return batch
        from pyspark.sql import functions as F

        return batch.withColumn("partition", F.spark_partition_id()).sortWithinPartitions("value")
