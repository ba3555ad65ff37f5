"""Ingest one partition of a version topic into a `storage.api.PartitionStore` (a region server replica's RocksDB, a
Da Vinci client's RocksDB or DuckDB). A region's replicas ingest the region's own version topic, but for the
partition's leader outside the source region, which takes the source region's and produces it on to its own
(`leader`), and may change role at any time before END_OF_PUSH.

The task runs the partition's phases: the batch phase (`batch_phase.BatchPhase`: the version topic up to
END_OF_PUSH), then, for a hybrid version, the real-time phase (`real_time.RealTimeIngestion`), retried from its
checkpoint while it fails. It reports the partition's status and keeps its figures (`stats`).

Every commit writes the data and the checkpoint (`storage.ingestion_checkpoint.IngestionCheckpoint`) in one atomic
write of the store (a RocksDB WriteBatch, a DuckDB transaction), so a task killed at any point resumes from its
checkpoint with exactly the data it covers. The real-time phase's checkpoint keeps the batch fields as END_OF_PUSH
left them and adds the real-time offsets.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Generic

from confluent_kafka import Consumer, KafkaException, TopicPartition

from venice_core.ingestion.batch_phase import BatchPhase
from venice_core.ingestion.leader import Leading, LocalCopy, ReplicationError
from venice_core.ingestion.messages import MessageSource, message_source
from venice_core.ingestion.real_time import HybridIngestion, RealTimeIngestion, Reporter
from venice_core.ingestion.stats import IngestionStats
from venice_core.model.status import ExecutionStatus
from venice_core.protocol.div import DataIntegrityError
from venice_core.protocol.envelope import ProtocolError
from venice_core.pubsub import CONSUMER_CONFIG, client_config
from venice_core.storage.api import Batch, PartitionStore
from venice_core.storage.ingestion_checkpoint import IngestionCheckpoint
from venice_core.utils.waiting import poll_until

log = logging.getLogger(__name__)

CONSUME_BATCH = 5000
REPORT_EVERY_SECONDS = 2.0
END_OFFSET_TIMEOUT_SECONDS = 60.0
# A real-time phase failing this long (a broker away, a topic gone) is reported ERROR; it keeps retrying.
REAL_TIME_FAILURE_REPORT_SECONDS = 60.0


class PartitionIngestionTask(Generic[Batch]):
    """One partition of one version, `run` in a thread of its own. Its status goes to `report`; its figures
    (`stats`, `real_time`), `completed` (END_OF_PUSH committed: a Da Vinci client serves the version) and `error`
    are read by the region server and the Da Vinci client."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partition: int,
        storage: PartitionStore[Batch],
        report: Reporter,
        consumer_group: str,
        hybrid: HybridIngestion | None = None,
        leads: Callable[[], bool] | None = None,
        leading: Leading | None = None,
    ) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.partition = partition
        self.storage = storage
        self.report = report
        self.consumer_group = consumer_group
        self.hybrid = hybrid
        self.leads = leads  # a replicated region's replica: whether it leads its partition (`real_time`)
        self.leading = leading  # outside the source region: the batch phase as its partition's leader (`leader`)
        self.real_time: RealTimeIngestion[Batch] | None = None
        self.stats = IngestionStats()
        self.error: str | None = None
        self.completed = False

    def run(self, stop: threading.Event) -> None:
        """The partition from its checkpoint, until stopped: the batch phase up to END_OF_PUSH, then what follows."""
        checkpoint = self.storage.checkpoint() or IngestionCheckpoint()
        self.stats.records = checkpoint.records
        self.stats.offset = checkpoint.next_offset - 1
        if checkpoint.end_of_push:
            log.info(
                "resuming %s[%d] from its checkpoint at offset %d (END_OF_PUSH reached, %d records)",
                self.topic,
                self.partition,
                checkpoint.next_offset,
                checkpoint.records,
            )
            self.completed = True
        else:
            end_of_push = self._run_batch_phase(checkpoint, stop)
            if end_of_push is None:
                return  # stopped before END_OF_PUSH, or failed (reported)
            checkpoint = end_of_push
        self._after_end_of_push(checkpoint, stop)

    def _run_batch_phase(self, checkpoint: IngestionCheckpoint, stop: threading.Event) -> IngestionCheckpoint | None:
        """The batch phase, following the region's version topic or, while this replica leads outside the source
        region, taking the source region's and producing it on (`ingestion.leader`): END_OF_PUSH's checkpoint, or
        None (stopped, or failed and reported)."""
        if checkpoint.next_offset or checkpoint.upstream_next:
            log.info(
                "resuming %s[%d] from its checkpoint at offset %d (%d records)",
                self.topic,
                self.partition,
                checkpoint.next_offset if checkpoint.upstream_next is None else checkpoint.upstream_next,
                checkpoint.records,
            )
        phase = self._batch_phase(checkpoint)
        self.report(ExecutionStatus.STARTED, self.stats.offset, self.stats.records, "")
        failing_since: float | None = None
        try:
            while not stop.is_set():
                try:
                    end_of_push = self._take_turn(phase, stop)
                except ReplicationError as exc:  # leading: the region's topic not written; again from the checkpoint
                    failing_since = failing_since or time.monotonic()
                    phase = self._again_from_checkpoint(exc, time.monotonic() - failing_since, stop)
                    continue
                if end_of_push is not None:
                    return end_of_push
                failing_since = None
        except (DataIntegrityError, ProtocolError) as exc:
            self._fail(str(exc))
        except Exception as exc:  # noqa: BLE001 - never die silently: the push waits for this partition
            log.exception("ingestion of %s[%d] failed", self.topic, self.partition)
            self._fail(f"unexpected {type(exc).__name__}: {exc}")
        return None

    def _take_turn(self, phase: BatchPhase[Batch], stop: threading.Event) -> IngestionCheckpoint | None:
        """Lead or follow, whichever this replica does now, until that changes, END_OF_PUSH or a stop."""
        epoch = self._leader_epoch()
        if epoch is not None:
            return self._lead(phase, epoch, stop)
        with self._consuming(self.bootstrap, self.topic, phase.next_offset) as source:
            return self._follow(phase, source, stop)

    def _again_from_checkpoint(
        self, error: ReplicationError, failing: float, stop: threading.Event
    ) -> BatchPhase[Batch]:
        """After a leader's failed write: what was taken past the checkpoint is dropped (an open SST file is
        ingested: the retry writes the same keys with the same values over it) and taken again, after a backoff.
        Failing this long is reported ERROR (the push fails in the region); it keeps trying."""
        log.warning("leading %s[%d] failed, again from its checkpoint: %s", self.topic, self.partition, error)
        if failing >= REAL_TIME_FAILURE_REPORT_SECONDS:
            self._fail(f"{error} (still retrying)")
        self.storage.ingest_sst()
        stop.wait(min(1.0 + failing, 30.0))
        checkpoint = self.storage.checkpoint() or IngestionCheckpoint()
        self.stats.records, self.stats.offset = checkpoint.records, checkpoint.next_offset - 1
        return self._batch_phase(checkpoint)

    def _leader_epoch(self) -> int | None:
        return None if self.leading is None else self.leading.epoch()

    def _batch_phase(self, checkpoint: IngestionCheckpoint) -> BatchPhase[Batch]:
        return BatchPhase(
            self.storage,
            self.partition,
            self.stats,
            checkpoint,
            stamp_writes=self.hybrid is not None,
            source=f"{self.topic}[{self.partition}]",
        )

    @contextmanager
    def _consuming(self, bootstrap: str, topic: str, offset: int) -> Iterator[MessageSource]:
        consumer = Consumer(client_config(bootstrap, **CONSUMER_CONFIG, **{"group.id": self.consumer_group}))
        try:
            consumer.assign([TopicPartition(topic, self.partition, offset)])
            yield message_source(consumer)
        finally:
            consumer.close()

    def _follow(
        self, phase: BatchPhase[Batch], source: MessageSource, stop: threading.Event, until: int | None = None
    ) -> IngestionCheckpoint | None:
        """The region's version topic (`source`, from where this replica is in it): END_OF_PUSH's checkpoint once
        committed; None once stopped, once this replica leads or, given `until`, once it has taken everything
        before that offset (what was taken is committed)."""
        phase.follow()
        last_report = time.monotonic()
        while not stop.is_set():
            if until is None and self._leader_epoch() is not None:
                break
            if until is not None and self.stats.offset + 1 >= until:
                break
            end_of_push = phase.take(source.consume(num_messages=CONSUME_BATCH, timeout=0.2))
            if end_of_push is not None:
                self.completed = True  # only once committed: a Da Vinci client serves the version on it
                return end_of_push
            now = time.monotonic()
            phase.commit_if_due(now)
            if now - last_report >= REPORT_EVERY_SECONDS:
                self._report_progress(source, self.topic)
                last_report = now
        phase.commit_rest()
        return None

    def _lead(self, phase: BatchPhase[Batch], epoch: int, stop: threading.Event) -> IngestionCheckpoint | None:
        """Lead the partition under `epoch`: the source region's version topic taken and produced on to the
        region's, from this replica's own upstream position or, at first, its predecessor's once the region's topic
        is read up to its end. END_OF_PUSH's checkpoint once committed (and recorded: the replication is over); None
        once stopped or deposed (what was taken is acknowledged and committed)."""
        assert self.leading is not None
        start = phase.upstream_next
        if start is None:  # it followed until now: the region's topic first, as far as it went when it took over
            with self._consuming(self.bootstrap, self.topic, phase.next_offset) as local:
                local_end = self._end_offset(local, stop)
                end_of_push = self._follow(phase, local, stop, until=local_end)
            if end_of_push is not None or stop.is_set():
                return end_of_push
            recorded = self.leading.recorded(epoch)
            if recorded is None:  # no longer its to lead
                return None
            start = recorded
        upstream = self.leading.upstream
        copy = LocalCopy(self.bootstrap, self.topic, self.partition, self.leading.producer_config)
        phase.lead(start, copy.flush)
        log.info("leading %s[%d] from source offset %d (epoch %d)", self.topic, self.partition, start, epoch)
        try:
            with self._consuming(upstream.bootstrap, upstream.topic, start) as source:
                return self._copy(phase, source, copy, epoch, stop)
        finally:
            copy.close()
            phase.follow()

    def _copy(
        self, phase: BatchPhase[Batch], source: MessageSource, copy: LocalCopy, epoch: int, stop: threading.Event
    ) -> IngestionCheckpoint | None:
        """`_lead`'s loop: each consumed batch produced on, then taken."""
        assert self.leading is not None
        last_report = time.monotonic()
        while not stop.is_set():
            messages = source.consume(num_messages=CONSUME_BATCH, timeout=0.2)
            if self._leader_epoch() != epoch:  # fenced: nothing more produced
                log.warning("no longer leading %s[%d]: nothing more produced", self.topic, self.partition)
                break
            copy.produce(messages)
            end_of_push = phase.take(messages)  # committed after its records are acknowledged
            if end_of_push is not None:
                self.completed = True
                self.leading.record(epoch, phase.upstream_next or 0, True)
                log.info("%s[%d] replicated up to END_OF_PUSH", self.topic, self.partition)
                return end_of_push
            now = time.monotonic()
            if phase.commit_if_due(now) and not self.leading.record(epoch, phase.upstream_next or 0, False):
                log.warning("%s[%d] has another leader now", self.topic, self.partition)
                poll_until(lambda: stop.is_set() or self._leader_epoch() != epoch, timeout=10, interval=0.2)
                break
            if now - last_report >= REPORT_EVERY_SECONDS:
                self._report_progress(source, self.leading.upstream.topic)
                last_report = now
        phase.commit_rest()
        return None

    def _after_end_of_push(self, checkpoint: IngestionCheckpoint, stop: threading.Event) -> None:
        """A batch-only version is complete; a hybrid one goes on with the real-time topics until stopped."""
        if self.hybrid is None:
            self.report(ExecutionStatus.COMPLETED, self.stats.offset, self.stats.records, "")
            return
        caught_up = checkpoint.real_time is not None and checkpoint.real_time.ready  # kept across restarts
        status = ExecutionStatus.COMPLETED if caught_up else ExecutionStatus.END_OF_PUSH_RECEIVED
        self.report(status, self.stats.offset, self.stats.records, "")
        self.real_time = RealTimeIngestion(
            self.hybrid, self.partition, self.storage, self.report, self.consumer_group, self.leads
        )
        self._run_real_time(self.real_time, checkpoint, stop)

    def _run_real_time(
        self, real_time: RealTimeIngestion[Batch], checkpoint: IngestionCheckpoint, stop: threading.Event
    ) -> None:
        """Until stopped. A failing run (a broker away, a topic gone) is retried from the checkpoint with backoff,
        and reported ERROR once it has failed for REAL_TIME_FAILURE_REPORT_SECONDS."""
        failing_since: float | None = None
        delay = 1.0
        while not stop.is_set():
            started = time.monotonic()
            try:
                real_time.run(stop, checkpoint)  # returns on a stop, or a change of role: run again at once
                checkpoint = self.storage.checkpoint() or checkpoint
                continue
            except Exception as exc:  # noqa: BLE001 - a broker or topic that is back later: retried from the checkpoint
                log.warning(
                    "real-time ingestion of %s[%d] failed, retrying in %.0fs: %s",
                    self.topic,
                    self.partition,
                    delay,
                    exc,
                )
                if time.monotonic() - started >= REAL_TIME_FAILURE_REPORT_SECONDS:  # it ran a while: a new failure
                    failing_since, delay = None, 1.0
                failing_since = failing_since or time.monotonic()
                if time.monotonic() - failing_since >= REAL_TIME_FAILURE_REPORT_SECONDS:
                    self._fail(f"real-time ingestion: {type(exc).__name__}: {exc} (still retrying)")
            if stop.wait(delay):
                return
            delay = min(delay * 2, 30.0)
            checkpoint = self.storage.checkpoint() or checkpoint

    def _fail(self, reason: str) -> None:
        self.error = f"partition {self.partition} of {self.topic}: {reason}"
        log.error("ingestion failed: %s", self.error)
        self.report(ExecutionStatus.ERROR, self.stats.offset, self.stats.records, self.error)

    def _end_offset(self, consumer: MessageSource, stop: threading.Event) -> int:
        """The end of the region's topic partition now, asked again while the broker cannot answer yet (a topic just
        created has no leader for a moment); ReplicationError past END_OFFSET_TIMEOUT_SECONDS."""
        tp, errors = TopicPartition(self.topic, self.partition), []

        def ask() -> tuple[int] | None:
            try:
                return (int(consumer.get_watermark_offsets(tp, timeout=5.0, cached=False)[1]),)
            except KafkaException as exc:
                errors.append(exc)
                return (0,) if stop.is_set() else None

        def unanswered(_: object) -> Exception:
            return ReplicationError(
                f"the end of {self.topic}[{self.partition}] is unknown: {errors[-1] if errors else ''}"
            )

        answer = poll_until(ask, timeout=END_OFFSET_TIMEOUT_SECONDS, interval=0.5, timeout_error=unanswered)
        assert answer is not None  # (a timeout raised)
        return answer[0]

    def _report_progress(self, consumer: MessageSource, topic: str) -> None:
        try:  # the end offset is for the lag metric only: a slow answer under load keeps the previous value
            tp = TopicPartition(topic, self.partition)
            self.stats.end_offset = consumer.get_watermark_offsets(tp, timeout=1.0, cached=False)[1]
        except KafkaException as exc:
            log.debug("end offset of %s[%d] unavailable: %s", topic, self.partition, exc)
        self.report(ExecutionStatus.PROGRESS, self.stats.offset, self.stats.records, "")
