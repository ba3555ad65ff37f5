"""The push's control messages in the source region's version topic: START_OF_PUSH before the data, END_OF_PUSH
after it. Their producer GUIDs derive from the push job, so sending one again (a re-run step) is skipped by
ingestion as a duplicate."""

from __future__ import annotations

from typing import Any

from venice_core.config import ClusterConfig
from venice_core.errors import PushJobError
from venice_core.protocol.compression import CompressionStrategy
from venice_core.protocol.div import deterministic_guid
from venice_core.protocol.envelope import ControlMessageType
from venice_core.pubsub.writer import VersionTopicWriter


def send_control(
    config: ClusterConfig,
    store: str,
    number: int,
    partitions: int,
    push_job_id: str,
    control_type: ControlMessageType,
    bodies: list[dict[str, Any]],
) -> None:
    source = config.region(config.source_region)
    writer = VersionTopicWriter(
        source.kafka_bootstrap,
        source.version_topic(store, number),
        partitions,
        deterministic_guid(push_job_id, number, control_type.name),
    )
    writer.broadcast(control_type, bodies)
    writer.flush()


def send_start_of_push(
    config: ClusterConfig,
    store: str,
    number: int,
    partitions: int,
    push_job_id: str,
    compression: CompressionStrategy,
    dictionary: bytes | None = None,
) -> None:
    """START_OF_PUSH in every partition: the data comes sorted and chunked, with the store's compression (and a
    ZSTD_WITH_DICT version's dictionary, base64). Its GUID derives from the push job, so sending it again (a re-run
    step) is skipped by ingestion as a duplicate."""
    import base64

    encoded = base64.b64encode(dictionary).decode() if dictionary else None
    sop = {"sorted": True, "chunked": True, "compression": compression.name, "compression_dictionary": encoded}
    send_control(config, store, number, partitions, push_job_id, ControlMessageType.START_OF_PUSH, [sop] * partitions)


def send_end_of_push(
    config: ClusterConfig, store: str, number: int, partitions: int, push_job_id: str, record_counts: dict[str, int]
) -> None:
    """END_OF_PUSH in every partition, with the count the Spark job wrote to it (ingestion checks it)."""
    bodies = [{"record_counts": {str(p): record_counts[str(p)]}} for p in range(partitions)]
    send_control(config, store, number, partitions, push_job_id, ControlMessageType.END_OF_PUSH, bodies)


def read_start_of_push(bootstrap: str, topic: str, partition: int = 0, timeout: float = 10.0) -> dict[str, Any] | None:
    """The START_OF_PUSH of a version topic's partition (its first messages), None if not there within `timeout`."""
    import time

    from confluent_kafka import Consumer, TopicPartition

    from venice_core.protocol.envelope import decode
    from venice_core.pubsub import CONSUMER_CONFIG, client_config

    consumer = Consumer(client_config(bootstrap, **CONSUMER_CONFIG, **{"group.id": "venice-sop-reader"}))
    try:
        consumer.assign([TopicPartition(topic, partition, 0)])
        deadline = time.monotonic() + timeout
        seen = 0
        while time.monotonic() < deadline and seen < 1000:
            for raw in consumer.consume(100, timeout=0.5):
                key, value = raw.key(), raw.value()
                if raw.error() or key is None or value is None:
                    continue
                seen += 1
                message = decode(key, value)
                if message.control_type is ControlMessageType.START_OF_PUSH:
                    return dict(message.control or {})
        return None
    finally:
        consumer.close()


def start_of_push_dictionary(sop: dict[str, Any]) -> bytes | None:
    """The compression dictionary a START_OF_PUSH's body carries (None: none)."""
    import base64

    encoded = sop.get("compression_dictionary")
    return base64.b64decode(encoded) if encoded else None


def read_dictionary(bootstrap: str, topic: str, timeout: float = 10.0) -> bytes | None:
    """The compression dictionary a version topic's START_OF_PUSH carries (None: it carries none, or there is no
    START_OF_PUSH within `timeout`)."""
    sop = read_start_of_push(bootstrap, topic, timeout=timeout)
    return None if sop is None else start_of_push_dictionary(sop)


def version_dictionary(compression: CompressionStrategy, bootstrap: str, topic: str) -> bytes | None:
    """A ZSTD_WITH_DICT version's dictionary, from its topic's START_OF_PUSH (None for another compression), for a
    job that writes or reads its values. PushJobError if that START_OF_PUSH carries none."""
    if not compression.needs_dictionary:
        return None
    dictionary = read_dictionary(bootstrap, topic)
    if dictionary is None:
        raise PushJobError(f"{topic} is ZSTD_WITH_DICT but its START_OF_PUSH carries no compression dictionary")
    return dictionary
