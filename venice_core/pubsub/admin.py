"""Topic administration with confluent-kafka's AdminClient; broker failures become one clear ComponentError."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, Protocol

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]  # public, re-exported implicitly

from venice_core.errors import ComponentError
from venice_core.pubsub import client_config
from venice_core.utils.waiting import poll_until

TIMEOUT_SECONDS = 15.0
# Requests the controller serves: each attempt bounded, retried until a broker that died meanwhile is fenced (after
# its session, `broker.session.timeout.ms`, 9 s by default) and a live one takes them.
ATTEMPT_SECONDS = 5.0
CONTROLLER_TIMEOUT_SECONDS = 30.0


class TopicAdmin(Protocol):
    """What the controller needs of a topic administrator. This module is the one used in production (a module
    satisfies a Protocol); controller tests pass an in-memory one so they need no broker."""

    def create_topic(
        self, bootstrap: str, topic: str, partitions: int, replication_factor: int = 1, min_insync_replicas: int = 1
    ) -> None: ...

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


# What librdkafka reports when a broker refuses who the client says it is (credentials, certificate, protocol).
_REFUSALS = (KafkaError._AUTHENTICATION, KafkaError._SSL)


def check_reachable(bootstrap: str, timeout: float = 10.0) -> None:
    """The brokers answer this client: ComponentError naming why not (a refused connection, credentials or a
    certificate the brokers refused, no answer in `timeout`)."""
    reason = refused(bootstrap)
    if reason:
        raise ComponentError(f"Kafka broker at {bootstrap} is unreachable: {reason}")
    seen: list[KafkaError] = []
    settings = client_config(bootstrap, **{"socket.timeout.ms": 10000, "error_cb": seen.append})
    client = AdminClient(settings)
    try:
        client.list_topics(timeout=timeout)
    except KafkaException as exc:
        client.poll(0)  # the errors seen meanwhile reach `error_cb` here
        refusal = next((error for error in seen if error.code() in _REFUSALS), None)
        if refusal is not None:
            who = settings.get("sasl.username", "a client without credentials")
            raise ComponentError(f"Kafka at {bootstrap} refused {who}: {refusal.str()}") from None
        raise ComponentError(f"Kafka broker at {bootstrap} is unreachable: {exc.args[0].str()}") from None


def create_topic(
    bootstrap: str, topic: str, partitions: int, replication_factor: int = 1, min_insync_replicas: int = 1
) -> None:
    """Create the topic if it does not exist (idempotent); a topic with another partition count is an error.
    `replication_factor` replicas of each partition, `min_insync_replicas` of them must have a write before the
    broker acknowledges it (the producers send with acks=all): a region's `RegionConfig` has both."""
    check_reachable(bootstrap)
    new = NewTopic(topic, partitions, replication_factor, config={"min.insync.replicas": str(min_insync_replicas)})
    errors = _at_the_controller(bootstrap, [topic], lambda admin, _, timeouts: admin.create_topics([new], **timeouts))
    admin = admin_client(bootstrap)
    if topic in errors:
        if errors[topic].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise ComponentError(f"cannot create topic {topic} at {bootstrap}: {errors[topic].str()}")
        existing = len(admin.list_topics(topic, timeout=TIMEOUT_SECONDS).topics[topic].partitions)
        if existing != partitions:
            raise ComponentError(f"topic {topic} exists with {existing} partitions, not {partitions}")
    _wait_for_leaders(admin, topic)


# A request to the controller that timed out or failed on the way: sent, through stale metadata, to a broker that
# just died (it stays registered until its session times out), or to one no longer the controller.
_RETRIABLE = (KafkaError._TIMED_OUT, KafkaError._TRANSPORT, KafkaError.NOT_CONTROLLER, KafkaError.REQUEST_TIMED_OUT)

_Request = Callable[[AdminClient, list[str], dict[str, float]], dict[str, Future[Any]]]


def _at_the_controller(bootstrap: str, topics: list[str], request: _Request) -> dict[str, KafkaError]:
    """Make a request the cluster's controller serves (topics' creation, deletion) as `request(admin, topics,
    timeouts)`, a future per topic; the topics that failed in a way worth retrying are asked again with a new
    client (so with fresh metadata) until `CONTROLLER_TIMEOUT_SECONDS` have passed. Returns each failed topic's
    error."""
    deadline = time.monotonic() + CONTROLLER_TIMEOUT_SECONDS
    remaining = list(topics)
    errors: dict[str, KafkaError] = {}
    while remaining:
        attempt = min(ATTEMPT_SECONDS, max(deadline - time.monotonic(), 1.0))
        admin = admin_client(bootstrap)  # referenced until its futures are done: destroyed, it fails them
        futures = request(admin, remaining, {"operation_timeout": attempt, "request_timeout": attempt})
        remaining = []
        for topic, future in futures.items():
            try:
                future.result(timeout=attempt + 5)
                errors.pop(topic, None)
            except KafkaException as exc:
                errors[topic] = error = exc.args[0]
                if (error.retriable() or error.code() in _RETRIABLE) and time.monotonic() < deadline:
                    remaining.append(topic)
        if remaining:
            time.sleep(0.2)
    return errors


def _wait_for_leaders(admin: AdminClient, topic: str) -> None:
    """A topic is usable once every partition has a leader: the broker answers a request made sooner with
    NOT_LEADER_FOR_PARTITION."""

    def led() -> bool:
        metadata = admin.list_topics(topic, timeout=TIMEOUT_SECONDS).topics.get(topic)
        if metadata is None or metadata.error is not None:
            return False
        return all(p.leader >= 0 for p in metadata.partitions.values())

    poll_until(
        led,
        timeout=TIMEOUT_SECONDS,
        interval=0.05,
        timeout_error=lambda _: ComponentError(
            f"topic {topic} has partitions without a leader after {TIMEOUT_SECONDS}s"
        ),
    )


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
    errors = _at_the_controller(bootstrap, topics, lambda admin, left, timeouts: admin.delete_topics(left, **timeouts))
    for topic, error in errors.items():
        if error.code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
            raise ComponentError(f"cannot delete topic {topic}: {error.str()}")


def end_offsets(bootstrap: str, topic: str, partitions: int | list[int]) -> list[int]:
    """The offset after the last message of each partition (`partitions`: a count, or the partition numbers).
    KafkaException if the broker does not know the topic yet."""
    numbers = range(partitions) if isinstance(partitions, int) else partitions
    consumer = Consumer(client_config(bootstrap, **{"group.id": "venice-offsets", "enable.auto.commit": False}))
    try:
        return [_high_watermark(consumer, topic, p) for p in numbers]
    finally:
        consumer.close()


def _high_watermark(consumer: Consumer, topic: str, partition: int) -> int:
    """A partition's end offset. A leader elected a moment ago may still answer NOT_LEADER_FOR_PARTITION (its
    metadata reaches the broker's request handling a little later): asked again, briefly."""
    not_leader: list[KafkaException] = []  # the last answer NOT_LEADER_FOR_PARTITION: raised if it stays so

    def end() -> tuple[int] | None:  # (the offset), truthy even when it is 0
        try:
            return (consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=TIMEOUT_SECONDS)[1],)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.NOT_LEADER_FOR_PARTITION:
                raise
            not_leader[:] = [exc]
            return None

    found = poll_until(end, timeout=TIMEOUT_SECONDS, interval=0.1, timeout_error=lambda _: not_leader[0])
    assert found is not None  # poll_until returns only a truthy answer when given a timeout_error
    return found[0]
