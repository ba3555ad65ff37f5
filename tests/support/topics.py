"""An in-memory topic administrator (a `pubsub.admin.TopicAdmin`) for controller tests that need no broker."""

from __future__ import annotations

from venice_core.errors import ComponentError


class InMemoryTopics:
    def __init__(self) -> None:
        self.partitions: dict[tuple[str, str], int] = {}  # (bootstrap, topic) -> partition count

    def create_topic(self, bootstrap: str, topic: str, partitions: int) -> None:
        existing = self.partitions.setdefault((bootstrap, topic), partitions)
        if existing != partitions:  # as Kafka's admin answers
            raise ComponentError(f"topic {topic} exists with {existing} partitions, not {partitions}")

    def delete_topics(self, bootstrap: str, topics: list[str]) -> None:
        for topic in topics:
            self.partitions.pop((bootstrap, topic), None)

    def names(self) -> set[str]:
        return {topic for _bootstrap, topic in self.partitions}
