"""A Da Vinci client's batch phase in processes of its own: the ingestion engine's Python, off the client's GIL.

A client holding a store in DuckDB ingests a large version's batch data with worker processes (`IngestWorker`,
`python -m venice_core.davinci.ingest_worker`), each running the same `PartitionIngestionTask` for some of the
partitions: consume, DIV, runs of PUTs. Their store (`ForwardingStore`) sends each commit, the batch and the
checkpoint that covers it, to the client's process, which applies it in one DuckDB transaction and answers; only
then does the task go on. So the file holds exactly what its checkpoints cover, as with threads, and a restart
resumes from them. A partition's END_OF_PUSH ends its worker's part: the client then runs the task in its own
process, which finds the END_OF_PUSH checkpoint and goes on (a hybrid version's real-time phase) or completes.

On the wire (the worker's stdin and stdout, nothing else on them): length-prefixed pickles, between a process and
the child it started. The worker asks (`commit`, `get_chunk`) and waits for the answer; it tells (`report`,
`done`) without one. A worker stops on SIGTERM (commits what it has, like a stopped thread) and exits once its
client's process is gone. A worker killed from outside before its partitions are done (SIGTERM, SIGKILL) leaves them
to the client's tasks, from their checkpoints; one that crashed on its own fails them.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import signal
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import IO, Any, cast

from venice_core.davinci.batch import DuckDBBatch
from venice_core.errors import VeniceError
from venice_core.protocol.put_run import PutRun
from venice_core.storage.ingestion_checkpoint import IngestionCheckpoint

log = logging.getLogger(__name__)

FRAME = struct.Struct(">I")


class WorkerGone(VeniceError):
    pass


def write_frame(stream: IO[bytes], message: Any) -> None:
    data = pickle.dumps(message, protocol=5)
    stream.write(FRAME.pack(len(data)))
    stream.write(data)
    stream.flush()


def read_frame(stream: IO[bytes]) -> Any | None:
    """The next message; None at the end of the stream."""
    header = stream.read(FRAME.size)
    if len(header) < FRAME.size:
        return None
    size = FRAME.unpack(header)[0]
    data = stream.read(size)
    if len(data) < size:
        return None
    return pickle.loads(data)  # noqa: S301 - from the worker this process started, over its own pipe


# the worker's side
class Channel:
    """The worker's end: one question at a time (the partitions' threads take turns), each waiting for its answer."""

    def __init__(self, incoming: IO[bytes], outgoing: IO[bytes]) -> None:
        self.incoming, self.outgoing = incoming, outgoing
        self.lock = threading.Lock()

    def ask(self, message: tuple[Any, ...]) -> Any:
        with self.lock:
            write_frame(self.outgoing, message)
            answer = read_frame(self.incoming)
        if answer is None:
            raise WorkerGone("the Da Vinci client's process is gone")
        kind, value = answer
        if kind == "error":
            raise VeniceError(value)
        return value

    def tell(self, message: tuple[Any, ...]) -> None:
        with self.lock:
            write_frame(self.outgoing, message)


class ForwardingStore:
    """A `storage.api.PartitionStore` whose commits are applied by the client's process."""

    sorted_ingest = False

    def __init__(self, channel: Channel, partition: int, checkpoint: IngestionCheckpoint | None, every: int) -> None:
        self.channel, self.partition, self._checkpoint = channel, partition, checkpoint
        self.commit_every_messages = every
        self.commit_every_seconds = 5.0

    def new_batch(self) -> DuckDBBatch:
        return DuckDBBatch()

    def put_run(self, batch: DuckDBBatch, run: PutRun) -> None:
        batch.put_run(run)

    def checkpoint(self) -> IngestionCheckpoint | None:
        return self._checkpoint

    def commit(self, batch: DuckDBBatch, checkpoint: IngestionCheckpoint) -> None:
        self.channel.ask(("commit", self.partition, batch, checkpoint))

    def stage_chunk(self, batch: DuckDBBatch, chunk_key: bytes, value: bytes) -> None:
        batch.stage_chunk(chunk_key, value)

    def drop_chunk(self, batch: DuckDBBatch, chunk_key: bytes) -> None:
        batch.drop_chunk(chunk_key)

    def get_chunk(self, chunk_key: bytes) -> bytes | None:
        return cast(bytes | None, self.channel.ask(("get_chunk", self.partition, chunk_key)))

    def put_write_stamp(self, batch: DuckDBBatch, key: bytes, stamp: bytes) -> None:
        batch.put_write_stamp(key, stamp)

    def get_write_stamp(self, key: bytes) -> bytes | None:
        raise VeniceError("write stamps are looked up in the real-time phase, which runs in the client's process")

    def sst_put(self, key: bytes, value: bytes) -> None:
        raise NotImplementedError("sorted_ingest is False")

    def sst_put_run(self, keys: list[bytes], values: list[bytes]) -> None:
        raise NotImplementedError("sorted_ingest is False")

    def ingest_sst(self) -> None:
        return None

    def close(self) -> None:
        return None

    def destroy(self) -> None:
        return None


def _exit_with_parent(parent: int) -> None:
    while True:
        time.sleep(1.0)
        if os.getppid() != parent:  # the client's process is gone: its file is closed, nothing here can commit
            os._exit(3)


