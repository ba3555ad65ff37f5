"""The cluster profile's embedded servers, each started for real: PostgreSQL (Debian's server: a data dir made by
initdb at the first start, its databases created, a fast restart and a crash it recovers from, nothing left
running after its stop) and Redis (PING, nothing left after its stop)."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import tempfile
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from tests.support.platform import make_platform_env
from tests.support.sandbox import free_ports
from venice_core.config import ClusterConfig
from venice_core.embedded import postgres, redis
from venice_core.embedded.process import members

pytestmark = [pytest.mark.postgres, pytest.mark.redis]


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def config() -> Iterator[ClusterConfig]:
    """A home in a new 0700 folder (as root, the server runs in a user namespace of its own there: the `postgres`
    user cannot reach it), stopped and removed after the test."""
    home = Path(tempfile.mkdtemp(prefix="venice-servers-")) / "home"
    pg_port, redis_port = free_ports(2)
    extra = {
        "postgres.embedded.enabled": "true",
        "postgres.embedded.port": str(pg_port),
        "redis.embedded.enabled": "true",
        "redis.embedded.port": str(redis_port),
    }
    config = make_platform_env(home, extra).config
    try:
        yield config
    finally:
        postgres.stop(config)
        redis.stop(config)
        shutil.rmtree(home.parent, ignore_errors=True)


def _count(config: ClusterConfig, database: str, sql: str) -> int:
    import sqlalchemy

    engine = sqlalchemy.create_engine(postgres.server(config).url(database), poolclass=sqlalchemy.pool.NullPool)
    try:
        with engine.begin() as connection:
            return int(connection.execute(sqlalchemy.text(sql)).scalar() or 0)
    finally:
        engine.dispose()


def test_postgres_starts_with_its_databases_restarts_and_recovers_from_a_crash(config: ClusterConfig) -> None:
    started = time.monotonic()
    line = postgres.start(config)
    first_start = time.monotonic() - started
    assert "created venice, airflow" in line, line
    assert first_start < 20, first_start  # initdb and a start: about a second on two idle cores
    assert postgres.is_healthy(config) and (config.data_dir / "postgres" / "PG_VERSION").exists()
    _count(config, "venice", "CREATE TABLE kept (n int); INSERT INTO kept VALUES (1); SELECT 1")
    assert postgres.start(config).startswith("postgres is already running")

    postgres.restart(config)  # a fast shutdown and a start: the data is there
    assert _count(config, "venice", "SELECT count(*) FROM kept") == 1
    _count(config, "airflow", "SELECT 1")

    pid = postgres.process(config).pid()
    assert pid is not None
    postgres.kill(config)  # as a crash: the server and its backends SIGKILLed
    assert postgres.process(config).pid() is None and not members(pid)
    assert "created" not in postgres.start(config)  # recovered from its WAL, its databases there
    assert _count(config, "venice", "SELECT count(*) FROM kept") == 1

    pid = postgres.process(config).pid()
    assert pid is not None
    assert postgres.stop(config)
    assert not postgres.stop(config)  # not running: nothing to stop
    assert not members(pid) and not _listening(config.postgres.port)


def test_postgres_in_a_home_its_user_can_reach_runs_as_that_user(config: ClusterConfig) -> None:
    """A home every folder above which is searchable (/tmp's): as root, the server runs as the `postgres` user (as
    Debian runs it), its data dir that user's."""
    config.data_dir.parent.chmod(0o755)
    postgres.start(config)
    assert postgres.is_healthy(config)
    owner = (config.data_dir / "postgres").stat().st_uid
    assert owner == (pwd.getpwnam("postgres").pw_uid if os.geteuid() == 0 else os.geteuid())


def test_redis_answers_ping_and_leaves_nothing_when_stopped(config: ClusterConfig) -> None:
    started = time.monotonic()
    line = redis.start(config)
    assert line.startswith("redis started"), line
    assert time.monotonic() - started < 10
    assert redis.is_healthy(config)
    assert redis.start(config).startswith("redis is already running")
    pid = redis.process(config).pid()
    assert pid is not None
    assert redis.stop(config)
    assert not redis.is_healthy(config) and not members(pid) and not _listening(config.redis.port)


def test_a_secured_platforms_redis_asks_for_its_password_which_no_command_line_shows(config: ClusterConfig) -> None:
    secured = replace(config, security=replace(config.security, enabled=True))
    redis.start(secured)
    try:
        password = redis.password(secured)
        assert password is not None
        assert redis.is_healthy(secured)  # AUTH, then PING
        assert not redis.ping(config.redis.host, config.redis.port)  # without it: NOAUTH
        assert not redis.ping(config.redis.host, config.redis.port, secret_="a guess")
        pid = redis.process(secured).pid()
        assert password not in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        conf = secured.data_dir / "redis" / "redis.conf"
        assert conf.stat().st_mode & 0o077 == 0 and password in conf.read_text()
        assert redis.broker_url(secured) == f"redis://:{password}@{config.redis.host}:{config.redis.port}/0"
    finally:
        redis.stop(secured)
