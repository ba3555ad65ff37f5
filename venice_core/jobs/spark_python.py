"""Spark's Python processes import pyspark from its installed, compiled package, not from the zips Spark puts first
on their path.

`spark-submit` (for the driver) and Spark's Python worker factory (for the daemon and its workers) put
`<SPARK_HOME>/python/lib/pyspark.zip` and py4j's zip first on PYTHONPATH. With pyspark installed by pip, SPARK_HOME is
the installed package and the zips hold the same code as it. But Python compiles every module it imports from a zip
from source, in every process (zipimport keeps no bytecode): importing `pyspark.worker` costs a worker 0.8 s of CPU
from the zip against 0.15 s from the package, and the daemon imports it again in every worker it forks. Only zips of
the installed package itself are dropped: a cluster's own SPARK_HOME keeps its zips.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Spark's Python daemon (`spark.python.daemon.module`): pyspark's own, started from this package's module.
DAEMON_MODULE = "venice_core.jobs.spark_daemon"
DAEMON_CONFS = {"spark.python.daemon.module": DAEMON_MODULE}


def _installed_version(package_dir: Path) -> str | None:
    """`__version__` as the package's version.py assigns it, read without importing the package."""
    try:
        text = (package_dir / "version.py").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        name, sep, value = line.partition("=")
        if sep and name.strip() == "__version__":
            return value.strip().strip("'\"")
    return None


def duplicate_zips(path: list[str]) -> list[str]:
    """The entries of `path` that are zips of a pip-installed pyspark whose site directory is on `path` too: its
    `python/lib/pyspark.zip`, and its py4j zip when the installed py4j has the zip's version."""
    on_path = {str(Path(entry).resolve()) for entry in path if entry}
    duplicates = []
    for entry in path:
        zip_file = Path(entry)
        if zip_file.suffix != ".zip" or zip_file.parent.name != "lib" or zip_file.parent.parent.name != "python":
            continue
        package = zip_file.parent.parent.parent
        site = package.parent
        if package.name != "pyspark" or not (package / "__init__.py").is_file() or str(site.resolve()) not in on_path:
            continue
        py4j_version = zip_file.name.removeprefix("py4j-").removesuffix("-src.zip")
        if zip_file.name == "pyspark.zip" or (
            zip_file.name.startswith("py4j-") and _installed_version(site / "py4j") == py4j_version
        ):
            duplicates.append(entry)
    return duplicates


def prefer_installed_pyspark() -> None:
    """Drop `duplicate_zips` from `sys.path`. Called before pyspark is first imported; after, it changes nothing
    (one process never mixes modules of both copies)."""
    if "pyspark" in sys.modules or "py4j" in sys.modules:
        return
    for entry in duplicate_zips(sys.path):
        sys.path.remove(entry)
