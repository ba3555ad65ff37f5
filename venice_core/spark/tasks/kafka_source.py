"""A Kafka topic as a Spark source, streaming (`spark.readStream.format("venice_kafka")`) or batch
(`spark.read.format("venice_kafka")`, the repush's input): a PySpark Python data source over confluent-kafka.

Spark's own connector (spark-sql-kafka-0-10) is a jar that must match the Spark version exactly, and the Maven
Central these machines reach does not serve it for Spark 4.2.0 (as with spark-avro: see `spark.tasks.avro_source`). The
Python source needs nothing beyond the wheel and the client the platform already uses, and its offsets are ours: a
micro-batch is a range of offsets per partition, planned on the driver (`latestOffset`), recorded in Spark's
offset log before it runs, and read by one task per partition (`partitions`, `read`), so a batch replayed after a
crash reads exactly the same records in the same order.

Offsets are `{"<partition>": <next offset>}`. Options:
- `topic`, `bootstrap` (required);
- `startingOffsets`: `earliest` (default), `latest`, or offsets as JSON (partitions not named start at the earliest);
- `initialOffsetsPath`: a file that keeps the offsets the query first started from. Spark asks `initialOffset()`
  again when it replays a first batch that never committed; `latest` would then be another offset (Spark's own
  Kafka source keeps them in its checkpoint likewise);
- `endingOffsets`: offsets as JSON past which nothing is read (a bounded stream: `cut()` is the seam a drain
  takes, as the source's end at the moment of the drain);
- `maxRecordsPerBatch`: at most this many records a micro-batch, shared fairly between partitions (0: no limit);
- `drainCutPath`: a file the job's driver writes when the pipeline drains (`spark.jobs.stream_drain`): the cut, offsets
  past which nothing is read. Once every partition has been read up to it, the source emits its drain markers (seed
  004's DrainMessage): one row per partition (`offset` -1, no key, the value `{"run-id": <run>}`) whose `timestamp`
  is `MARKER_EVENT_TIME_MS`, an event time that closes every window (the watermark to infinity, as Samza, Flink and
  Dataflow advance it on drain). The markers are a batch's range like any other (offset key `drain`, whose value is
  the run id), so they are in Spark's offset log and read once;
- `runId`: the job's run (the pipeline's start) that drains: its id goes with its markers. Another run's marker key
  in the offsets the source starts from is not carried on (a resumed run undoes what those markers did:
  `spark.jobs.drain_resume`).

A batch read (`KafkaBatchReader`) reads each partition from `startingOffsets` (default earliest) to `endingOffsets`
(default the end at planning time), cut into tasks of at most `maxRecordsPerPartition` records each (`split`: a
repush's `kafka.input.max.records.per.mapper`), read in parallel.

Rows: `topic string, partition int, offset long, timestamp long` (the record's Kafka timestamp, ms),
`key binary, value binary`, as Spark's Kafka source has them (but for the timestamp's type).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows

from venice_core.errors import StreamInputError
from venice_core.pubsub.getters import ERROR
from venice_core.pubsub.offsets import parse_partition_offsets
from venice_core.spark.specs.drain_markers import MARKER_EVENT_TIME_MS, MARKER_KEY, MARKER_OFFSET

SCHEMA = "topic string, partition int, offset long, timestamp long, key binary, value binary"
TIMEOUT_SECONDS = 15.0
# A read that makes no progress for this long fails the batch (a broker gone, records deleted under it).
READ_STALL_SECONDS = 60.0


def parse_offsets(text: str, option: str) -> dict[str, int]:
    """Offsets given as JSON (`{"0": 12, "1": 0}`), checked."""
    try:
        return parse_partition_offsets(text)
    except ValueError:
        raise StreamInputError(
            f"{option} must be 'earliest', 'latest' or JSON offsets per partition, got {text!r}"
        ) from None


def share(available: Mapping[str, int], budget: int) -> dict[str, int]:
    """How many records each partition may add to a batch of at most `budget`: fair shares, a share one partition
    cannot use going to the others, the remainder to the lowest-numbered partitions (deterministic)."""
    taken = {p: 0 for p in available}
    left = budget
    wanting = sorted((p for p, n in available.items() if n > 0), key=int)
    while left > 0 and wanting:
        each, extra = divmod(left, len(wanting))
        for i, p in enumerate(wanting):
            taken[p] += min(available[p] - taken[p], each + (1 if i < extra else 0))
        left = budget - sum(taken.values())
        wanting = [p for p in wanting if taken[p] < available[p]]
    return taken


def next_end(
    start: Mapping[str, int], latest: Mapping[str, int], cut: Mapping[str, int] | None, max_records: int | None
) -> dict[str, int]:
    """The end of the next micro-batch: each partition's latest offset, bounded by the cut and the record budget.
    A partition not yet in `start` starts at 0."""
    end: dict[str, int] = {}
    available: dict[str, int] = {}
    for p, high in latest.items():
        begin = start.get(p, 0)
        if high < begin:
            raise StreamInputError(
                f"source partition {p} ends at offset {high}, before offset {begin} already read (was the topic "
                "deleted and created again?)"
            )
        bound = high if cut is None or p not in cut else max(begin, min(high, cut[p]))
        available[p] = bound - begin
    taken = available if max_records is None else share(available, max_records)
    for p in latest:
        end[p] = start.get(p, 0) + taken[p]
    for p, offset in start.items():  # a partition the broker no longer lists keeps its offset
        end.setdefault(p, offset)
    return end


class OffsetRange(InputPartition):
    """One task of a micro-batch: a partition's records from `start` up to (not including) `end`."""

    def __init__(self, partition: int, start: int, end: int) -> None:
        super().__init__((partition, start, end))
        self.partition, self.start, self.end = partition, start, end


