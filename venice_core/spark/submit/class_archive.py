"""A class-data-sharing archive of the Spark driver's classes (the JDK's AppCDS), so every `spark-submit` of the
platform (push, repush, streaming jobs; the tests' SparkSession) maps Spark's pre-parsed classes instead of loading
and verifying ~15,000 of them from jars. Measured on 2 cores: a trivial job's spark-submit fell from ~11 to ~6
CPU-seconds (and its wall time alike), which every push and repush pays before any work.

The archive belongs to one JVM build and one Spark: its name carries both, so another Java or pyspark simply has none
yet. `make install` builds it (`spark.submit.class_archive_build`); without one, jobs run as before. A JVM maps an
archive cut short with a crash (SIGBUS), not an error: it is written under a partial name, its size recorded beside it,
renamed into place last, and used only when the size still matches.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import shutil
import sys
from pathlib import Path

ARCHIVE_DIR = Path(sys.prefix) / "share" / "venice"


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
