"""The pyspark Python files and the Spark jars are one Spark version (pyspark-client shares their folder)."""

from __future__ import annotations

from importlib.metadata import version
from typing import Any


def test_pyspark_and_pyspark_client_distributions_agree() -> None:
    import pyspark

    assert pyspark.__version__ == version("pyspark")
    assert version("pyspark-client") == version("pyspark")


def test_python_and_jvm_spark_versions_agree(spark: Any) -> None:
    import pyspark

    assert spark.sparkContext.version == pyspark.__version__
