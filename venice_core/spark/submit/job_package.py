"""The `venice_core` package as one zip, for the jobs submitted to a Spark cluster (`--py-files`).

On a cluster's master (`spark://...`) the executors run in the workers' JVMs, in processes `spark-submit` did not
start: the Python workers they start must import every module a task runs (the push and repush tasks, the protocol
writer, Spark's Python daemon `spark.worker_daemon`) from what the job ships. The zip is built once for the package's
content (its name carries a hash of every file: an edited module gives another zip), into the first-run cache
(`cache`), each module beside its bytecode: Python compiles a module it imports from a zip from source in every
process, unless the zip holds its `.pyc` (an unchecked one: zipimport does not compare it with the source's date).
Another Python's executors (another bytecode magic number) fall back to the sources.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import py_compile
import tempfile
import zipfile
from pathlib import Path

import venice_core
from venice_core.host import cache

PACKAGE_DIR = Path(venice_core.__file__).resolve().parent
SKIPPED_DIRS = frozenset({"__pycache__"})
SKIPPED_SUFFIXES = (".pyc", ".pyo")
# A fixed date for every entry: the zip's bytes follow from the content alone.
ENTRY_DATE = (2020, 1, 1, 0, 0, 0)
UNCHECKED_HASH = py_compile.PycInvalidationMode.UNCHECKED_HASH


def package_files(package: Path = PACKAGE_DIR) -> list[Path]:
    """The package's files (sources and the data files beside them), sorted; no bytecode caches."""
    found = []
    for root, dirs, files in os.walk(package):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS and not d.startswith("."))
        found += [Path(root) / f for f in files if not f.endswith(SKIPPED_SUFFIXES) and not f.startswith(".")]
    return sorted(found)


def content_hash(package: Path = PACKAGE_DIR) -> str:
    """A hash of the package's files (their paths and bytes) and of this Python's bytecode format."""
    digest = hashlib.sha256(importlib.util.MAGIC_NUMBER)
    for file in package_files(package):
        digest.update(f"\0{file.relative_to(package)}\0".encode())
        digest.update(file.read_bytes())
    return digest.hexdigest()[:16]


def write_zip(target: Path, package: Path = PACKAGE_DIR) -> None:
    """The package (as `venice_core/...`), each module with its unchecked bytecode beside it (`module.pyc`, where
    zipimport looks for it first)."""
    with tempfile.TemporaryDirectory() as tmp, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        compiled = Path(tmp) / "module.pyc"
        for file in package_files(package):
            name = f"{package.name}/{file.relative_to(package).as_posix()}"
            archive.writestr(zipfile.ZipInfo(name, ENTRY_DATE), file.read_bytes(), zipfile.ZIP_DEFLATED)
            if file.suffix == ".py":
                py_compile.compile(
                    str(file), cfile=str(compiled), dfile=name, doraise=True, invalidation_mode=UNCHECKED_HASH
                )
                archive.writestr(zipfile.ZipInfo(f"{name}c", ENTRY_DATE), compiled.read_bytes(), zipfile.ZIP_DEFLATED)


def package_zip(directory: Path | None = None) -> Path:
    """The zip of the package as it is now: built the first time this content is asked for (under the cache's lock,
    renamed into place whole), found afterwards. In `directory`, else the cache's `py-files/`."""
    entry = (directory or cache.cache_dir() / "py-files") / f"venice_core-{content_hash()}.zip"
    if entry.exists():
        return entry
    with cache.filling(entry):
        if not entry.exists():
            partial = cache.staging(entry)
            write_zip(partial)
            partial.replace(entry)
    return entry
