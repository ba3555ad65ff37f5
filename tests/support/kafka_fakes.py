"""Stand-ins for confluent-kafka's consumer and its messages, for ingestion without a broker (unit tests and
`bench/ingest_hot_path.py`)."""

from __future__ import annotations


class FakeMessage:
    """What ingestion reads of a confluent-kafka Message (`ingestion.messages.ConsumedMessage`): a record at
    `offset` of partition 0 of a topic the batch phase never asks the name of."""

    __slots__ = ("_key", "_value", "_offset")

    def __init__(self, key: bytes, value: bytes, offset: int) -> None:
        self._key, self._value, self._offset = key, value, offset

    def error(self) -> None:
        return None

    def key(self) -> bytes:
        return self._key

    def value(self) -> bytes:
        return self._value

    def topic(self) -> str:
        return "fake"

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return self._offset

    def timestamp(self) -> tuple[int, int]:
        return 1, 0  # (create time, ms)


class FakeConsumer:
    """Hands out the messages in order, as many at a time as asked; its partition ends after the last."""

    def __init__(self, messages: list[FakeMessage]) -> None:
        self.messages = messages
        self.at = 0

    def consume(self, num_messages: int, timeout: float) -> list[FakeMessage]:
        batch = self.messages[self.at : self.at + num_messages]
        self.at += len(batch)
        return batch

    def get_watermark_offsets(self, *_args: object, **_kwargs: object) -> tuple[int, int]:
        return 0, len(self.messages)
