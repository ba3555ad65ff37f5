"""Topics in tests: an in-memory topic administrator (a `pubsub.admin.TopicAdmin`) for controller tests that need
no broker, and a reader of a real topic partition, start to end."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaError, TopicPartition

from venice_core.errors import ComponentError
from venice_core.protocol.envelope import ControlMessageType, decode
from venice_core.pubsub import client_config


class InMemoryTopics:
    def __init__(self) -> None:
        self.partitions: dict[tuple[str, str], int] = {}  # (bootstrap, topic) -> partition count
        self.unreachable: set[str] = set()  # bootstraps whose broker does not answer
        self.ends: dict[tuple[str, str], list[int]] = {}  # (bootstrap, topic) -> end offsets (default: all 0)
        self.replication: dict[tuple[str, str], tuple[int, int]] = {}  # -> (replication factor, min.insync.replicas)

    def create_topic(
        self, bootstrap: str, topic: str, partitions: int, replication_factor: int = 1, min_insync_replicas: int = 1
    ) -> None:
        self.replication.setdefault((bootstrap, topic), (replication_factor, min_insync_replicas))
        existing = self.partitions.setdefault((bootstrap, topic), partitions)
        if existing != partitions:  # as Kafka's admin answers
            raise ComponentError(f"topic {topic} exists with {existing} partitions, not {partitions}")

    def delete_topics(self, bootstrap: str, topics: list[str]) -> None:
        for topic in topics:
            self.partitions.pop((bootstrap, topic), None)
            self.replication.pop((bootstrap, topic), None)

    def check_reachable(self, bootstrap: str, timeout: float = 10.0) -> None:
        if bootstrap in self.unreachable:
            raise ComponentError(f"Kafka broker at {bootstrap} is unreachable: test")

    def partition_count(self, bootstrap: str, topic: str) -> int | None:
        self.check_reachable(bootstrap)
        return self.partitions.get((bootstrap, topic))

    def end_offsets(self, bootstrap: str, topic: str, partitions: int) -> list[int]:
        self.check_reachable(bootstrap)
        return self.ends.get((bootstrap, topic), [0] * partitions)

    def names(self) -> set[str]:
        return {topic for _bootstrap, topic in self.partitions}


def read_partition(bootstrap: str, topic: str, partition: int = 0) -> list[tuple[bytes, bytes]]:
    """Every record of a partition, as (key, value), up to its end offset now."""
    return [(key, value) for key, value, _timestamp in read_records(bootstrap, topic, partition)]


def read_records(bootstrap: str, topic: str, partition: int = 0) -> list[tuple[bytes, bytes, int]]:
    """Every record of a partition, as (key, value, timestamp in milliseconds), up to its end offset now."""
    consumer = Consumer(
        client_config(bootstrap, **{"group.id": "test-read", "enable.partition.eof": True, "enable.auto.commit": False})
    )
    consumer.assign([TopicPartition(topic, partition, 0)])
    records: list[tuple[bytes, bytes, int]] = []
    try:
        while True:
            message = consumer.poll(10)
            assert message is not None, f"no end of {topic}[{partition}] within 10s"
            if message.error():
                assert message.error().code() == KafkaError._PARTITION_EOF, message.error().str()
                return records
            records.append((message.key(), message.value(), message.timestamp()[1]))
    finally:
        consumer.close()


def through_end_of_push(records: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """A version topic's records up to END_OF_PUSH, included: what a leader mirrors (ingestion stops there)."""
    for index, (key, value) in enumerate(records):
        if decode(key, value).control_type is ControlMessageType.END_OF_PUSH:
            return records[: index + 1]
    raise AssertionError("no END_OF_PUSH in the topic")


def read_until(
    bootstrap: str, topic: str, partition: int, end: int, timeout: float = 30, start: int = 0
) -> list[tuple[bytes, bytes]]:
    """The records of a partition from offset `start` to below `end`, as (key, value), read in batches (a topic
    still written to has no end to wait for)."""
    records: list[tuple[bytes, bytes]] = []
    if end <= start:
        return records
    consumer = Consumer(client_config(bootstrap, **{"group.id": "test-read", "enable.auto.commit": False}))
    consumer.assign([TopicPartition(topic, partition, start)])
    deadline = time.monotonic() + timeout
    try:
        while len(records) < end - start:
            assert time.monotonic() < deadline, f"{topic}[{partition}] has not {end} records within {timeout:.0f}s"
            for message in consumer.consume(5000, timeout=1):
                assert not message.error(), message.error().str()
                if message.offset() < end:
                    records.append((message.key(), message.value()))
        return records
    finally:
        consumer.close()