def main() -> None:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C reaches the client, which stops its workers itself
    threading.Thread(target=_exit_with_parent, args=(os.getppid(),), daemon=True).start()

    from venice_core.host import gc_settings
    from venice_core.ingestion.task import PartitionIngestionTask
    from venice_core.model.status import ExecutionStatus

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(asctime)s ingest worker %(message)s")
    logging.getLogger("venice_core.kafka").setLevel(logging.ERROR)  # librdkafka's retries: the client logs its own
    channel = Channel(sys.stdin.buffer, sys.stdout.buffer)
    sys.stdout = sys.stderr  # the frames own stdout
    spec = read_frame(channel.incoming)
    if spec is None:
        return
    gc_settings.tune_for_throughput()  # a process of the platform's own

    def run(partition: int, checkpoint: IngestionCheckpoint | None) -> None:
        def report(status: ExecutionStatus, offset: int, records: int, details: str) -> None:
            channel.tell(("report", partition, status.value, offset, records, details))

        store = ForwardingStore(channel, partition, checkpoint, spec["commit_every_messages"])
        task = PartitionIngestionTask(spec["bootstrap"], spec["topic"], partition, store, report, spec["group"])
        error = None
        try:
            task.run(stop)
        except Exception as exc:  # noqa: BLE001 - told to the client, which fails the partition with it
            error = f"partition {partition} of {spec['topic']}: {type(exc).__name__}: {exc}"
        finally:
            channel.tell(("done", partition, task.error or error))

    threads = [threading.Thread(target=run, args=item, name=f"p{item[0]}") for item in spec["partitions"].items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # done: a late stop must not cut the exit short


# the client's side
class IngestWorker:
    """One worker process for some partitions of a version: started, answered and stopped by the client.

    `apply(partition, batch, checkpoint)` commits; `get_chunk(partition, key)` reads a staged chunk; `progress(
    partition, status, offset, records)` follows the worker's reports. `wait(partition)` returns once the partition's
    batch phase is over in the worker, with its error or None."""

    def __init__(
        self,
        spec: dict[str, Any],
        apply: Callable[[int, DuckDBBatch, IngestionCheckpoint], None],
        get_chunk: Callable[[int, bytes], bytes | None],
        progress: Callable[[int, str, int, int], None],
    ) -> None:
        self.partitions = sorted(spec["partitions"])
        self.apply, self.get_chunk, self.progress = apply, get_chunk, progress
        self.errors: dict[int, str | None] = {}  # each partition's, once its batch phase is over here
        self.finished = {p: threading.Event() for p in self.partitions}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "venice_core.davinci.ingest_worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            # numpy's OpenBLAS threads spun on the worker's cores for nothing (it multiplies no matrices).
            env={**os.environ, "OPENBLAS_NUM_THREADS": "1"},
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        try:
            write_frame(self.process.stdin, spec)
        except OSError:
            self.process.kill()
            self.process.wait()
            raise
        self._stopping = False
        self.reader = threading.Thread(target=self._serve, daemon=True, name=f"davinci-worker-{self.partitions}")
        self.reader.start()

    def _serve(self) -> None:
        stdin, stdout = self.process.stdin, self.process.stdout
        assert stdin is not None and stdout is not None
        broken: str | None = None
        try:
            while (message := read_frame(stdout)) is not None:
                kind, partition = message[0], message[1]
                if kind in ("commit", "get_chunk"):
                    try:
                        if kind == "commit":
                            answer: tuple[str, Any] = ("ok", self.apply(partition, message[2], message[3]))
                        else:
                            answer = ("ok", self.get_chunk(partition, message[2]))
                    except Exception as exc:  # noqa: BLE001 - the worker's task fails with it, named
                        answer = ("error", f"{type(exc).__name__}: {exc}")
                    write_frame(stdin, answer)
                elif kind == "report":
                    self.progress(partition, message[2], message[3], message[4])
                elif kind == "done":
                    self.errors[partition] = message[2]
                    self.finished[partition].set()
        except OSError as exc:  # its pipe closed while it was answered: gone, its exit code says how
            log.info("ingestion worker of partitions %s: %s", self.partitions, exc)
        except Exception as exc:  # noqa: BLE001 - a frame that cannot be read: the worker is stopped, its partitions fail
            log.warning("ingestion worker of partitions %s: %s", self.partitions, exc)
            broken = f"its ingestion worker's messages could not be read ({type(exc).__name__}: {exc})"
            self.process.kill()
        code = self.process.wait()
        unfinished = [p for p, finished in self.finished.items() if not finished.is_set()]
        # Killed from outside (SIGKILL: an operator, the OOM killer; SIGTERM before its handler was set): like a
        # worker stopped from outside, it leaves its partitions to the client's own tasks, which resume from their
        # checkpoints. Each commit it sent was applied whole or not at all, so the file holds exactly what those
        # checkpoints cover. A worker that crashed on its own (another exit code, or messages that could not be read)
        # fails its partitions: the same input would crash the client's own task, in the process serving reads.
        killed = broken is None and code in (-signal.SIGKILL, -signal.SIGTERM)
        if unfinished and killed and not self._stopping:
            log.warning(
                "ingestion worker of partitions %s was killed (exit code %s) before they were done: the client's own "
                "tasks go on from their checkpoints",
                unfinished,
                code,
            )
        for partition in unfinished:
            reason = None if self._stopping or killed else broken or f"its ingestion worker exited with code {code}"
            self.errors[partition] = reason
            self.finished[partition].set()

    def wait(self, partition: int) -> str | None:
        """Until the partition's batch phase is over here (END_OF_PUSH committed, or the worker stopped): its error,
        or None. The client stops a worker itself (`stop`) when it stops the version."""
        self.finished[partition].wait()
        return self.errors[partition]

    def stop(self) -> None:
        if all(finished.is_set() for finished in self.finished.values()):
            return  # every partition done: the worker exits on its own
        if not self._stopping and self.process.poll() is None:
            self._stopping = True
            self.process.send_signal(signal.SIGTERM)

    def close(self, timeout: float = 30.0) -> None:
        """Stop the worker and wait for it; killed if it does not exit within `timeout`."""
        self.stop()
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.reader.join(timeout)
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


if __name__ == "__main__":
    main()
