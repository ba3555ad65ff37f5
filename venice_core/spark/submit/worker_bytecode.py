"""Bytecode for the Python workers Spark starts: `python -m venice_core.spark.submit.worker_bytecode`, run by
`make install` and `make test` (a no-op once done for this Python and pyspark).

Spark puts `pyspark.zip` and py4j's zip (pyspark's `python/lib`) first on every Python worker's path, so a worker
imports pyspark from the zip, and Python keeps no bytecode for a zip: each worker compiled pyspark's modules from source
(`pyspark.sql`'s streaming source runner: 2.7 s against 0.84 s with bytecode, on an idle machine, measured). A worker
the driver starts itself (a Python data source's planner, a streaming query's source runner) has Spark's fixed 10 s
to connect back: on a saturated machine the compiling alone took longer, and the streaming query failed, at each of
its restarts. The zip is rewritten with each module's bytecode beside its source, as unchecked hash-based `.pyc`
files, which zipimport loads without looking at the source (the zip is never edited, only replaced whole)."""

from __future__ import annotations

import importlib.util
import marshal
import os
import zipfile
from pathlib import Path

from venice_core.errors import MissingDependency
from venice_core.host.cache import filling, staging
from venice_core.spark.python_path import spark_home

UNCHECKED_HASH_FLAGS = 0b01  # PEP 552: hash-based, the source not checked at import


def worker_zips() -> list[Path]:
    """The zips Spark puts on its Python workers' path (`SPARK_HOME/python/lib`: pyspark's and py4j's)."""
    return sorted((spark_home() / "python" / "lib").glob("*.zip"))


def compiled(path: Path) -> bool:
    """Does the zip hold this Python's bytecode (its first module's `.pyc`, with this interpreter's magic)?"""
    try:
        with zipfile.ZipFile(path) as archive:
            first = next(name for name in archive.namelist() if name.endswith(".py"))
            return archive.read(first + "c")[:4] == importlib.util.MAGIC_NUMBER
    except (KeyError, StopIteration, OSError, zipfile.BadZipFile):
        return False


def pyc(source: bytes, filename: str) -> bytes:
    code = compile(source, filename, "exec", dont_inherit=True)
    header = importlib.util.MAGIC_NUMBER + UNCHECKED_HASH_FLAGS.to_bytes(4, "little")
    return header + importlib.util.source_hash(source) + marshal.dumps(code)


def build(path: Path) -> Path:
    """The zip with bytecode, rewritten unless it has this Python's already. Builds at once take turns
    (`cache.filling`): the second finds the first's zip."""
    if compiled(path):
        return path
    with filling(path):
        if not compiled(path):
            _rewrite(path)
    return path


def _rewrite(path: Path) -> None:
    partial = staging(path)
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as target:
        for entry in source.infolist():
            if entry.filename.endswith(".pyc"):
                continue  # an older Python's, replaced below
            data = source.read(entry)
            target.writestr(entry, data)
            if entry.filename.endswith(".py"):
                code = pyc(data, f"{path}/{entry.filename}")  # tracebacks name the file as before
                target.writestr(zipfile.ZipInfo(entry.filename + "c", entry.date_time), code, zipfile.ZIP_DEFLATED)
    os.replace(partial, path)


def main() -> int:
    try:
        zips = worker_zips()
    except MissingDependency as exc:
        raise SystemExit(f"error: {exc}") from None
    for path in zips:
        build(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
