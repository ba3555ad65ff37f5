"""Value compression strategies of START_OF_PUSH (ids as in Venice), and the ZSTD dictionary a ZSTD_WITH_DICT
version's values are compressed with (trained from a sample of them, carried in its START_OF_PUSH).

A reader that can decompress ZSTD_WITH_DICT itself says so in `SUPPORTED_HEADER`; a region server then answers
its reads of such a version still compressed, naming the strategy in `HEADER` (Venice's headers, with the
strategy's id)."""

from __future__ import annotations

import gzip
import threading
from collections.abc import Callable, Sequence
from enum import IntEnum

import zstandard

SUPPORTED_HEADER = "X-Venice-Supported-Compression-Strategy"
HEADER = "X-Venice-Compression-Strategy"


class CompressionStrategy(IntEnum):
    NO_OP = 0
    GZIP = 1
    ZSTD = 2
    ZSTD_WITH_DICT = 3

    @classmethod
    def parse(cls, name: str) -> CompressionStrategy:
        try:
            return cls[name.upper()]
        except KeyError:
            raise ValueError(
                f"unknown compression strategy {name!r} (one of {', '.join(c.name for c in cls)})"
            ) from None

    @property
    def needs_dictionary(self) -> bool:
        """Its values are compressed with the version's dictionary (START_OF_PUSH's `compression_dictionary`)."""
        return self is CompressionStrategy.ZSTD_WITH_DICT


def compressor(strategy: CompressionStrategy, dictionary: bytes | None = None) -> Callable[[bytes], bytes]:
    """`dictionary`: a ZSTD_WITH_DICT version's (required for it, ignored otherwise). The callable may be shared by
    threads (each has its own ZSTD context: one must never be used by two threads at once)."""
    if strategy is CompressionStrategy.GZIP:
        return lambda data: gzip.compress(data, compresslevel=6, mtime=0)
    if strategy in (CompressionStrategy.ZSTD, CompressionStrategy.ZSTD_WITH_DICT):
        shared = _dictionary(strategy, dictionary)
        return _per_thread(lambda: zstandard.ZstdCompressor(level=3, dict_data=shared).compress)
    return bytes


def decompressor(strategy: CompressionStrategy, dictionary: bytes | None = None) -> Callable[[bytes], bytes]:
    """As `compressor`: a ZSTD_WITH_DICT version's needs its dictionary."""
    if strategy is CompressionStrategy.GZIP:
        return gzip.decompress
    if strategy in (CompressionStrategy.ZSTD, CompressionStrategy.ZSTD_WITH_DICT):
        shared = _dictionary(strategy, dictionary)
        return _per_thread(lambda: zstandard.ZstdDecompressor(dict_data=shared).decompress)
    return bytes


def _dictionary(strategy: CompressionStrategy, dictionary: bytes | None) -> zstandard.ZstdCompressionDict | None:
    if not strategy.needs_dictionary:
        return None
    if not dictionary:
        raise ValueError("ZSTD_WITH_DICT values need the version's compression dictionary")
    return zstandard.ZstdCompressionDict(dictionary)


def _per_thread(make: Callable[[], Callable[[bytes], bytes]]) -> Callable[[bytes], bytes]:
    """`make()`'s callable, one per thread: python-zstandard's contexts release the GIL and are not thread-safe."""
    local = threading.local()

    def call(data: bytes) -> bytes:
        try:
            own: Callable[[bytes], bytes] = local.own
        except AttributeError:
            own = local.own = make()
        return own(data)

    return call


def train_dictionary(samples: Sequence[bytes], size_limit: int) -> bytes:
    """A ZSTD dictionary of at most `size_limit` bytes trained from `samples` (zstd's trainer). Samples too few or
    too small to train on (zstd refuses them) make a raw-content dictionary instead: their last `size_limit` bytes,
    which zstd uses as history every value can refer to. ValueError without a sample."""
    if not samples:
        raise ValueError("a dictionary needs at least one sample")
    try:
        return zstandard.train_dictionary(size_limit, list(samples)).as_bytes()
    except zstandard.ZstdError:
        return b"".join(samples)[-size_limit:]
