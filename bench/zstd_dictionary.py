"""ZSTD_WITH_DICT against ZSTD on the push benchmark's data (`scripts.generate_dataset`, four files, as
`bench.push_throughput` pushes it), both pushed in the same run: the dictionary's training in the push (its
`compression_dictionary` step: sampling and zstd's trainer), the store's size in a region (its values' bytes as
stored, compressed, and the bytes of the version's RocksDB files), and read latency through the routing client (p50
and p99 of single gets and of batch gets of 100 keys, the two stores read in alternating rounds).

    .venv/bin/python -m bench.zstd_dictionary [--records 1000000] [--reads 20000] [--batches 2000] [--conf K=V]

One region (dc-0): a region's store, and no other region's servers share the two cores while reads are timed.
`--conf` passes a push conf to the ZSTD_WITH_DICT push (`compression.dictionary.sample.size=...`, say).
"""

from __future__ import annotations

import argparse
import functools
import gc
import random
import re
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, TopicPartition

from bench.harness import SCHEMAS, report, sandbox_platform
from bench.push_throughput import PARTITIONS, conf_pair
from bench.read_latency import BATCH, percentiles, timed
from scripts.generate_dataset import generate
from venice_core.client import ReadClient
from venice_core.config import ClusterConfig
from venice_core.controller import stores
from venice_core.protocol.compression import CompressionStrategy, decompressor
from venice_core.pubsub import CONSUMER_CONFIG, client_config
from venice_core.pubsub.control import version_dictionary
from venice_core.rollout.local import push
from venice_core.spark.tasks.repush_tasks import PUT, decode_message

ROUNDS = 4  # reads of the two stores alternate, so that a machine busier in one moment weighs on both
TRAINED = re.compile(r"trained a (\d+)-byte ZSTD dictionary from (\d+) values \((\d+) bytes\) .* in ([\d.]+)s")


def stored_bytes(config: ClusterConfig, store: str, compression: CompressionStrategy) -> tuple[int, int, int]:
    """(values, their bytes as stored, their bytes decompressed) of version 1's topic in the region."""
    region = config.region(config.source_region)
    topic = region.version_topic(store, 1)
    decompress = decompressor(compression, version_dictionary(compression, region.kafka_bootstrap, topic))
    settings = {**CONSUMER_CONFIG, "group.id": "bench", "enable.partition.eof": True}
    consumer = Consumer(client_config(region.kafka_bootstrap, **settings))
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    count = packed = raw = ended = 0
    try:
        while ended < PARTITIONS:
            for message in consumer.consume(5000, 1.0):
                error = message.error()
                if error is not None:
                    ended += error.code() == KafkaError._PARTITION_EOF
                    continue
                decoded = decode_message(message.key() or b"", message.value() or b"")
                if decoded is not None and decoded[1] == PUT:
                    count, packed, raw = count + 1, packed + len(decoded[4]), raw + len(decompress(decoded[4]))
    finally:
        consumer.close()
    return count, packed, raw


