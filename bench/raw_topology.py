"""The Kafka work a rollout to several regions cannot avoid, done by confluent-kafka alone: the floor under a push's
or a repush's ratio on this machine.

A push to R regions writes its records to the source region's version topic once, and each region reads them: the source
region consumes that topic; every other region's leader consumes it and produces each record to its own version topic
(`ingestion.leader`, which also ingests it). So R consumes and R produces of the same bytes, against one produce and one
consume for the single-stream baseline. `RawRegions` runs just that, with no platform code (no Spark, no Avro, no DIV,
no storage): one process per region, started and subscribed before the clock starts, as region servers are, each reading
the topic the caller writes until it has every record (and, outside the source region, has flushed its copy). Its
seconds, set against the single-stream baseline of the same run, are what confluent-kafka from Python with the
platform's client settings takes for that work on this machine: an empirical floor under a rollout's ratio (not a
proof), and with `spark_start_seconds` added, under a push or repush submitted to Spark.

    python -m bench.raw_topology region BOOTSTRAP TOPIC PARTITIONS COUNT COMPRESSION [MIRROR]   (one region's process)
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from venice_core.config import ClusterConfig
from venice_core.pubsub import CONSUMER_CONFIG, PRODUCER_CONFIG, admin, client_config
from venice_core.spark.submit import job_spec, scratch_dir, submit_env

SPARK_NOOP = Path(__file__).with_name("spark_noop.py")


def produce(producer: Producer, topic: str, key: bytes, value: bytes, partition: int) -> None:
    while True:
        try:
            producer.produce(topic, value=value, key=key, partition=partition)
            return
        except BufferError:
            producer.poll(0.05)


class RawRegions:
    """One raw process per region reading `topic` (`topic` itself is for the caller to write), started on entry and
    ready when `__enter__` returns; `wait()` returns once every one has read `count` records, and copied them to its
    own topic outside the source region."""

    def __init__(self, config: ClusterConfig, partitions: int, count: int) -> None:
        source = config.region(config.source_region)
        self.bootstrap = source.kafka_bootstrap
        self.topic = f"raw-source-{uuid.uuid4().hex[:8]}"
        admin.create_topic(self.bootstrap, self.topic, partitions)
        self.processes: list[subprocess.Popen[str]] = []
        try:
            for region in config.regions:
                command = [sys.executable, "-m", "bench.raw_topology", "region", region.kafka_bootstrap, self.topic]
                command += [str(partitions), str(count), config.kafka.producer_compression]
                if region.name != source.name:
                    mirror = f"raw-{region.name}-{uuid.uuid4().hex[:8]}"
                    admin.create_topic(region.kafka_bootstrap, mirror, partitions)
                    command.append(mirror)
                self.processes.append(subprocess.Popen(command, stdout=subprocess.PIPE, text=True))
        except BaseException:
            self.__exit__()
            raise

    def __enter__(self) -> RawRegions:
        try:
            for process in self.processes:
                assert process.stdout is not None
                assert process.stdout.readline().strip() == "ready", "a raw region process did not start"
        except BaseException:
            self.__exit__()
            raise
        return self

    def wait(self) -> None:
        for process in self.processes:
            assert process.stdout is not None
            line = process.stdout.readline().strip()
            assert line == "done", f"a raw region process ended with {line!r}"

    def __exit__(self, *_: object) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.kill()
            process.wait()
            if process.stdout is not None:
                process.stdout.close()


def region(bootstrap: str, topic: str, partitions: int, count: int, compression: str, mirror: str | None) -> None:
    """One region's raw work: consume `topic` until `count` records have come; outside the source region, produce
    each to `mirror` (same key, value and partition, compressed as the platform's producers are) and flush."""
    settings = {"group.id": f"raw-{uuid.uuid4().hex[:8]}", "enable.partition.eof": True}
    consumer = Consumer(client_config(bootstrap, **CONSUMER_CONFIG, **settings))
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    at_end: set[int] = set()
    while len(at_end) < partitions:  # connected, and each partition fetched (still empty), before the clock starts
        for message in consumer.consume(partitions, 1.0):
            error, partition = message.error(), message.partition()
            if error is not None and error.code() == KafkaError._PARTITION_EOF and partition is not None:
                at_end.add(partition)
    copy: tuple[Producer, str] | None = None  # outside the source region: the producer and topic of the copy
    if mirror:
        copy = Producer(client_config(bootstrap, **PRODUCER_CONFIG, **{"compression.type": compression})), mirror
        copy[0].list_topics(mirror, timeout=30)  # the copy's metadata known before the clock starts
    print("ready", flush=True)
    received = 0
    deadline = time.monotonic() + 600
    while received < count:
        if time.monotonic() > deadline:
            sys.exit(f"raw region: {received} of {count} records after 600 s")
        for message in consumer.consume(5000, 1.0):
            error = message.error()
            if error is not None:
                if error.code() != KafkaError._PARTITION_EOF:
                    raise RuntimeError(error.str())
                continue
            received += 1
            if copy is not None:
                key, value, partition = message.key(), message.value(), message.partition()
                assert key is not None and value is not None and partition is not None  # a record the bench wrote
                produce(*copy, key, value, partition)
        if copy is not None:
            copy[0].poll(0)
    if copy is not None:
        assert copy[0].flush(120) == 0
    consumer.close()
    print("done", flush=True)


def timed(regions: RawRegions, write: Callable[[], object]) -> float:
    """Seconds from the start of `write()` (which writes the records to `regions.topic`) until every region is done."""
    started = time.perf_counter()
    write()
    regions.wait()
    return time.perf_counter() - started


def spark_start_seconds(config: ClusterConfig) -> float:
    """Seconds of a `spark-submit`, with the jobs' master and settings, of an application that runs one trivial
    Python task per core (`bench/spark_noop.py`): what a push or repush submitted to Spark pays before its first
    record."""
    spec = job_spec(
        "venice-bench-noop",
        config.spark.master,
        [],
        str(SPARK_NOOP),
        {},
        scratch_dir(config),
        driver_host=config.hosts.local_address(),
    )
    started = time.perf_counter()
    done = subprocess.run(spec.argv(), env=submit_env(config), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return time.perf_counter() - started


if __name__ == "__main__":
    if len(sys.argv) not in (7, 8) or sys.argv[1] != "region":
        sys.exit(__doc__.strip().splitlines()[-1])
    mirror = sys.argv[7] if len(sys.argv) == 8 else None
    region(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6], mirror)