def plan(start: Mapping[str, int], end: Mapping[str, int]) -> list[OffsetRange]:
    """A batch's tasks: one per partition with records, by partition number (so the plan of a batch depends on
    its offsets alone)."""
    ranges = [OffsetRange(int(p), start.get(p, 0), e) for p, e in end.items() if e > start.get(p, 0)]
    return sorted(ranges, key=lambda r: r.partition)


class MarkerRange(InputPartition):
    """The drain markers' task: one marker row per source partition, each carrying the id of the run that drains."""

    def __init__(self, partitions: Sequence[int], run_id: str) -> None:
        super().__init__(("drain", tuple(partitions), run_id))
        self.source_partitions = tuple(partitions)
        self.run_id = run_id


def data_offsets(offsets: Mapping[str, Any]) -> dict[str, int]:
    """The partitions' offsets of a source offset, without the drain markers' key."""
    return {p: o for p, o in offsets.items() if p != MARKER_KEY}


def marker_value(run_id: str) -> bytes:
    """A drain marker's value: the run that drained (seed 004's DrainMessage and its `run-id`)."""
    return json.dumps({"run-id": run_id}).encode()


def marker_rows(topic: str, partitions: Sequence[int], run_id: str) -> Iterator[tuple[Any, ...]]:
    for p in partitions:
        yield (topic, p, MARKER_OFFSET, MARKER_EVENT_TIME_MS, None, marker_value(run_id))


def with_markers(
    start: Mapping[str, Any], end: dict[str, int], drain_cut: Mapping[str, int] | None, run_id: str
) -> dict[str, Any]:
    """`end` with the drain markers' key, the run's id: kept once this run has emitted them; added when this run's
    drain cut is reached in every partition it names. Another run's key in `start` is not carried on."""
    marked: dict[str, Any] = dict(end)
    reached = drain_cut is not None and all(end.get(p, 0) >= o for p, o in drain_cut.items() if p in end)
    if start.get(MARKER_KEY) == run_id or reached:
        marked[MARKER_KEY] = run_id
    return marked


def split(start: Mapping[str, int], end: Mapping[str, int], max_records: int) -> list[OffsetRange]:
    """A batch read's tasks: each partition's range cut into ceil(records / max_records) ranges of at most
    `max_records` records, by partition then offset (0: one task per partition)."""
    ranges: list[OffsetRange] = []
    for r in plan(start, end):
        step = max_records if max_records > 0 else r.end - r.start
        ranges.extend(OffsetRange(r.partition, s, min(s + step, r.end)) for s in range(r.start, r.end, step))
    return ranges


def _consumer(bootstrap: str, **settings: Any) -> Any:
    from confluent_kafka import Consumer

    from venice_core.pubsub import FAST_REFETCH, client_config

    base = {
        "group.id": "venice-stream-source",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        **FAST_REFETCH,
    }
    return Consumer(client_config(bootstrap, **{**base, **settings}))


def topic_partitions(consumer: Any, topic: str, bootstrap: str) -> list[int]:
    """The topic's partitions; StreamInputError if the broker does not know the topic."""
    from confluent_kafka import KafkaError, KafkaException

    try:
        metadata = consumer.list_topics(topic, timeout=TIMEOUT_SECONDS).topics.get(topic)
    except KafkaException as exc:
        raise StreamInputError(f"cannot reach Kafka at {bootstrap}: {exc.args[0].str()}") from None
    if metadata is None or (metadata.error is not None and metadata.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
        raise StreamInputError(f"source topic '{topic}' does not exist at {bootstrap}")
    if metadata.error is not None:
        raise StreamInputError(f"source topic '{topic}': {metadata.error.str()}")
    return sorted(metadata.partitions)


def watermarks(consumer: Any, topic: str, partitions: Sequence[int]) -> dict[str, tuple[int, int]]:
    """(low, high) offsets of each partition."""
    from confluent_kafka import TopicPartition

    return {
        str(p): tuple(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=TIMEOUT_SECONDS))
        for p in partitions
    }


