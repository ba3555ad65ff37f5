"""Topic administration with confluent-kafka's AdminClient; broker failures become one clear ComponentError."""

from __future__ import annotations

import socket
import time
from typing import Any, Protocol

from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from venice_core.errors import ComponentError
from venice_core.pubsub import client_config

TIMEOUT_SECONDS = 15.0


class TopicAdmin(Protocol):
    """What the controller needs of a topic administrator. This module is the one used in production (a module
    satisfies a Protocol); controller tests pass an in-memory one so they need no broker."""

    def create_topic(self, bootstrap: str, topic: str, partitions: int) -> None: ...

    def delete_topics(self, bootstrap: str, topics: list[str]) -> None: ...


def admin_client(bootstrap: str) -> AdminClient:
    return AdminClient(client_config(bootstrap, **{"socket.timeout.ms": 10000}))


def refused(bootstrap: str, connect_timeout: float = 2.0) -> str | None:
    """Why every bootstrap server turned a TCP connection down at once (refused, unknown host), or None if one took
    it or any was slow to answer: that case is left to the Kafka client's own timeout. A broker that is down answers
    in a millisecond; librdkafka would retry it for the whole `timeout`."""
    reasons = []
    for server in (s.strip() for s in bootstrap.split(",")):
        host, _, port = server.rpartition(":")
        host = host.rpartition("://")[2].strip("[]")  # PLAINTEXT://host, [ipv6]
        try:
            with socket.create_connection((host, int(port)), timeout=connect_timeout):
                return None
        except (ConnectionRefusedError, socket.gaierror) as exc:
            if isinstance(exc, socket.gaierror) and exc.errno != socket.EAI_NONAME:
                return None  # a resolver that may answer later (EAI_AGAIN): librdkafka retries it
            reasons.append(f"{server}: {exc.strerror or exc}")
        except (OSError, ValueError):
            return None
    return "; ".join(reasons)


def check_reachable(bootstrap: str, timeout: float = 10.0) -> None:
    reason = refused(bootstrap)
    if reason:
        raise ComponentError(f"Kafka broker at {bootstrap} is unreachable: {reason}")
    try:
        admin_client(bootstrap).list_topics(timeout=timeout)
    except KafkaException as exc:
        raise ComponentError(f"Kafka broker at {bootstrap} is unreachable: {exc.args[0].str()}") from None


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    """Create the topic if it does not exist (idempotent); a topic with another partition count is an error."""
    check_reachable(bootstrap)
    admin = admin_client(bootstrap)
    future = admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=TIMEOUT_SECONDS)[topic]
    try:
        future.result(timeout=TIMEOUT_SECONDS)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise ComponentError(f"cannot create topic {topic} at {bootstrap}: {exc.args[0].str()}") from None
        existing = len(admin.list_topics(topic, timeout=TIMEOUT_SECONDS).topics[topic].partitions)
        if existing != partitions:
            raise ComponentError(f"topic {topic} exists with {existing} partitions, not {partitions}") from None
    _wait_for_leaders(admin, topic)


def _wait_for_leaders(admin: AdminClient, topic: str) -> None:
    """A topic is usable once every partition has a leader: the broker answers a request made sooner with
    NOT_LEADER_FOR_PARTITION."""
    deadline = time.monotonic() + TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        metadata = admin.list_topics(topic, timeout=TIMEOUT_SECONDS).topics.get(topic)
        if metadata is not None and metadata.error is None and all(p.leader >= 0 for p in metadata.partitions.values()):
            return
        time.sleep(0.05)
    raise ComponentError(f"topic {topic} has partitions without a leader after {TIMEOUT_SECONDS}s")


def partition_count(bootstrap: str, topic: str) -> int | None:
    """The topic's partition count, None if it does not exist; an unreachable broker is a ComponentError."""
    try:
        metadata = admin_client(bootstrap).list_topics(topic, timeout=TIMEOUT_SECONDS).topics.get(topic)
    except KafkaException as exc:
        raise ComponentError(f"Kafka broker at {bootstrap} is unreachable: {exc.args[0].str()}") from None
    if metadata is None or metadata.error is not None:
        return None
    return len(metadata.partitions)


def delete_topics(bootstrap: str, topics: list[str]) -> None:
    if not topics:
        return
    admin = admin_client(bootstrap)
    for topic, future in admin.delete_topics(topics, operation_timeout=TIMEOUT_SECONDS).items():
        try:
            future.result(timeout=TIMEOUT_SECONDS)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise ComponentError(f"cannot delete topic {topic}: {exc.args[0].str()}") from None


def end_offsets(bootstrap: str, topic: str, partitions: int | list[int]) -> list[int]:
    """The offset after the last message of each partition (`partitions`: a count, or the partition numbers).
    KafkaException if the broker does not know the topic yet."""
    from confluent_kafka import Consumer

    numbers = range(partitions) if isinstance(partitions, int) else partitions
    consumer = Consumer(client_config(bootstrap, **{"group.id": "venice-offsets", "enable.auto.commit": False}))
    try:
        return [_high_watermark(consumer, topic, p) for p in numbers]
    finally:
        consumer.close()


def _high_watermark(consumer: Any, topic: str, partition: int) -> int:
    """A partition's end offset. A leader elected a moment ago may still answer NOT_LEADER_FOR_PARTITION (its
    metadata reaches the broker's request handling a little later): asked again, briefly."""
    deadline = time.monotonic() + TIMEOUT_SECONDS
    while True:
        try:
            return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=TIMEOUT_SECONDS)[1]
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.NOT_LEADER_FOR_PARTITION or time.monotonic() > deadline:
                raise
            time.sleep(0.1)
