"""The push and repush confs that bound a ZSTD_WITH_DICT version's dictionary, with Venice's names: how many bytes of
values are sampled to train it (`compression.dictionary.sample.size`) and how large it may be
(`compression.dictionary.size.limit`). Checked with every conf before anything starts (`rollout.push_confs`), read by
the rollout's `compression_dictionary` step (`rollout.compression_dictionary`).

The defaults are this machine's, not Venice's (200 MB of samples, a dictionary up to 950 KB): the sample is read and
the dictionary trained in the step's own process (an Airflow task, or `venice push --local`) on two shared cores, and
the dictionary travels as that step's XCom, in every partition's START_OF_PUSH and to every reader. 4 MB is about
100 times the dictionary, zstd's rule of thumb for a sample (more trains longer for the same dictionary: the push
benchmark's 84-byte values train in 0.15 s per MB); a 32 KB dictionary compresses those values within a few percent
of zstd's own default size, 110 KB (bench/README.md has the figures)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from venice_core.errors import ConfigError

SAMPLE_SIZE = "compression.dictionary.sample.size"
SIZE_LIMIT = "compression.dictionary.size.limit"
DICTIONARY_CONFS = frozenset({SAMPLE_SIZE, SIZE_LIMIT})

DEFAULT_SAMPLE_BYTES = 4 * 1024 * 1024
DEFAULT_DICTIONARY_BYTES = 32 * 1024
MAX_SAMPLE_BYTES = 1024 * 1024 * 1024  # held in memory, and zstd's trainer takes less than 4 GB of samples
MIN_DICTIONARY_BYTES = 256  # zstd trains no smaller dictionary
MAX_DICTIONARY_BYTES = 512 * 1024  # base64 in every partition's START_OF_PUSH: within a Kafka message's 1 MB


@dataclass(frozen=True)
class DictionaryBounds:
    sample_bytes: int  # values are sampled until their bytes (as stored, uncompressed) reach this
    dictionary_bytes: int  # the trained dictionary's largest size


def parse(confs: Mapping[str, str]) -> DictionaryBounds:
    """The bounds a push's or repush's confs set (the defaults where unset); ConfigError naming the conf for a value
    that is not a whole number of bytes within its range."""
    return DictionaryBounds(
        _bytes(confs, SAMPLE_SIZE, DEFAULT_SAMPLE_BYTES, 1, MAX_SAMPLE_BYTES),
        _bytes(confs, SIZE_LIMIT, DEFAULT_DICTIONARY_BYTES, MIN_DICTIONARY_BYTES, MAX_DICTIONARY_BYTES),
    )


def _bytes(confs: Mapping[str, str], key: str, default: int, least: int, most: int) -> int:
    if key not in confs:
        return default
    text = str(confs[key]).strip()
    try:
        value = int(text)
    except ValueError:
        raise ConfigError(f"{key} must be a whole number of bytes, got {confs[key]!r}") from None
    if not least <= value <= most:
        raise ConfigError(f"{key} must be between {least} and {most} bytes, got {value}")
    return value
