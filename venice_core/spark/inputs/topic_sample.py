"""A bounded, spread-out sample of a version topic's values, decompressed with the version's own compression (and
dictionary): what a ZSTD_WITH_DICT repush trains its new version's dictionary on before the version exists, as
Venice's KafkaInputDictTrainer does. Every partition gets an equal share of the byte budget, taken from
`SPANS_PER_PARTITION` places spread over it (from its first offset to the end offset the repush reads to), each a run
of consecutive messages. Only whole values are sampled: control messages, deletes, chunks and manifests are passed
over (a chunked value would have to be assembled first; Venice passes them over too)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from venice_core.errors import ComponentError
from venice_core.spark.tasks.repush_tasks import PUT, decode_message

SPANS_PER_PARTITION = 4
STALL_SECONDS = 30.0  # a span with nothing arriving for this long: its messages are gone (retention)


def sample_values(
    bootstrap: str,
    topic: str,
    end_offsets: Sequence[int],
    decompress: Callable[[bytes], bytes],
    budget: int,
) -> list[bytes]:
    """Up to `budget` bytes of the topic's values (decompressed), read up to each partition's end offset
    (`end_offsets[p]`). Empty for a topic without values."""
    from confluent_kafka import Consumer, TopicPartition

    from venice_core.pubsub import CONSUMER_CONFIG, client_config

    # A span is a few fetches: each answered at once, not after the readers' 256 KB or 100 ms.
    settings = {**CONSUMER_CONFIG, "group.id": "venice-dictionary-sample", "fetch.min.bytes": 1}
    consumer = Consumer(client_config(bootstrap, **settings))
    sample: list[bytes] = []
    share = max(1, budget // max(1, len(end_offsets)) // SPANS_PER_PARTITION)
    try:
        for partition, end in enumerate(end_offsets):
            low, _ = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
            starts = sorted({low + (end - low) * i // SPANS_PER_PARTITION for i in range(SPANS_PER_PARTITION)})
            for start, stop in zip(starts, [*starts[1:], end], strict=True):
                if start < stop:
                    sample += _span(consumer, topic, partition, start, stop, decompress, share)
    finally:
        consumer.close()
    return sample


def _span(
    consumer: Any,
    topic: str,
    partition: int,
    start: int,
    stop: int,
    decompress: Callable[[bytes], bytes],
    share: int,
) -> list[bytes]:
    """The whole values of offsets [start, stop) of a partition, from `start` on, until `share` bytes of them."""
    from confluent_kafka import TopicPartition

    consumer.assign([TopicPartition(topic, partition, start)])
    values: list[bytes] = []
    taken, position, heard = 0, start, time.monotonic()
    while position < stop and taken < share:
        messages = consumer.consume(num_messages=min(1000, stop - position), timeout=0.5)
        if not messages:
            if time.monotonic() - heard > STALL_SECONDS:
                raise ComponentError(f"cannot read {topic}/{partition} from offset {position}: nothing arrived")
            continue
        heard = time.monotonic()
        for message in messages:
            if message.error() is not None:
                continue
            position = message.offset() + 1
            if message.offset() >= stop:
                break
            decoded = decode_message(message.key(), message.value())
            if decoded is None or decoded[1] != PUT:
                continue
            value = decompress(decoded[4])
            values.append(value)
            taken += len(value)
            if taken >= share:
                break
    return values
