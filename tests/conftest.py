"""Session-wide servers: each starts once per test session and stops at its end."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.platform import PlatformEnv, make_platform_env
from tests.support.postgres import postgres_server
from venice_core.embedded import platform


@pytest.fixture(scope="session")
def platform_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PlatformEnv]:
    """The embedded platform (real Kafka broker, migrated metadata store), up for the whole session."""
    env = make_platform_env(tmp_path_factory.mktemp("venice-home"))
    config = env.config
    try:
        platform.up(config, report=lambda _line: None)
        yield env
    finally:
        platform.down(config, report=lambda _line: None)


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A real PostgreSQL server. Its directory is outside pytest's (0700, root-only) temp tree because the
    server runs as the `postgres` user."""
    base = Path(tempfile.mkdtemp(prefix="venice-pg-"))
    try:
        with postgres_server(base) as url:
            yield url
    finally:
        shutil.rmtree(base, ignore_errors=True)
