"""Spark's hash partitioning on the driver (`spark.tasks.hash_partitioning`), against values Spark's own `hash()`
gave."""

from __future__ import annotations

from venice_core.spark.tasks.hash_partitioning import hash_int, spark_partition, spread_values

# spark.sql("select hash(cast(id as int)) from range(0, 12)"), and hash() of -7 and 2^31 - 1, on pyspark 4.2.
SPARK_HASHES = [
    933211791,
    -559580957,
    1765031574,
    -1823081949,
    -397064898,
    1023896466,
    -331964951,
    1079293707,
    -132918897,
    -1731921111,
    -1401210078,
    944065163,
]


def test_hash_int_is_sparks_murmur3() -> None:
    assert [hash_int(i) for i in range(12)] == SPARK_HASHES
    assert hash_int(-7) == -1618159745 and hash_int(2**31 - 1) == 133916647


def test_each_kafka_partition_gets_a_spark_partition_of_its_own() -> None:
    assert [spark_partition(p, 4) for p in range(4)] == [3, 3, 2, 3]  # why: the partition numbers collide
    for partitions in (1, 2, 3, 4, 8, 16, 100):
        values = spread_values(partitions)
        assert [spark_partition(v, partitions) for v in values] == list(range(partitions))
