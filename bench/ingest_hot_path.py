"""Micro-benchmark of the ingestion hot path without a broker: decode, DIV and RocksDB writes of N PUTs (one
producer, one segment, like a Spark task's partition) fed to `PartitionIngestionTask`'s batch phase in consume-sized
batches. Prints microseconds per record.

    .venv/bin/python -m bench.ingest_hot_path [--records 200000]
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path

from tests.support.kafka_fakes import FakeConsumer, FakeMessage
from venice_core.ingestion.task import CONSUME_BATCH, PartitionIngestionTask
from venice_core.protocol.div import SegmentState, deterministic_guid
from venice_core.protocol.envelope import ControlMessageType, checksum_bytes, encode_control, encode_put
from venice_core.storage.ingestion_checkpoint import IngestionCheckpoint
from venice_core.storage.rocksdb import PartitionStorage


def messages(count: int) -> list[FakeMessage]:
    state = SegmentState(deterministic_guid("bench", 0))
    encoded = [encode_control(state.start_segment(), ControlMessageType.START_OF_SEGMENT, {})]
    for i in range(count):
        key, value = encode_put(state.next(), b"\x00" + i.to_bytes(8, "big"), 1, b"v" * 100)
        state.add(checksum_bytes(key, value))
        encoded.append((key, value))
    encoded.append(encode_control(state.next(), ControlMessageType.END_OF_SEGMENT, {"checksum": state.checksum}))
    control = SegmentState(deterministic_guid("bench", "control"))
    encoded.append(encode_control(control.start_segment(), ControlMessageType.START_OF_SEGMENT, {}))
    encoded.append(encode_control(control.next(), ControlMessageType.END_OF_PUSH, {"record_counts": {"0": count}}))
    return [FakeMessage(k, v, offset) for offset, (k, v) in enumerate(encoded)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    args = parser.parse_args()
    feed = messages(args.records)
    with tempfile.TemporaryDirectory() as tmp:
        storage = PartitionStorage(Path(tmp) / "p0")
        task = PartitionIngestionTask("unused", "bench", 0, storage, lambda *_: None, "bench")
        started = time.perf_counter()
        task._follow(task._batch_phase(IngestionCheckpoint()), FakeConsumer(feed), threading.Event())
        seconds = time.perf_counter() - started
        assert task.completed and task.stats.records == args.records, task.stats
        storage.close()
    print(
        f"ingestion hot path: {seconds / args.records * 1e6:.2f} us/record ({args.records} records, batches of "
        f"{CONSUME_BATCH})"
    )


if __name__ == "__main__":
    main()
