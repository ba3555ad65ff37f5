"""Values larger than the Kafka message limit are split into chunks plus a manifest, and reassembled on ingest.

A chunk is a PUT with schema id CHUNK_SCHEMA_ID under the key `<key><chunk suffix>`; the manifest is a PUT under
the user key with schema id MANIFEST_SCHEMA_ID whose value lists the chunk keys and the real value-schema id.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from dataclasses import dataclass

CHUNK_SUFFIX = struct.Struct(">4sI")  # b"\xffCK\xff" marker + chunk index
CHUNK_MARKER = b"\xffCK\xff"
# Kafka's default message limit is 1 MiB; leave room for the key and the envelope.
DEFAULT_MAX_CHUNK_BYTES = 900 * 1024


@dataclass(frozen=True)
class Manifest:
    schema_id: int
    chunk_keys: list[bytes]
    total_size: int

    def encode(self) -> bytes:
        return json.dumps(
            {"schema_id": self.schema_id, "chunks": [k.hex() for k in self.chunk_keys], "size": self.total_size}
        ).encode()

    @classmethod
    def decode(cls, data: bytes) -> Manifest:
        body = json.loads(data)
        return cls(body["schema_id"], [bytes.fromhex(k) for k in body["chunks"]], body["size"])


def chunk_key(key: bytes, index: int) -> bytes:
    return key + CHUNK_SUFFIX.pack(CHUNK_MARKER, index)


def split(key: bytes, value: bytes, schema_id: int, max_chunk_bytes: int) -> Iterator[tuple[bytes, bytes]]:
    """Yield (chunk key, chunk) pairs and finally (key, manifest). Only for values above max_chunk_bytes."""
    keys = []
    for index, start in enumerate(range(0, len(value), max_chunk_bytes)):
        keys.append(chunk_key(key, index))
        yield keys[-1], value[start : start + max_chunk_bytes]
    yield key, Manifest(schema_id, keys, len(value)).encode()
