"""Jars from Maven Central, fetched once by Maven from a pom in the package into a cache keyed by its content.

Safe when several processes fetch the same pom at once (`cache.filling`)."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

from venice_core.errors import ComponentError
from venice_core.host.cache import cache_dir, filling, staging
from venice_core.host.programs import require_program

COMPLETE = ".complete"


def jars_dir(pom: Path) -> Path:
    digest = hashlib.sha256(pom.read_bytes()).hexdigest()[:12]
    return cache_dir() / f"{pom.stem}-{digest}"


def fetch_jars(pom: Path, transitive: bool = True) -> Path:
    """The folder holding the pom's dependencies (with their own dependencies when `transitive`). Processes that
    find it missing at once take turns: the first fetches, the others find its copy whole (Maven's own local
    repository is not safe to fill from several processes at once either)."""
    target = jars_dir(pom)
    if (target / COMPLETE).exists():
        return target
    mvn = require_program("mvn", "Apache Maven (Debian: apt-get install maven)")
    with filling(target):
        if (target / COMPLETE).exists():
            return target
        shutil.rmtree(target, ignore_errors=True)  # a folder without its mark is not whole
        partial = staging(target)
        argv = [
            mvn,
            "-q",
            "-B",
            "-f",
            str(pom),
            "dependency:copy-dependencies",
            "-DincludeScope=runtime",
            f"-DoutputDirectory={partial}",
        ]
        if not transitive:
            argv.append("-DexcludeTransitive=true")
        result = subprocess.run(argv, capture_output=True, text=True)
        if result.returncode != 0:
            shutil.rmtree(partial, ignore_errors=True)
            tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-15:])
            raise ComponentError(f"Maven could not fetch the jars of {pom.name} (is Maven Central reachable?):\n{tail}")
        (partial / COMPLETE).touch()
        partial.replace(target)
    return target
