"""A class-data-sharing archive of the Spark driver's classes (the JDK's AppCDS), so every `spark-submit` of the
platform (push, repush, streaming jobs; the tests' SparkSession) maps Spark's pre-parsed classes instead of loading
and verifying ~15,000 of them from jars. Measured on 2 cores: a trivial job's spark-submit fell from ~11 to ~6
CPU-seconds (and its wall time alike), which every push and repush pays before any work.

The archive belongs to one JVM build and one Spark: its name carries both, so another Java or pyspark simply has none
yet. `make install` builds it (`python -m venice_core.jobs.spark_archive`); without one, jobs run as before. A JVM
maps an archive cut short with a crash (SIGBUS), not an error: it is written under a partial name, its size recorded
beside it, renamed into place last, and used only when the size still matches.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ARCHIVE_DIR = Path(sys.prefix) / "share" / "venice"
BUILD_TIMEOUT_SECONDS = 600


def java_binary() -> Path | None:
    """The `java` spark-submit runs: `$JAVA_HOME/bin/java`, else the one on PATH (as Spark's launcher picks it)."""
    home = os.environ.get("JAVA_HOME")
    found = Path(home) / "bin" / "java" if home else shutil.which("java")
    return Path(os.path.realpath(found)) if found and Path(found).exists() else None


def archive_path() -> Path | None:
    """Where this Java's and this pyspark's archive is (None without Java)."""
    java = java_binary()
    if java is None:
        return None
    stat = java.stat()
    jvm = hashlib.sha256(f"{java}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:12]
    return ARCHIVE_DIR / f"spark-{importlib.metadata.version('pyspark')}-jvm-{jvm}.jsa"


def usable_archive() -> Path | None:
    """The archive, if it was built whole for this Java and pyspark."""
    path = archive_path()
    if path is None or not path.exists():
        return None
    try:
        recorded = json.loads(path.with_suffix(".json").read_text())["size"]
    except (OSError, ValueError, KeyError):
        return None
    return path if path.stat().st_size == recorded else None


def java_options(base: str) -> str:
    """`base` JVM options, with the archive when there is one."""
    archive = usable_archive()
    return f"{base} -XX:SharedArchiveFile={archive}" if archive else base


def build(force: bool = False) -> Path:
    """Build the archive by running a small Spark job that uses what the platform's jobs use (files, shuffles,
    Python workers, Arrow, a streaming query), dumping the classes it loaded at exit."""
    path = archive_path()
    if path is None:
        raise SystemExit("error: no `java` found (set JAVA_HOME or put java on PATH)")
    if usable_archive() and not force:
        return path
    spark_submit = shutil.which("spark-submit", path=str(Path(sys.executable).parent))
    if spark_submit is None:
        raise SystemExit("error: spark-submit is not installed in this environment: run `make install`")
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f"{path.name}.partial")
    partial.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="venice-spark-archive-") as scratch:
        argv = [
            spark_submit,
            "--master", "local[2]",
            "--conf", "spark.ui.enabled=false",
            "--conf", "spark.driver.bindAddress=127.0.0.1",
            "--conf", "spark.driver.host=127.0.0.1",
            "--conf", f"spark.pyspark.python={sys.executable}",
            "--conf", f"spark.driver.extraJavaOptions=-XX:TieredStopAtLevel=1 -XX:ArchiveClassesAtExit={partial}",
            __file__, "--train", scratch,
        ]  # fmt: skip
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
        result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=BUILD_TIMEOUT_SECONDS)
    if result.returncode != 0 or not partial.exists():
        partial.unlink(missing_ok=True)
        tail = "\n".join(result.stderr.splitlines()[-15:])
        raise SystemExit(f"error: the Spark class archive could not be built:\n{tail}")
    path.with_suffix(".json").write_text(json.dumps({"size": partial.stat().st_size}))
    os.replace(partial, path)
    return path


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
        stream.writeStream.foreachBatch(lambda batch, _id: batch.count())
        .option("checkpointLocation", str(scratch / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    spark.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--force", action="store_true", help="build it again even if one is there")
    parser.add_argument("--train", type=Path, help=argparse.SUPPRESS)  # the job spark-submit runs
    args = parser.parse_args(argv)
    if args.train:
        train(args.train)
        return
    print(f"spark class archive: {build(args.force)}")


if __name__ == "__main__":
    main()
