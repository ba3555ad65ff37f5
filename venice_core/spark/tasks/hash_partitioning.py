"""Spark's hash partitioning, computed on the driver: which Spark partition `repartition(n, column)` sends an int to.

`repartition(n, col)` places a row in partition `pmod(hash(col), n)`, where `hash` is Murmur3 (x86, 32-bit) with
seed 42 (Spark's `HashPartitioning`). Hashing the Kafka partition numbers 0..n-1 themselves collides: for n = 4,
partitions 0, 1 and 3 all land in Spark partition 3, so one task writes three Kafka partitions while two tasks
idle. `spread_values(n)` gives, for each Kafka partition p, an int that hashes to Spark partition p.
"""

from __future__ import annotations

SEED = 42
_MASK = 0xFFFFFFFF


def _rotl(value: int, bits: int) -> int:
    return ((value << bits) | (value >> (32 - bits))) & _MASK


def hash_int(value: int, seed: int = SEED) -> int:
    """Spark's `hash(cast(value as int))`: Murmur3_x86_32.hashInt, as a signed 32-bit int."""
    k1 = _rotl((value & _MASK) * 0xCC9E2D51 & _MASK, 15) * 0x1B873593 & _MASK
    h1 = (_rotl(seed ^ k1, 13) * 5 + 0xE6546B64) & _MASK
    h1 ^= 4  # the input's length in bytes
    h1 = (h1 ^ (h1 >> 16)) * 0x85EBCA6B & _MASK
    h1 = (h1 ^ (h1 >> 13)) * 0xC2B2AE35 & _MASK
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 >= 1 << 31 else h1


def spark_partition(value: int, partitions: int) -> int:
    """The Spark partition `repartition(partitions, column)` gives a row whose column holds `value` (an int)."""
    return hash_int(value) % partitions  # Python's % is Spark's pmod for a positive divisor


def spread_values(partitions: int) -> list[int]:
    """For each p in 0..partitions-1, the smallest non-negative int that `repartition` sends to Spark partition p."""
    found: dict[int, int] = {}
    candidate = 0
    while len(found) < partitions:
        found.setdefault(spark_partition(candidate, partitions), candidate)
        candidate += 1
    return [found[p] for p in range(partitions)]
