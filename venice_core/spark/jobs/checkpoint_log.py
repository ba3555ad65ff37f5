"""Spark's streaming checkpoint logs, as the platform reads and rewrites them: `offsets/<batch>` (what a batch
was planned to read: `v1`, the batch's metadata with the event-time watermark it runs with, `batchWatermarkMs`, then
one line per source, ours its offsets as JSON) and `commits/<batch>` (the batch is done: `v1`, then
`nextBatchWatermarkMs`, the watermark the batch's events raised). A restarted query takes its watermark from the
newest planned batch's metadata and, if that batch committed, from its commit, whichever is higher.

Spark writes each file beside a Hadoop checksum (`.<batch>.crc`: CRC32 of every 512 bytes), which it checks when it
reads: a rewrite writes a new one.
"""

from __future__ import annotations

import json
import os
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from venice_core.spark.tasks.kafka_source import data_offsets

OFFSETS, COMMITS = "offsets", "commits"
_CRC_MAGIC = b"crc\x00"
_BYTES_PER_CRC = 512


def batch_ids(checkpoint: Path, log: str) -> list[int]:
    """The batches in Spark's `offsets` (planned) or `commits` (done) log, oldest first."""
    directory = checkpoint / log
    return sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit()) if directory.is_dir() else []


def last_batch(checkpoint: Path, log: str) -> int | None:
    """The newest batch id in Spark's `offsets` (planned) or `commits` (done) log."""
    return max(batch_ids(checkpoint, log), default=None)


@dataclass
class LogEntry:
    """One batch's file of a log: its version line, its metadata, and (offsets log) each source's offsets."""

    version: str
    metadata: dict[str, Any]
    sources: list[dict[str, Any] | None]  # None: a source with no offset yet (Spark's "-")

    @classmethod
    def read(cls, checkpoint: Path, log: str, batch_id: int) -> LogEntry:
        version, metadata, *sources = (checkpoint / log / str(batch_id)).read_text().splitlines()
        return cls(version, json.loads(metadata), [None if s == "-" else json.loads(s) for s in sources])

    def write(self, checkpoint: Path, log: str, batch_id: int) -> None:
        lines = [self.version, json.dumps(self.metadata, separators=(",", ":"))]
        lines += ["-" if s is None else json.dumps(s, separators=(",", ":")) for s in self.sources]
        rewrite(checkpoint / log / str(batch_id), "\n".join(lines).encode())

    @property
    def source(self) -> dict[str, Any]:
        """The offsets of the query's one source (the platform's streaming job reads one topic)."""
        return self.sources[0] or {}


def source_offsets(checkpoint: Path, batch_id: int) -> dict[str, Any]:
    """The source's offsets a batch was planned to read up to, the drain markers' key included."""
    return LogEntry.read(checkpoint, OFFSETS, batch_id).source


def batch_end_offsets(checkpoint: Path, batch_id: int) -> dict[str, int]:
    """The source offsets a batch reads up to, without the drain markers' key."""
    return {str(p): int(o) for p, o in data_offsets(source_offsets(checkpoint, batch_id)).items()}


def hadoop_crc(data: bytes) -> bytes:
    """The checksum file Hadoop's local file system keeps beside `data`."""
    sums = b"".join(
        zlib.crc32(data[i : i + _BYTES_PER_CRC]).to_bytes(4, "big") for i in range(0, len(data), _BYTES_PER_CRC)
    )
    return _CRC_MAGIC + _BYTES_PER_CRC.to_bytes(4, "big") + sums


def rewrite(path: Path, data: bytes) -> None:
    """Replace a log file whole, and its checksum if it has one. The old checksum goes first: a crash in between
    leaves the file unchecked (Hadoop reads a file without one), never checked against the wrong sum."""
    crc = path.with_name(f".{path.name}.crc")
    had_crc = crc.exists()
    crc.unlink(missing_ok=True)
    _replace(path, data)
    if had_crc:
        _replace(crc, hadoop_crc(data))


def _replace(path: Path, data: bytes) -> None:
    staged = path.with_name(f".{path.name}.venice-tmp")  # not a batch's name: Spark's listing skips it
    staged.write_bytes(data)
    os.replace(staged, path)
