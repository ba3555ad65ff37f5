"""The embedded Kafka as a KRaft cluster of three nodes: topics on three replicas (two in sync) keep taking
acks=all writes, and can still be created, while one broker is killed; `start` brings the lost node back."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import ConfigResource

from tests.support.leftovers import leaves_nothing, platform_parts
from tests.support.platform import make_platform_env
from tests.support.topics import read_partition
from venice_core.embedded import kafka
from venice_core.pubsub import PRODUCER_CONFIG, admin, client_config

CLUSTER = {"kafka.embedded.brokers": "3", "kafka.topic.replication.factor": "3", "kafka.topic.min.insync.replicas": "2"}


def _produce(bootstrap: str, topic: str, messages: list[tuple[bytes, bytes]]) -> None:
    errors: list[str] = []
    producer = Producer(client_config(bootstrap, **PRODUCER_CONFIG))  # idempotent, acks=all: as the platform writes
    for key, value in messages:
        producer.produce(
            topic, value=value, key=key, partition=0, on_delivery=lambda e, _m: e and errors.append(str(e))
        )
    assert producer.flush(60) == 0
    assert errors == []


@pytest.mark.kafka  # a cluster of its own
def test_a_cluster_takes_writes_and_new_topics_with_a_broker_killed(tmp_path: Path) -> None:
    config = make_platform_env(tmp_path / "home", CLUSTER).config
    region, bootstrap = config.regions[0], config.kafka.bootstrap
    processes, ports, _ = platform_parts(config)
    with leaves_nothing(processes, ports):
        try:
            assert "kafka-0 (pid" in kafka.start(config) and kafka.is_healthy(config)
            assert all(kafka.node_healthy(config, n) for n in range(3))
            before = f"before-{uuid.uuid4().hex[:8]}"
            admin.create_topic(bootstrap, before, 1, region.replication_factor, region.min_insync_replicas)
            client = admin.admin_client(bootstrap)  # referenced while its futures run
            metadata = client.list_topics(before, timeout=10).topics[before].partitions[0]
            assert sorted(metadata.replicas) == [1, 2, 3]
            described = client.describe_configs([ConfigResource("topic", before)])
            assert next(iter(described.values())).result()["min.insync.replicas"].value == "2"
            messages = [(f"k{i}".encode(), f"v{i}".encode()) for i in range(200)]
            _produce(bootstrap, before, messages[:100])

            kafka.kill_node(config, 1)  # as a crash: still registered until its session times out
            assert kafka.process(config, 1).pid() is None
            after = f"after-{uuid.uuid4().hex[:8]}"
            admin.create_topic(bootstrap, after, 1, region.replication_factor, region.min_insync_replicas)
            _produce(bootstrap, before, messages[100:])  # two replicas in sync are enough
            _produce(bootstrap, after, messages)
            assert not kafka.node_healthy(config, 1, timeout=1)

            assert "kafka-1 (pid" in kafka.start(config)  # only the lost node; the cluster healthy again
            assert kafka.node_healthy(config, 1) and kafka.is_healthy(config)
            assert read_partition(bootstrap, before) == messages
            assert read_partition(bootstrap, after) == messages
        finally:
            assert kafka.stop(config)
