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


def compressor(strategy: CompressionStrategy, dictionary: bytes | None = None) -> Callable[[bytes], bytes]:
    """`dictionary`: a ZSTD version's compression dictionary (START_OF_PUSH's `compression_dictionary`), if any."""
    if strategy is CompressionStrategy.GZIP:
        return lambda data: gzip.compress(data, compresslevel=6, mtime=0)
    if strategy is CompressionStrategy.ZSTD:
        shared = zstandard.ZstdCompressionDict(dictionary) if dictionary else None
        return zstandard.ZstdCompressor(level=3, dict_data=shared).compress
    return bytes


def decompressor(strategy: CompressionStrategy, dictionary: bytes | None = None) -> Callable[[bytes], bytes]:
    if strategy is CompressionStrategy.GZIP:
        return gzip.decompress
    if strategy is CompressionStrategy.ZSTD:
        shared = zstandard.ZstdCompressionDict(dictionary) if dictionary else None
        return zstandard.ZstdDecompressor(dict_data=shared).decompress
    return bytes
