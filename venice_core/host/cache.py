"""What a first run builds once and later runs reuse (the Kafka jars, the migrated empty Airflow database, the Spark
class archive), filled safely when several processes find it missing at once: the suite's parallel workers on a
fresh machine, or `venice up` beside `make test`.

Each entry is filled under an exclusive lock of its own (`flock` on `<entry>.lock`, released by the kernel if the
holder dies), into a staging name private to the process, then renamed into place: a process that waited for the
lock finds the entry whole and keeps it, and no reader ever sees half an entry.
"""

from __future__ import annotations

import fcntl
import glob
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ENV_CACHE_DIR = "VENICE_CACHE_DIR"


def cache_dir() -> Path:
    """`$VENICE_CACHE_DIR`, else `$XDG_CACHE_HOME/venice` (`~/.cache/venice`)."""
    if os.environ.get(ENV_CACHE_DIR):
        return Path(os.environ[ENV_CACHE_DIR])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "venice"


@contextmanager
def filling(entry: Path) -> Iterator[None]:
    """Hold the entry's fill lock: one process at a time fills it. Check the entry again once inside, since the
    process before may have filled it while this one waited."""
    entry.parent.mkdir(parents=True, exist_ok=True)
    with open(entry.with_name(f"{entry.name}.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            clear_staging(entry)  # what a filler killed mid-way left
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def staging(entry: Path) -> Path:
    """A name beside the entry for this process's copy while it fills it (renamed to the entry when whole)."""
    return entry.with_name(f"{entry.name}.partial-{os.getpid()}")


def clear_staging(entry: Path) -> None:
    """Remove the entry's staging copies (call it holding the entry's lock: no one else is filling it)."""
    for leftover in entry.parent.glob(f"{glob.escape(entry.name)}.partial*"):
        if leftover.is_dir():
            shutil.rmtree(leftover, ignore_errors=True)
        else:
            leftover.unlink(missing_ok=True)
