"""A job's driver and Spark's Python workers import pyspark from its installed, compiled package, not from the zips
Spark puts first on their path.

`spark-submit` (for the driver) and Spark's Python worker factory (for the daemon and the workers it forks) put
`<SPARK_HOME>/python/lib/pyspark.zip` and py4j's zip first on PYTHONPATH. With pyspark installed by pip, SPARK_HOME is
the installed package and the zips hold the same code as it. But Python compiles every module it imports from a zip
from source, in every process (zipimport keeps no bytecode): importing `pyspark.worker` costs a worker 0.8 s of CPU
from the zip against 0.15 s from the package, and the daemon imports it again in every worker it forks. Only zips of
the installed package itself are dropped: a cluster's own SPARK_HOME keeps its zips. The processes Spark starts
without the configured daemon (a Python data source's planner, a streaming source's runner) still import from the
zip: `spark.submit.worker_bytecode` puts bytecode in the zips for them.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import sys
from pathlib import Path

from venice_core.errors import MissingDependency

# Spark's Python daemon (`spark.python.daemon.module`): pyspark's own, started from this package's module.
DAEMON_MODULE = "venice_core.spark.worker_daemon"
DAEMON_CONFS = {"spark.python.daemon.module": DAEMON_MODULE}


def spark_home() -> Path:
    """The installed pyspark package, which is a whole Spark (jars, `bin/spark-class`); found, not imported."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise MissingDependency("pyspark is not installed: Spark runs the one it ships")
    return Path(spec.origin).parent


def _installed_version(site: Path, distribution: str) -> str | None:
    """The version of `distribution` installed in the site directory `site`, from its metadata (no import)."""
    found = importlib.metadata.distributions(name=distribution, path=[str(site)])
    return next((d.version for d in found), None)


def duplicate_zips(path: list[str]) -> list[str]:
    """The entries of `path` that are zips of a pip-installed pyspark whose site directory is on `path` too: its
    `python/lib/pyspark.zip`, and its py4j zip when the installed py4j has the zip's version."""
    zips = [(entry, Path(entry)) for entry in path if entry.endswith(".zip")]
    candidates = [(entry, z) for entry, z in zips if z.parent.name == "lib" and z.parent.parent.name == "python"]
    if not candidates:  # most processes (the CLI, Airflow's): nothing to resolve
        return []
    on_path = {str(Path(entry).resolve()) for entry in path if entry}
    duplicates = []
    for entry, zip_file in candidates:
        package = zip_file.parent.parent.parent
        site = package.parent
        if package.name != "pyspark" or not (package / "__init__.py").is_file() or str(site.resolve()) not in on_path:
            continue
        if zip_file.name == "pyspark.zip" or (
            zip_file.name.startswith("py4j-")
            and _installed_version(site, "py4j") == zip_file.name.removeprefix("py4j-").removesuffix("-src.zip")
        ):
            duplicates.append(entry)
    return duplicates


def prefer_installed_pyspark() -> None:
    """Drop `duplicate_zips` from `sys.path`. Called before pyspark is first imported; after, it changes nothing
    (one process never mixes modules of both copies)."""
    if "pyspark" in sys.modules or "py4j" in sys.modules:
        return
    try:
        duplicates = duplicate_zips([entry for entry in sys.path if isinstance(entry, str)])
    except (OSError, RuntimeError, ValueError):  # a path it cannot resolve: keep the zips, only slower
        return
    for entry in duplicates:
        sys.path.remove(entry)
