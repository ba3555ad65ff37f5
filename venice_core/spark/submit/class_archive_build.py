"""Build the Spark class archive (`spark.submit.class_archive`): `python -m
venice_core.spark.submit.class_archive_build`, run by `make install` and `make test` (a no-op once built for this Java
and pyspark). It spark-submits this file with the platform's own Spark settings (`spark.submit`) over a small job that
uses what the platform's jobs use: files, shuffles, Python workers, Arrow, a streaming query; the JVM dumps the classes
it loaded at exit."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from venice_core.host.cache import filling, staging
from venice_core.spark.submit import DEFAULT_SPARK_CONFS, DRIVER_JAVA_OPTIONS, SparkJobSpec
from venice_core.spark.submit.class_archive import archive_path, usable_archive

BUILD_TIMEOUT_SECONDS = 600


def _count(batch: Any, _batch_id: int) -> None:
    """A micro-batch's action, so the streaming classes load too."""
    batch.count()


def build(force: bool = False) -> Path:
    """The archive, built unless a whole one is there (or `force`). Builds at once take turns (`cache.filling`):
    the second finds the first's archive."""
    path = archive_path()
    if path is None:
        raise SystemExit("error: no `java` found (set JAVA_HOME or put java on PATH)")
    if usable_archive() and not force:
        return path
    with filling(path):
        if usable_archive() and not force:
            return path
        _build(path)
    return path


def _build(path: Path) -> None:
    partial = staging(path)
    partial.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="venice-spark-archive-") as scratch:
        spec = SparkJobSpec(
            name="venice-spark-archive",
            master="local[2]",
            conf={
                **DEFAULT_SPARK_CONFS,
                "spark.driver.extraJavaOptions": f"{DRIVER_JAVA_OPTIONS} -XX:ArchiveClassesAtExit={partial}",
            },
            args=["--train", scratch],
            application=__file__,
        )
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
        try:
            result = subprocess.run(spec.argv(), env=env, capture_output=True, text=True, timeout=BUILD_TIMEOUT_SECONDS)
        except FileNotFoundError:
            raise SystemExit("error: spark-submit is not installed in this environment: run `make install`") from None
    if result.returncode != 0 or not partial.exists():
        partial.unlink(missing_ok=True)
        tail = "\n".join(result.stderr.splitlines()[-15:])
        raise SystemExit(f"error: the Spark class archive could not be built:\n{tail}")
    path.with_suffix(".json").write_text(json.dumps({"size": partial.stat().st_size}))
    os.replace(partial, path)


def train(scratch: Path) -> None:
    """The workload whose classes go into the archive (run under spark-submit)."""
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    spark = SparkSession.builder.appName("venice-spark-archive").getOrCreate()
    rows = spark.range(2000).select(F.col("id"), F.concat(F.lit("user-"), F.col("id")).alias("key"))
    rows.write.parquet(str(scratch / "parquet"))
    rows.write.json(str(scratch / "json"))
    frame = spark.read.parquet(str(scratch / "parquet")).unionByName(spark.read.json(str(scratch / "json")))
    frame = frame.repartition(4, "key").sortWithinPartitions("key")
    frame.rdd.mapPartitions(lambda part: [sum(1 for _ in part)]).collect()
    frame.mapInArrow(lambda batches: batches, frame.schema).groupBy("key").count().collect()
    stream = spark.readStream.schema(frame.schema).json(str(scratch / "json"))
    query = (
        stream.writeStream.foreachBatch(_count)
        .option("checkpointLocation", str(scratch / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    spark.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Build the Spark class archive every spark-submit then starts from.")
    parser.add_argument("--force", action="store_true", help="build it again even if one is there")
    parser.add_argument("--train", type=Path, help=argparse.SUPPRESS)  # the job spark-submit runs
    args = parser.parse_args(argv)
    if args.train:
        train(args.train)
        return
    print(f"spark class archive: {build(args.force)}")


if __name__ == "__main__":
    main()
