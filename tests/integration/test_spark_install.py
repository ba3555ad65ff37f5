"""The pyspark Python files and the Spark jars are one Spark version (pyspark-client shares their folder)."""

from __future__ import annotations

from importlib.metadata import version

import pytest


def test_pyspark_and_pyspark_client_distributions_agree() -> None:
    import pyspark

    assert pyspark.__version__ == version("pyspark")
    assert version("pyspark-client") == version("pyspark")


@pytest.mark.slow
def test_python_and_jvm_spark_versions_agree() -> None:
    import pyspark
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.master("local[1]").appName("version-check").getOrCreate()
    try:
        assert spark.sparkContext.version == pyspark.__version__
    finally:
        spark.stop()
