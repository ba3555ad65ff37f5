"""The programs the platform runs that are not Python packages (java, javac, mvn, redis-server, ...): found on PATH,
or one clear error naming what to install."""

from __future__ import annotations

import shutil

from venice_core.errors import MissingDependency


def require_program(name: str, install_hint: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise MissingDependency(f"'{name}' is not installed or not on PATH: install {install_hint}")
    return path
