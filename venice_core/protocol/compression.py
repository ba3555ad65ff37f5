"""Value compression strategies of START_OF_PUSH (ids as in Venice)."""

from __future__ import annotations

import gzip
from collections.abc import Callable
from enum import IntEnum

import zstandard


class CompressionStrategy(IntEnum):
    NO_OP = 0
    GZIP = 1
    ZSTD = 2

    @classmethod
    def parse(cls, name: str) -> CompressionStrategy:
        try:
            return cls[name.upper()]
        except KeyError:
            raise ValueError(
                f"unknown compression strategy {name!r} (one of {', '.join(c.name for c in cls)})"
            ) from None


def compressor(strategy: CompressionStrategy) -> Callable[[bytes], bytes]:
    if strategy is CompressionStrategy.GZIP:
        return lambda data: gzip.compress(data, compresslevel=6, mtime=0)
    if strategy is CompressionStrategy.ZSTD:
        return zstandard.ZstdCompressor(level=3).compress
    return bytes


def decompressor(strategy: CompressionStrategy) -> Callable[[bytes], bytes]:
    if strategy is CompressionStrategy.GZIP:
        return gzip.decompress
    if strategy is CompressionStrategy.ZSTD:
        return zstandard.ZstdDecompressor().decompress
    return bytes
