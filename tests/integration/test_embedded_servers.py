"""The cluster profile's embedded servers, each started for real: PostgreSQL (Debian's server: a data dir made by
initdb at the first start, its databases created, a fast restart and a crash it recovers from, nothing left
running after its stop) and Redis (PING, nothing left after its stop)."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import ssl
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.platform import make_platform_env
from tests.support.sandbox import free_ports
from venice_core.config import ClusterConfig
from venice_core.embedded import postgres, redis
from venice_core.embedded.process import members
from venice_core.errors import ComponentError
from venice_core.security import ca
from venice_core.security import files as security_files
from venice_core.security.files import ca_path

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


@pytest.fixture
def secured(config: ClusterConfig) -> ClusterConfig:
    """The same servers on a secured platform (`security.enabled`), their certificates issued as `venice up` does."""
    home = config.data_dir
    extra = {
        "postgres.embedded.enabled": "true",
        "postgres.embedded.port": str(config.postgres.port),
        "redis.embedded.enabled": "true",
        "redis.embedded.port": str(config.redis.port),
        "security.enabled": "true",
    }
    secured = make_platform_env(home, extra).config
    ca.issue_all(secured, ["postgres", "redis"])  # and the client roles' (venice, reader...)
    return secured


def _refused(config: ClusterConfig, **changes: str) -> str:
    """How the secured server answers a connection with libpq's parameters changed (its error message)."""
    import psycopg2

    server = postgres.server(config)
    assert server.secured is not None
    client = {**server.secured.client, **changes}
    client = {key: value for key, value in client.items() if value}
    with pytest.raises(psycopg2.OperationalError) as refused:
        psycopg2.connect(
            host=server.host, port=server.port, user="venice", dbname="venice", connect_timeout=5, **client
        )
    return str(refused.value)


def test_a_secured_platforms_postgres_lets_in_only_tls_with_a_certificate_and_the_password(
    secured: ClusterConfig,
) -> None:
    postgres.start(secured)
    server = postgres.server(secured)
    assert server.secured is not None
    password = server.secured.password()
    _count(secured, "venice", "CREATE TABLE kept (n int); INSERT INTO kept VALUES (1); SELECT 1")
    assert secured.metadata_db_url == server.url("venice")  # the platform's clients connect as the test does
    hba = (secured.data_dir / "postgres" / "pg_hba.conf").read_text().splitlines()
    rules = [line.split() for line in hba if line and not line.startswith("#")]
    assert rules and all(rule[-1] == "clientcert=verify-full" or rule[0] == "local" for rule in rules)
    assert all("trust" not in rule for rule in rules)

    assert "no encryption" in _refused(secured, sslmode="disable")  # plain TCP: no line lets it in
    assert "certificate" in _refused(secured, sslcert="", sslkey="")  # TLS, the password, but no certificate
    wrong = secured.data_dir / "wrong.pgpass"
    wrong.write_text(f"*:*:*:venice:{password}x\n")
    wrong.chmod(0o600)
    assert "password authentication failed" in _refused(secured, passfile=str(wrong))
    reader_cert, reader_key = security_files.certificate(secured, "reader")  # the CA's, but not the database's
    _refused(secured, sslcert=str(reader_cert), sslkey=str(reader_key))  # with the right password
    log = (secured.run_dir / "postgres.log").read_text()
    assert 'no pg_hba.conf entry for host "127.0.0.1", user "venice", database "venice", no encryption' in log
    assert 'password authentication failed for user "venice"' in log
    assert 'certificate validation (clientcert=verify-full) failed for user "venice": CN mismatch' in log

    pid = postgres.process(secured).pid()
    assert password not in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    assert password not in log
    assert _count(secured, "venice", "SELECT count(*) FROM kept") == 1  # nothing the refused ones tried changed it
    postgres.restart(secured)  # its material in place: it starts again as it is
    assert _count(secured, "venice", "SELECT count(*) FROM kept") == 1


def test_a_data_dir_made_without_security_is_secured_in_place_and_never_goes_back(
    config: ClusterConfig, secured: ClusterConfig
) -> None:
    """A platform made before security (the cluster profile before issue 45): its role is given the password in
    place, its data kept; a secured data dir is refused by an unsecured platform, by name."""
    postgres.start(config)
    _count(config, "venice", "CREATE TABLE kept (n int); INSERT INTO kept VALUES (1); SELECT 1")
    postgres.stop(config)
    postgres.start(secured)
    assert _count(secured, "venice", "SELECT count(*) FROM kept") == 1
    assert "no encryption" in _refused(secured, sslmode="disable")
    log = (secured.run_dir / "postgres.log").read_text()
    password = postgres.server(secured).secured.password()  # type: ignore[union-attr]
    assert password not in log  # the server was given a verifier, never the password
    postgres.stop(secured)
    with pytest.raises(ComponentError, match="was made by a secured platform"):
        postgres.start(config)
    assert postgres.process(config).pid() is None


def test_a_secured_postgres_in_a_home_its_user_can_reach_reads_its_key_as_that_user(secured: ClusterConfig) -> None:
    """The server run as Debian's `postgres` user (root, a home every folder above which is searchable): its key's
    copy is that user's and 0600, and initdb's password file is gone."""
    secured.data_dir.parent.chmod(0o755)
    postgres.start(secured)
    _count(secured, "venice", "SELECT 1")
    data_dir = secured.data_dir / "postgres"
    key = (data_dir / "server.key").stat()
    owner = pwd.getpwnam("postgres").pw_uid if os.geteuid() == 0 else os.geteuid()
    assert data_dir.stat().st_uid == key.st_uid == owner and key.st_mode & 0o077 == 0
    assert not list(secured.data_dir.glob(".postgres.pwfile"))


def test_a_secured_platforms_redis_speaks_tls_only_and_asks_for_its_password(secured: ClusterConfig) -> None:
    redis.start(secured)
    try:
        password = redis.password(secured)
        tls = redis.client_context(secured)
        assert password is not None and tls is not None
        host, port = secured.redis.host, secured.redis.port
        assert redis.is_healthy(secured)  # TLS, AUTH, then PING
        assert not redis.ping(host, port, secret_=password)  # plain TCP, even with the password
        assert not redis.ping(host, port, tls=tls)  # without the password: NOAUTH
        assert not redis.ping(host, port, secret_="a guess", tls=tls)
        anonymous = ssl.create_default_context(cafile=str(ca_path(secured)))  # no client certificate
        assert not redis.ping(host, port, secret_=password, tls=anonymous)
        pid = redis.process(secured).pid()
        assert password not in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        conf = secured.data_dir / "redis" / "redis.conf"
        assert conf.stat().st_mode & 0o077 == 0 and password in conf.read_text()
        assert redis.broker_url(secured) == f"rediss://:{password}@{host}:{port}/0"
        log = (secured.run_dir / "redis.log").read_text()
        assert "Error accepting a client connection" in log and password not in log
        assert f"Accepted {host}:" in log  # each connection's address, the refused ones' too
    finally:
        redis.stop(secured)
