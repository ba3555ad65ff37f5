"""Where ingestion checkpoints are kept: the typed topic-partition and the three-call checkpoint store.

As seed 002 settles it, a checkpoint store has exactly three calls, `get`, `set` and `delete`, on a
`PubSubTopicPartition` (a version topic or a view topic: never a real-time topic), and the state is opaque bytes
that the core serialises and evolves (`ingestion_checkpoint.IngestionCheckpoint.encode` / `decode`). One store
holds several topics at once: a new version's state never overwrites the old one's.

A partition's storage keeps its checkpoint beside its data by default, in the same atomic write. A Da Vinci
transformer may answer a store of its own instead (`get_storage_metadata_service`, seed 002): the partition's
storage then reaches it through `KeptElsewhere`, and commits the data first, then the state that covers it, so a
crash between the two replays what the older state covers (rewriting the same values), never skips anything.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

# A version topic, `<prefix><store>_v<N>`, or one of its view topics, `<prefix><store>_v<N>_<view>` (Venice's
# change-capture `_cc` and materialized views `_<name>_mv`). Real-time topics (`_rt`) have no version and no place here.
_VERSIONED_TOPIC = re.compile(r"^(?P<base>.+)_v(?P<version>[0-9]+)(?:_(?P<view>[A-Za-z0-9][A-Za-z0-9_-]*))?$")


@dataclass(frozen=True, order=True)
class PubSubTopicPartition:
    """A version or view topic and one of its partitions, the key of a checkpoint."""

    topic: str
    partition: int

    def __post_init__(self) -> None:
        if not isinstance(self.partition, int) or self.partition < 0:
            raise ValueError(f"partition must be a whole number >= 0, not {self.partition!r}")
        if _VERSIONED_TOPIC.match(self.topic or "") is None:
            raise ValueError(f"{self.topic!r} is not a version topic or a view topic (<store>_v<N>[_<view>])")

    @property
    def version(self) -> int:
        match = _VERSIONED_TOPIC.match(self.topic)
        assert match is not None
        return int(match["version"])

    @property
    def view(self) -> str | None:
        match = _VERSIONED_TOPIC.match(self.topic)
        assert match is not None
        return match["view"]

    def __str__(self) -> str:
        return f"{self.topic}[{self.partition}]"


class CheckpointStore(Protocol):
    """Where ingestion keeps each partition's state, by topic-partition (seed 002's three calls)."""

    def get(self, topic_partition: PubSubTopicPartition) -> bytes | None: ...

    def set(self, topic_partition: PubSubTopicPartition, state: bytes) -> None: ...

    def delete(self, topic_partition: PubSubTopicPartition) -> None: ...


class InMemoryCheckpointStore:
    """The three calls over a dict: for tests, and clients that keep no state across restarts."""

    def __init__(self) -> None:
        self.states: dict[PubSubTopicPartition, bytes] = {}

    def get(self, topic_partition: PubSubTopicPartition) -> bytes | None:
        return self.states.get(topic_partition)

    def set(self, topic_partition: PubSubTopicPartition, state: bytes) -> None:
        self.states[topic_partition] = bytes(state)

    def delete(self, topic_partition: PubSubTopicPartition) -> None:
        self.states.pop(topic_partition, None)


@dataclass(frozen=True)
class KeptElsewhere:
    """One partition's checkpoint in a checkpoint store other than its data's: the three calls bound to its
    topic-partition."""

    store: CheckpointStore
    topic_partition: PubSubTopicPartition

    def get(self) -> bytes | None:
        return self.store.get(self.topic_partition)

    def set(self, state: bytes) -> None:
        self.store.set(self.topic_partition, state)

    def delete(self) -> None:
        self.store.delete(self.topic_partition)
