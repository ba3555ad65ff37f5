"""The nearline streaming job through `venice stream` and a real spark-submit, against the session's platform:
events in, the same writes out in the region's real-time topic (decoded and counted per producer with DIV, as
ingestion counts them) and read back from every region; the driver SIGKILLed in the middle of a batch's write and
started again loses nothing and applies nothing twice; a batch with a bad event fails the pipeline with its cause
and writes none of its events."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from confluent_kafka import Producer

from tests.support.jobs import RecordsJob
from tests.support.platform import SCHEMAS, PlatformEnv
from tests.support.reads import wait_for
from tests.support.topics import read_partition
from venice_core.client import ReadClient
from venice_core.controller import stores, streams
from venice_core.errors import StreamInputError, VeniceError
from venice_core.protocol import serde
from venice_core.protocol.div import Validator
from venice_core.protocol.envelope import MessageType, checksum_bytes, decode
from venice_core.pubsub import admin, client_config
from venice_core.spark.jobs import stream
from venice_core.streams import control

REGION = "dc-0"
PARTITIONS = 2
KEY_SCHEMA = serde.parse("string")
VALUE_SCHEMA = serde.parse(json.loads((SCHEMAS / "user_value_v1.avsc").read_text()))


def _event(i: int, ts: int) -> dict[str, Any]:
    return {"user": f"u{i % 37}", "name": f"n{i}", "age": i, "score": i / 2, "ts": ts}


def _produce(bootstrap: str, topic: str, events: list[dict[str, Any]], partition: int | None = None) -> None:
    producer = Producer(client_config(bootstrap, **{"linger.ms": 200}))
    for i, event in enumerate(events):
        raw = json.dumps(event).encode()
        producer.produce(topic, raw, partition=i % PARTITIONS if partition is None else partition)
    assert producer.flush(30) == 0


def _oracle(events: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted((e["user"], e["name"], e["age"], e["score"], e["ts"]) for e in events)


def rt_writes(env: PlatformEnv, store: str) -> tuple[list[tuple[Any, ...]], int]:
    """The real-time topic's writes as ingestion takes them (DIV per partition: duplicates skipped, a gap or a bad
    checksum raised), decoded; and how many duplicates were skipped."""
    region = env.config.region(REGION)
    writes: list[tuple[Any, ...]] = []
    duplicates = 0
    for partition in range(PARTITIONS):
        validator = Validator()
        for key, value in read_partition(region.kafka_bootstrap, region.real_time_topic(store), partition):
            message = decode(key, value)
            checksum = None if message.is_control else checksum_bytes(key, value)
            if not validator.accept(message, checksum):
                duplicates += 1
                continue
            if message.type is MessageType.PUT:
                assert message.schema_id == 1
                record = serde.deserialize(VALUE_SCHEMA, message.value)
                user = serde.deserialize(KEY_SCHEMA, message.key)
                writes.append((user, record["name"], record["age"], record["score"], message.producer.timestamp_ms))
    return sorted(writes), duplicates


def _reads_equal(clients: list[ReadClient], store: str, expected: dict[str, Any]) -> bool:
    for client in clients:
        try:
            got = client.batch_get(store, sorted(expected))
        except VeniceError:
            return False
        if got != expected:
            return False
    return True


@pytest.mark.spark
def test_stream_writes_each_event_once_across_a_driver_kill_and_refuses_a_bad_batch(platform_env: PlatformEnv) -> None:
    env, config = platform_env, platform_env.config
    store = env.create_user_store("streamed", partitions=PARTITIONS)
    stores.update_store(env.meta, config, store, hybrid_rewind_seconds=3600, hybrid_offset_lag_threshold=0)
    env.push(store, RecordsJob({"batch": {"name": "b", "age": 1, "score": 1.0}}))  # a hybrid version to ingest into
    bootstrap = config.region(REGION).kafka_bootstrap
    source = f"events_{uuid.uuid4().hex[:8]}"
    admin.create_topic(bootstrap, source, PARTITIONS)
    name = f"s{uuid.uuid4().hex[:8]}"
    first = [_event(i, 1_000 + i) for i in range(60)]
    _produce(bootstrap, source, first)
    job = control.process(config, name)
    try:
        # Batch 0 holds every first event; one of its two tasks stops after writing 10 records.
        env.cli(
            "stream", "start", name, "--store", store, "--source-topic", source, "--region", REGION,
            "--key-field", "user", "--event-time-field", "ts", "--trigger-seconds", "0.5",
            "--conf", "spark.venice.stream.test.hang.after.records=10", check=True,
        )  # fmt: skip
        wait_for("the hung task's writes", lambda: len(rt_writes(env, store)[0]) >= 10)
        job.kill()  # SIGKILL the whole process group, mid-batch
        status = env.cli("stream", "status", name, check=True).stdout
        assert status.startswith(f"{name}: failed: the job exited without saying why"), status

        second = [_event(i, 2_000 + i) for i in range(60, 100)]
        _produce(bootstrap, source, second)
        env.cli("stream", "start", name, check=True)  # by name: as it last ran; the checkpoint replays batch 0
        expected = _oracle(first + second)
        wait_for("every event written", lambda: len(rt_writes(env, store)[0]) >= len(expected))
        writes, duplicates = rt_writes(env, store)
        assert writes == expected  # nothing lost, nothing written twice, write timestamps the events' times
        assert duplicates >= 10  # the replayed batch re-sent what the killed run had written, and it was skipped
        latest = {e["user"]: e for e in sorted(first + second, key=lambda e: e["ts"])}
        expected_reads = {"batch": {"name": "b", "age": 1, "score": 1.0}}
        expected_reads.update({u: {k: e[k] for k in ("name", "age", "score")} for u, e in latest.items()})
        clients = [ReadClient("127.0.0.1", config.server_port(region)) for region in config.region_names]
        wait_for("every region to serve the writes", lambda: _reads_equal(clients, store, expected_reads))
        for client in clients:
            client.close()
        record = streams.get_pipeline(env.meta, name)
        assert record.state == streams.RUNNING and sum(record.offsets.values()) == len(first) + len(second)

        # One batch: good events, then one without its key. None of it is written; the cause is the status.
        bad = [_event(i, 3_000 + i) for i in range(100, 105)] + [{"name": "keyless", "age": 1, "score": 0, "ts": 9}]
        _produce(bootstrap, source, bad, partition=0)
        wait_for("the job to stop", lambda: job.pid() is None)
        status = env.cli("stream", "status", name, check=True).stdout
        assert status.startswith(f"{name}: failed: batch "), status
        assert f"not written: event at {source}/0@" in status and "has no key field 'user'" in status
        assert rt_writes(env, store)[0] == expected
    finally:
        job.stop(timeout=10)


def test_a_source_topic_that_does_not_exist_fails_the_pipeline_with_its_cause(platform_env: PlatformEnv) -> None:
    env, config = platform_env, platform_env.config
    store = env.create_user_store("streamed", partitions=1)
    stores.update_store(env.meta, config, store, hybrid_rewind_seconds=60)
    name = f"s{uuid.uuid4().hex[:8]}"
    record = streams.new_run(env.meta, name, store, REGION, "no_such_topic", {})
    argv = [
        "--name", name, "--run-id", record.run_id, "--store", store, "--region", REGION,
        "--source-topic", "no_such_topic", "--source-bootstrap", config.region(REGION).kafka_bootstrap,
        "--key-field", "user", "--checkpoint", str(env.home / "unused"),
    ]  # fmt: skip
    with pytest.raises(StreamInputError, match="source topic 'no_such_topic' does not exist"):
        stream.run(stream.parse_args(argv), config)
    failed = streams.get_pipeline(env.meta, name)
    assert failed.state == streams.FAILED and "source topic 'no_such_topic' does not exist" in (failed.last_error or "")