def read_range_messages(
    bootstrap: str, topic: str, partition: int, start: int, end: int, catch_up: bool = False
) -> Iterator[list[Any]]:
    """The messages of one offset range, in offset order, as lists of confluent-kafka messages (one per consume
    call, errors and offsets past the range left out): for readers that take what they need of each message."""
    from confluent_kafka import KafkaError, TopicPartition

    from venice_core.pubsub import CONSUMER_CONFIG

    # `catch_up`: a whole backlog to read (a repush), with the platform's ingestion settings (fetches of 256 KB, no
    # offset stored per message); a streaming micro-batch's few records are fetched as soon as they are there.
    settings = {**(CONSUMER_CONFIG if catch_up else {}), "enable.partition.eof": True}
    consumer = _consumer(bootstrap, **settings)
    try:
        consumer.assign([TopicPartition(topic, partition, start)])
        position, stalled_since = start, time.monotonic()
        while position < end:
            messages = consumer.consume(num_messages=min(10_000, end - position), timeout=0.5)
            if messages:
                stalled_since = time.monotonic()
            elif time.monotonic() - stalled_since > READ_STALL_SECONDS:
                raise StreamInputError(
                    f"cannot read {topic}/{partition} offsets {position}..{end}: nothing arrived for "
                    f"{READ_STALL_SECONDS:.0f}s (deleted by retention?)"
                )
            if messages and not any(map(ERROR, messages)) and messages[-1].offset() < end:
                position = messages[-1].offset() + 1  # the common batch: all within the range, no event
                yield messages
                continue
            read = []
            for msg in messages:
                error = msg.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        continue
                    raise StreamInputError(f"cannot read {topic}/{partition}: {error.str()}")
                if msg.offset() >= end:
                    position = end
                    break
                read.append(msg)
            if read:
                position = max(position, read[-1].offset() + 1)
                yield read
    finally:
        consumer.close()


def read_range(bootstrap: str, topic: str, partition: int, start: int, end: int) -> Iterator[tuple[Any, ...]]:
    """The records of one offset range, in offset order."""
    for messages in read_range_messages(bootstrap, topic, partition, start, end):
        for msg in messages:
            yield (topic, partition, msg.offset(), msg.timestamp()[1], msg.key(), msg.value())


def read_range_batches(bootstrap: str, topic: str, partition: int, start: int, end: int) -> Iterator[Any]:
    """The records of one offset range as Arrow record batches of SCHEMA (one per consume call, built from its
    messages column by column): Spark takes them as they are, where tuples are converted value by value in Python
    (the batch read of a repush, millions of rows)."""
    import pyarrow as pa

    schema = pa.schema(
        [
            ("topic", pa.string()),
            ("partition", pa.int32()),
            ("offset", pa.int64()),
            ("timestamp", pa.int64()),
            ("key", pa.binary()),
            ("value", pa.binary()),
        ]
    )
    for messages in read_range_messages(bootstrap, topic, partition, start, end):
        count = len(messages)
        columns = [
            [topic] * count,
            [partition] * count,
            [msg.offset() for msg in messages],
            [msg.timestamp()[1] for msg in messages],
            [msg.key() for msg in messages],
            [msg.value() for msg in messages],
        ]
        yield pa.RecordBatch.from_arrays(
            [pa.array(column, field.type) for column, field in zip(columns, schema, strict=True)], schema=schema
        )


def _topic_and_bootstrap(options: Mapping[str, str]) -> tuple[str, str]:
    """The two options every read of the source needs (a bounded read's and a stream's)."""
    try:
        return options["topic"], options["bootstrap"]
    except KeyError as exc:
        raise StreamInputError(f"the venice_kafka source needs the option {exc.args[0]!r}") from None


