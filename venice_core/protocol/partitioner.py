"""Venice's default partitioner: the MD5 digest of the serialised key, as a big-endian unsigned integer, modulo
the partition count. The Spark job, the writer and every client call this one function."""

from __future__ import annotations

import hashlib


def partition_for(serialized_key: bytes, partition_count: int) -> int:
    return int.from_bytes(hashlib.md5(serialized_key).digest(), "big") % partition_count
