"""Jars from Maven Central, fetched once by Maven from a pom in the package into a cache keyed by its content."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

from venice_core.embedded.process import require_program
from venice_core.errors import ComponentError

ENV_CACHE_DIR = "VENICE_CACHE_DIR"


def cache_dir() -> Path:
    if os.environ.get(ENV_CACHE_DIR):
        return Path(os.environ[ENV_CACHE_DIR])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "venice"


def jars_dir(pom: Path) -> Path:
    digest = hashlib.sha256(pom.read_bytes()).hexdigest()[:12]
    return cache_dir() / f"{pom.stem}-{digest}"


def fetch_jars(pom: Path, transitive: bool = True) -> Path:
    """The folder holding the pom's dependencies (with their own dependencies when `transitive`)."""
    target = jars_dir(pom)
    if (target / ".complete").exists():
        return target
    mvn = require_program("mvn", "Apache Maven (Debian: apt-get install maven)")
    staging = target.with_name(target.name + ".partial")
    staging.mkdir(parents=True, exist_ok=True)
    argv = [
        mvn,
        "-q",
        "-B",
        "-f",
        str(pom),
        "dependency:copy-dependencies",
        "-DincludeScope=runtime",
        f"-DoutputDirectory={staging}",
    ]
    if not transitive:
        argv.append("-DexcludeTransitive=true")
    result = subprocess.run(argv, capture_output=True, text=True)
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-15:])
        raise ComponentError(f"Maven could not fetch the jars of {pom.name} (is Maven Central reachable?):\n{tail}")
    (staging / ".complete").touch()
    staging.replace(target)
    return target