class KafkaStreamReader(DataSourceStreamReader):
    def __init__(self, options: Mapping[str, str]) -> None:
        self.topic, self.bootstrap = _topic_and_bootstrap(options)
        self.starting = options.get("startingOffsets", "earliest")
        self.ending = options.get("endingOffsets")
        self.max_records = int(options.get("maxRecordsPerBatch", "0") or 0)
        self.initial_path = options.get("initialOffsetsPath")
        self.drain_cut_path = options.get("drainCutPath")
        self.run_id = options.get("runId", "")
        self._client: Any = None

    def _consumer(self) -> Any:
        if self._client is None:
            self._client = _consumer(self.bootstrap)
        return self._client

    def _watermarks(self) -> dict[str, tuple[int, int]]:
        consumer = self._consumer()
        return watermarks(consumer, self.topic, topic_partitions(consumer, self.topic, self.bootstrap))

    def drain_cut(self) -> dict[str, int] | None:
        """The drain's cut, once the driver has written it (the source's end offsets when the drain began)."""
        if not self.drain_cut_path:
            return None
        try:
            text = Path(self.drain_cut_path).read_text()
        except FileNotFoundError:
            return None
        return parse_offsets(text, self.drain_cut_path)

    def cut(self) -> dict[str, int] | None:
        """The offsets past which nothing is read, or None: a drain's cut, else the `endingOffsets` option."""
        drain = self.drain_cut()
        if drain is not None:
            return drain
        return None if self.ending is None else parse_offsets(self.ending, "endingOffsets")

    def initialOffset(self) -> dict[str, int]:
        kept = Path(self.initial_path) if self.initial_path else None
        if kept is not None and kept.exists():
            return parse_offsets(kept.read_text(), str(kept))
        offsets = self._starting_offsets()
        if kept is not None:
            kept.parent.mkdir(parents=True, exist_ok=True)
            temporary = kept.with_suffix(".tmp")
            temporary.write_text(json.dumps(offsets))
            os.replace(temporary, kept)
        return offsets

    def _starting_offsets(self) -> dict[str, int]:
        marks = self._watermarks()
        if self.starting == "earliest":
            return {p: low for p, (low, _high) in marks.items()}
        if self.starting == "latest":
            return {p: high for p, (_low, high) in marks.items()}
        given = parse_offsets(self.starting, "startingOffsets")
        return {p: given.get(p, low) for p, (low, _high) in marks.items()}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_records) if self.max_records > 0 else ReadAllAvailable()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        latest = {p: high for p, (_low, high) in self._watermarks().items()}
        drain_cut = self.drain_cut()
        if drain_cut is not None:  # a partition created after the cut is not read either
            latest = {p: high for p, high in latest.items() if p in drain_cut}
        budget = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        end = next_end(data_offsets(start), latest, self.cut(), budget)
        return with_markers(start, end, drain_cut, self.run_id)

    def reportLatestOffset(self) -> dict[str, int] | None:
        return {p: high for p, (_low, high) in self._watermarks().items()}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        ranges: list[InputPartition] = list(plan(data_offsets(start), data_offsets(end)))
        drained_by = end.get(MARKER_KEY)
        if drained_by is not None and drained_by != start.get(MARKER_KEY):  # from the offsets: a replay's are the same
            ranges.append(MarkerRange(sorted(int(p) for p in data_offsets(end)), str(drained_by)))
        return ranges

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        if isinstance(partition, MarkerRange):
            return marker_rows(self.topic, partition.source_partitions, partition.run_id)
        assert isinstance(partition, OffsetRange)
        return read_range(self.bootstrap, self.topic, partition.partition, partition.start, partition.end)

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


def batch_ranges(bootstrap: str, topic: str, starting: str, ending: str, max_records: int) -> list[OffsetRange]:
    """A bounded read's tasks, fixed now: `starting` / `ending` are "earliest", "latest" or JSON offsets by
    partition (a partition not named reads from its low / to its high watermark); see `split`."""
    consumer = _consumer(bootstrap)
    try:
        marks = watermarks(consumer, topic, topic_partitions(consumer, topic, bootstrap))
    finally:
        consumer.close()

    def offsets(given: str, option: str, pick: int) -> dict[str, int]:
        if given in ("earliest", "latest"):
            return {p: bounds[0 if given == "earliest" else 1] for p, bounds in marks.items()}
        named = parse_offsets(given, option)
        return {p: named.get(p, bounds[pick]) for p, bounds in marks.items()}

    return split(offsets(starting, "startingOffsets", 0), offsets(ending, "endingOffsets", 1), max_records)


class KafkaBatchReader(DataSourceReader):
    """A bounded read: the offsets are fixed when Spark plans the read (`partitions`), so every task, and a retried
    one, reads exactly its range."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self.topic, self.bootstrap = _topic_and_bootstrap(options)
        self.starting = options.get("startingOffsets", "earliest")
        self.ending = options.get("endingOffsets", "latest")
        self.max_records = int(options.get("maxRecordsPerPartition", "0") or 0)

    def partitions(self) -> list[OffsetRange]:
        return batch_ranges(self.bootstrap, self.topic, self.starting, self.ending, self.max_records)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, OffsetRange)
        return read_range_batches(self.bootstrap, self.topic, partition.partition, partition.start, partition.end)


class KafkaDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "venice_kafka"

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema: Any) -> KafkaStreamReader:
        return KafkaStreamReader(self.options)

    def reader(self, schema: Any) -> KafkaBatchReader:
        return KafkaBatchReader(self.options)