def files_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--reads", type=int, default=20_000)
    parser.add_argument("--batches", type=int, default=2_000, help=f"batch gets of {BATCH} keys")
    parser.add_argument("--conf", action="append", default=[], type=conf_pair, help="a push conf of the dict push")
    args = parser.parse_args()
    with sandbox_platform({"regions": "dc-0"}) as (config, meta, home):
        data = generate(home / "data", args.records, files=4)
        key, value = (SCHEMAS / "user_key.avsc").read_text(), (SCHEMAS / "user_value_v1.avsc").read_text()
        kinds = {"ZSTD_WITH_DICT": "with_dict", "ZSTD": "plain"}
        pushed: dict[str, float] = {}
        said: list[str] = []
        for compression, store in kinds.items():
            stores.create_store(meta, config, store, key, value, partitions=PARTITIONS, compression=compression)
            confs = dict(args.conf) if compression == "ZSTD_WITH_DICT" else {}
            started = time.perf_counter()
            push(config, meta, store, str(data), confs=confs, progress=said.append)
            pushed[store] = time.perf_counter() - started
        trained = next(m for m in map(TRAINED.search, said) if m is not None)
        size, samples, sample_bytes, train_seconds = int(trained[1]), int(trained[2]), int(trained[3]), trained[4]
        sizes = {s: stored_bytes(config, s, CompressionStrategy[c]) for c, s in kinds.items()}
        disk = {s: files_bytes(config.instance_dir("dc-0") / f"{s}_v1") for s in kinds.values()}

        rng = random.Random(7)
        keys = [f"user-{rng.randrange(args.records):09d}" for _ in range(args.reads)]
        batches = [[keys[(b * BATCH + i) % len(keys)] for i in range(BATCH)] for b in range(args.batches)]
        client = ReadClient.for_region(config, "dc-0")
        for store in kinds.values():
            for k in keys[:1000]:  # warm up: connections, schemas, the dictionary
                client.get(store, k)
        gc.collect()
        gc.freeze()
        gets: dict[str, list[float]] = {s: [] for s in kinds.values()}
        batch_gets: dict[str, list[float]] = {s: [] for s in kinds.values()}
        for round_ in range(ROUNDS):
            order = list(kinds.values()) if round_ % 2 == 0 else list(reversed(kinds.values()))
            share = slice(round_, None, ROUNDS)
            for store in order:
                gets[store] += timed(functools.partial(client.get, store), keys[share])
                batch_gets[store] += timed(functools.partial(client.batch_get, store), batches[share])

    dict_store, zstd_store = kinds["ZSTD_WITH_DICT"], kinds["ZSTD"]
    count, packed, raw = sizes[zstd_store]
    figures = {s: (percentiles(gets[s]), percentiles(batch_gets[s])) for s in kinds.values()}
    (g50, g99), (b50, b99) = figures[dict_store]
    (zg50, zg99), (zb50, zb99) = figures[zstd_store]
    report(
        f"ZSTD_WITH_DICT (project) against ZSTD (baseline): {count:,} records of {raw / count:.0f} bytes serialised "
        f"({raw / 1e6:.1f} MB), {PARTITIONS} partitions, one region",
        [
            ("push seconds", f"{pushed[dict_store]:.1f}", f"{pushed[zstd_store]:.1f}"),
            ("value bytes stored (MB)", f"{sizes[dict_store][1] / 1e6:.2f}", f"{packed / 1e6:.2f}"),
            ("bytes per value", f"{sizes[dict_store][1] / count:.1f}", f"{packed / count:.1f}"),
            ("RocksDB files of the version (MB)", f"{disk[dict_store] / 1e6:.2f}", f"{disk[zstd_store] / 1e6:.2f}"),
            ("get p50 (ms)", f"{g50:.3f}", f"{zg50:.3f}"),
            ("get p99 (ms)", f"{g99:.3f}", f"{zg99:.3f}"),
            (f"batch get of {BATCH} p50 (ms)", f"{b50:.3f}", f"{zb50:.3f}"),
            (f"batch get of {BATCH} p99 (ms)", f"{b99:.3f}", f"{zb99:.3f}"),
        ],
    )
    assert sizes[dict_store][0] == count and sizes[dict_store][2] == raw  # the same values, decompressed
    print(
        f"  the dictionary: {size:,} bytes, trained in the push's compression_dictionary step from {samples:,} values "
        f"({sample_bytes / 1e6:.1f} MB sampled) in {train_seconds}s"
    )
    print(f"  gets {len(keys)} and batch gets {len(batches)} per store, in {ROUNDS} alternating rounds")
    print(
        f"  ratios (ZSTD_WITH_DICT / ZSTD): stored bytes {sizes[dict_store][1] / packed:.2f}x, RocksDB files "
        f"{disk[dict_store] / disk[zstd_store]:.2f}x, get p99 {g99 / zg99:.2f}x, batch get p99 {b99 / zb99:.2f}x"
    )


if __name__ == "__main__":
    main()
