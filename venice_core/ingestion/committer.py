"""The open batch of a partition's writes, and when it is committed: both ingestion phases write through a
`Committer`, each with its own policy and checkpoint.

A commit writes the batch together with the checkpoint that covers it (`storage.api.PartitionStore.commit`, one
atomic write), so a task killed at any point resumes from its checkpoint with exactly the data it covers.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Generic

from venice_core.protocol.div import DataIntegrityError
from venice_core.storage.api import Batch, PartitionStore
from venice_core.storage.ingestion_checkpoint import IngestionCheckpoint


class MissingChunk(DataIntegrityError):
    """A chunk of a large value that is neither staged in the open batch nor stored."""

    def __init__(self, chunk_key: bytes) -> None:
        super().__init__(f"chunk {chunk_key.hex()} of a large value is missing")
        self.chunk_key = chunk_key


class Committer(Generic[Batch]):
    """A partition's open batch, committed once `every_messages` messages are in it or `every_seconds` have passed
    since the last commit, whichever comes first (`due`)."""

    def __init__(self, storage: PartitionStore[Batch], every_messages: int, every_seconds: float) -> None:
        self.storage = storage
        self.every_messages = every_messages
        self.every_seconds = every_seconds
        self.batch = storage.new_batch()
        self.uncommitted = 0  # messages taken since the last commit: the loops count them in as they take them
        self.last_commit = time.monotonic()
        self._chunks: dict[bytes, bytes] = {}  # chunks staged in the open batch (the store has the committed ones)

    def due(self, now: float, at_once: bool = False) -> bool:
        """Whether to commit now: something is uncommitted, and `at_once`, or enough messages, or long enough."""
        uncommitted = self.uncommitted
        return bool(uncommitted) and (
            at_once or uncommitted >= self.every_messages or now - self.last_commit >= self.every_seconds
        )

    def commit(self, checkpoint: IngestionCheckpoint) -> None:
        """The batch and the checkpoint that covers it, atomically; then a new batch."""
        self.storage.commit(self.batch, checkpoint)
        self.batch = self.storage.new_batch()
        self._chunks.clear()
        self.uncommitted = 0
        self.last_commit = time.monotonic()

    # chunks of large values, staged until their manifest comes
    def stage_chunk(self, staged_key: bytes, value: bytes) -> None:
        self._chunks[staged_key] = value
        self.storage.stage_chunk(self.batch, staged_key, value)

    def take_chunks(self, chunk_keys: Iterable[bytes], prefix: bytes = b"") -> bytes:
        """A large value joined from its chunks, each staged as `prefix` + its key and dropped from staging as it is
        taken; MissingChunk at the first one missing."""
        parts = []
        for chunk_key in chunk_keys:
            staged_key = prefix + chunk_key
            part = self._chunks.get(staged_key) or self.storage.get_chunk(staged_key)
            if part is None:
                raise MissingChunk(chunk_key)
            parts.append(part)
            self.storage.drop_chunk(self.batch, staged_key)
        return b"".join(parts)
