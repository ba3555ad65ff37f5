"""The jars a job adds to pyspark's own, named by `spark.jars`: Spark's Avro module (`spark-avro`, for `to_avro`) from
Maven Central, and the platform's own SQL functions (`java/`: the partitioner), compiled with `javac` against
pyspark's jars. Both land in the cache once (`make jars` makes them before anything runs in parallel; a job makes
whichever is missing).

    python -m venice_core.spark.submit.extra_jars     (make them, and print where they are)
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from venice_core.errors import ComponentError
from venice_core.host.cache import cache_dir, filling, staging
from venice_core.host.maven import fetch_jars
from venice_core.host.programs import require_program

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
from venice_core.spark.python_path import spark_home

POM = Path(__file__).with_name("spark-extra-pom.xml")
JAVA_SOURCES = Path(__file__).with_name("java")
# The platform's SQL functions: (name in SQL, Java class). `register_functions` registers them on a session.
FUNCTIONS = {"venice_partition": "dev.venice.spark.Md5Partition"}


def functions_jar() -> Path:
    """The platform's SQL functions as a jar, compiled on first use for these sources and this pyspark."""
    sources = sorted(JAVA_SOURCES.rglob("*.java"))
    pyspark_jars = spark_home() / "jars"
    digest = hashlib.sha256()
    for source in sources:
        digest.update(source.read_bytes())
    digest.update(str(pyspark_jars).encode())
    jar = cache_dir() / f"venice-spark-functions-{digest.hexdigest()[:12]}.jar"
    if jar.exists():
        return jar
    javac = require_program("javac", "a Java 17 JDK (Debian: apt-get install openjdk-17-jdk-headless)")
    with filling(jar):
        if jar.exists():
            return jar
        partial = staging(jar)
        with tempfile.TemporaryDirectory(prefix="venice-javac-") as classes:
            classpath = f"{pyspark_jars}/*"
            argv = [javac, "--release", "17", "-nowarn", "-cp", classpath, "-d", classes, *map(str, sources)]
            compiled = subprocess.run(argv, capture_output=True, text=True)
            if compiled.returncode != 0:
                raise ComponentError(f"javac could not compile the platform's Spark functions:\n{compiled.stderr}")
            archive = shutil.make_archive(str(partial), "zip", classes)  # a jar is a zip of the classes
            Path(archive).replace(jar)
    return jar


def extra_jars() -> list[Path]:
    """The jars, made first if the cache has none."""
    return [*sorted(fetch_jars(POM, transitive=False).glob("*.jar")), functions_jar()]


def jar_confs() -> dict[str, str]:
    """`spark.jars` naming them."""
    return {"spark.jars": ",".join(str(jar) for jar in extra_jars())}


def register_functions(spark: SparkSession) -> None:
    """The platform's SQL functions on `spark` (a SparkSession whose `spark.jars` holds `functions_jar`)."""
    from pyspark.sql.types import IntegerType

    for name, java_class in FUNCTIONS.items():
        spark.udf.registerJavaFunction(name, java_class, IntegerType())


if __name__ == "__main__":
    print(f"spark jars: {', '.join(str(jar) for jar in extra_jars())}")
