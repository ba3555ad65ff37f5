"""The pyspark Python files and the Spark jars are one Spark version (pyspark-client shares their folder)."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest


def test_pyspark_and_pyspark_client_distributions_agree() -> None:
    import pyspark

    assert pyspark.__version__ == version("pyspark")
    assert version("pyspark-client") == version("pyspark")


def test_python_and_jvm_spark_versions_agree(spark: Any) -> None:
    import pyspark

    assert spark.sparkContext.version == pyspark.__version__


def test_spark_python_workers_import_pyspark_from_the_installed_package(spark: Any) -> None:
    """Spark puts its pyspark zip first on a worker's path; the platform's daemon module (`spark.python_path`) makes its
    workers import the installed, compiled package instead, as this process does."""
    import py4j
    import pyspark

    def where(_rows: Any) -> Any:
        import py4j
        import pyspark

        yield pyspark.__file__, py4j.__file__

    files = spark.sparkContext.parallelize(range(2), 2).mapPartitions(where).collect()
    assert files == [(pyspark.__file__, py4j.__file__)] * 2, files


@pytest.mark.parametrize("script", ["push.py", "repush.py", "stream.py"])
def test_a_spark_submitted_job_imports_pyspark_from_the_installed_package(script: str) -> None:
    """A job's script, started as spark-submit starts it (its folder first on the path, then the zips), imports pyspark
    and py4j from the installed packages (the stream job imports pyspark as its modules load)."""
    import py4j
    import pyspark

    import venice_core.spark

    lib = Path(pyspark.__file__).parent / "python" / "lib"
    zips = sorted(str(p) for p in lib.glob("*.zip"))
    assert len(zips) == 2, zips  # pyspark.zip and py4j's: what spark-submit puts on PYTHONPATH
    path = Path(venice_core.spark.__file__).with_name("jobs") / script
    program = (
        "import runpy, sys; sys.path.insert(0, sys.argv[1]); runpy.run_path(sys.argv[2], run_name='job'); "
        "import pyspark, py4j; print(pyspark.__file__); print(py4j.__file__)"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(zips)}
    result = subprocess.run(
        [sys.executable, "-c", program, str(path.parent), str(path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [pyspark.__file__, py4j.__file__], result.stdout
