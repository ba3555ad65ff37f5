"""The embedded broker is a real Kafka: topics, produce, consume, and data that survives a restart."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.platform import PlatformEnv
from tests.support.topics import read_partition
from venice_core.embedded import kafka


def _create_topic(bootstrap: str, topic: str, partitions: int = 2) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(timeout=30)


def _produce(bootstrap: str, topic: str, messages: list[tuple[bytes, bytes]]) -> None:
    errors: list[str] = []
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all"})
    for key, value in messages:
        producer.produce(
            topic,
            value=value,
            key=key,
            partition=0,
            on_delivery=lambda err, _msg: errors.append(str(err)) if err else None,
        )
    assert producer.flush(30) == 0
    assert errors == []


def test_produce_consume_and_survive_a_restart(platform_env: PlatformEnv) -> None:
    config = platform_env.config
    bootstrap = config.kafka.bootstrap
    topic = f"restart-{uuid.uuid4().hex[:8]}"
    messages = [(f"k{i}".encode(), f"value-{i}".encode() * 10) for i in range(500)]

    _create_topic(bootstrap, topic)
    _produce(bootstrap, topic, messages)
    assert read_partition(bootstrap, topic) == messages

    pid_before = kafka.process(config).pid()
    assert kafka.stop(config)
    assert kafka.process(config).pid() is None
    assert not kafka.is_healthy(config, timeout=1)
    assert "started" in kafka.start(config)
    assert kafka.process(config).pid() not in (None, pid_before)

    assert read_partition(bootstrap, topic) == messages


def test_starting_twice_says_already_running(platform_env: PlatformEnv) -> None:
    assert "already running" in kafka.start(platform_env.config)


@pytest.mark.kafka  # Kafka's own storage tool, on the JVM
def test_storage_formats_with_a_cluster_id_starting_with_a_dash(tmp_path) -> None:
    """Regression: a random base64 cluster id starts with '-' one time in 64."""
    from venice_core.config import load_config

    config = load_config({"VENICE__DATA_DIR": str(tmp_path)})
    props = tmp_path / "server.properties"
    props.write_text(
        kafka.server_properties(config).replace(str(config.data_dir / "kafka" / "data"), str(tmp_path / "data"))
    )
    log4j = tmp_path / "log4j2.properties"
    log4j.write_text(kafka.LOG4J2_PROPERTIES.format(log_dir=tmp_path))
    kafka.format_storage(kafka.jvm_command(config, kafka.ensure_jars(), log4j), props, "-" + "A" * 21)
    assert "cluster.id=-AAAAAAAAAAAAAAAAAAAAA" in (tmp_path / "data" / "meta.properties").read_text()
