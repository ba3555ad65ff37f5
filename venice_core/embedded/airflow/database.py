"""The embedded Airflow's database at this Airflow version: a SQLite template migrated once into the cache and
copied into a new home; on a database server, migrated in place or restored from a dump of one migrated before."""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import shutil
import sqlite3
import subprocess
import tempfile
from pathlib import Path

from venice_core.config import ClusterConfig
from venice_core.deployment.airflow import home
from venice_core.embedded import postgres
from venice_core.embedded.airflow.component_processes import processes
from venice_core.embedded.airflow.configuration import DB_FILE, database_url, sqlite_url
from venice_core.errors import ComponentError
from venice_core.host.cache import cache_dir, clear_staging, filling, staging


def _airflow_version() -> str:
    return importlib.metadata.version("apache-airflow")


def _migrate(airflow: str, env: dict[str, str], database: Path | str, cwd: Path | None = None) -> None:
    """`airflow db migrate` on one SQLite file (created if absent), or on a database server's URL."""
    url = sqlite_url(database) if isinstance(database, Path) else database
    env = {**env, "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": url}
    cwd = database.parent if isinstance(database, Path) else cwd
    result = subprocess.run([airflow, "db", "migrate"], env=env, cwd=cwd, capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        output = "\n".join((result.stdout + result.stderr).splitlines()[-20:])
        where = database if isinstance(database, Path) else _safe(database)
        raise ComponentError(f"`airflow db migrate` failed on {where}:\n{output}")


def _safe(url: str) -> str:
    """A database URL without its password."""
    import sqlalchemy

    return sqlalchemy.make_url(url).render_as_string(hide_password=True)


def _template(airflow: str, env: dict[str, str]) -> Path:
    """An empty database of this Airflow version, migrated once into the cache (two starts at once take turns:
    the second finds the first's copy)."""
    template = cache_dir() / "airflow-db" / f"airflow-{_airflow_version()}.db"
    if template.exists():
        return template
    with filling(template):
        if not template.exists():
            with tempfile.TemporaryDirectory(dir=template.parent) as scratch:
                database = Path(scratch) / DB_FILE
                _migrate(airflow, {**env, "AIRFLOW_HOME": scratch}, database)
                os.replace(database, template)
    return template


def write_ahead_log(database: Path) -> None:
    """SQLite's write-ahead log on the home's database (kept in the file): readers (the API server, the UI, every
    task's heartbeat reads) no longer block the scheduler's writes, nor its writes them."""
    with contextlib.closing(sqlite3.connect(database)) as connection:
        connection.execute("PRAGMA journal_mode=WAL")


def prepare_database(config: ClusterConfig, airflow: str, env: dict[str, str]) -> None:
    """The home's database at this Airflow version: a copy of the template when there is none, migrated when a
    stamp beside it names another version (or none). On a database server: `_prepare_server_database`."""
    if config.airflow.db_url is not None:
        _prepare_server_database(config, airflow, env)
        return
    database = home(config) / DB_FILE
    stamp = database.with_name(f"{DB_FILE}.version")
    version = _airflow_version()
    if database.exists() and stamp.exists() and stamp.read_text() == version:
        return
    if database.exists():
        _refuse_migration_while_running(config, version)
        _migrate(airflow, env, database)
        write_ahead_log(database)
    else:
        clear_staging(database)
        partial = staging(database)
        shutil.copyfile(_template(airflow, env), partial)
        write_ahead_log(partial)
        os.replace(partial, database)
    stamp.write_text(version)


def _refuse_migration_while_running(config: ClusterConfig, version: str) -> None:
    if running := [p.name for p in processes(config) if p.pid() is not None]:
        raise ComponentError(
            f"Airflow's database in {home(config)} needs a migration to Airflow {version}, but "
            f"{', '.join(running)} still run on it: stop them first (`venice down`)"
        )


def _server_tables(url: str) -> tuple[str | None, int]:
    """Airflow's schema revision on a database server (None: no schema) and how many tables the database has."""
    import sqlalchemy

    engine = sqlalchemy.create_engine(
        url,
        poolclass=sqlalchemy.pool.NullPool,
        connect_args={"connect_timeout": 10} if url.startswith("postgresql") else {},
    )
    try:
        with engine.connect() as connection:
            tables = sqlalchemy.inspect(connection).get_table_names()
            if "alembic_version" not in tables:
                return None, len(tables)
            revision = connection.execute(sqlalchemy.text("SELECT version_num FROM alembic_version")).scalar()
            return revision, len(tables)
    except sqlalchemy.exc.OperationalError as exc:
        raise ComponentError(f"Airflow's database at {_safe(url)} does not answer: {exc.orig}") from None
    finally:
        engine.dispose()


def _embedded_database(config: ClusterConfig) -> postgres.Server | None:
    """The embedded PostgreSQL, when it holds Airflow's database (`airflow.db.url` as the profile computes it)."""
    server = postgres.server(config)
    if config.postgres.enabled and config.airflow.db_url == server.url("airflow"):
        return server
    return None


def _prepare_server_database(config: ClusterConfig, airflow: str, env: dict[str, str]) -> None:
    """Airflow's database on a server at this Airflow version. A schema revision this Airflow version was seen to
    migrate to (kept in the cache, `airflow-<version>.head`) is taken as current; any other is migrated (a migration
    that finds nothing to do costs 3 s, once per cache). An empty database on the embedded PostgreSQL is restored
    from a dump of one migrated before (`_restore_or_fill_dump`)."""
    url = database_url(config)
    version = _airflow_version()
    head = cache_dir() / "airflow-db" / f"airflow-{version}.head"
    revision, tables = _server_tables(url)
    if revision is not None and head.exists() and head.read_text() == revision:
        return
    server = _embedded_database(config)
    if revision is None and tables == 0 and server is not None:
        _restore_or_fill_dump(server, airflow, env, url, home(config))
    else:
        if revision is not None:
            _refuse_migration_while_running(config, version)
        _migrate(airflow, env, url, cwd=home(config))
    revision, _ = _server_tables(url)
    if revision is not None and not head.exists():
        head.parent.mkdir(parents=True, exist_ok=True)
        partial = staging(head)
        partial.write_text(revision)
        os.replace(partial, head)


def _restore_or_fill_dump(server: postgres.Server, airflow: str, env: dict[str, str], url: str, cwd: Path) -> None:
    """Airflow's empty database on the embedded server made as `airflow db migrate` would make it: restored from a
    dump in the cache (per Airflow and PostgreSQL version), or else migrated and dumped there for the next ones."""
    bins = postgres.bin_dir()
    dump = cache_dir() / "airflow-db" / f"airflow-{_airflow_version()}-pg{bins.parent.name}.sql"
    client = ["-h", server.host, "-p", str(server.port), "-U", postgres.ROLE]
    if not dump.exists():
        with filling(dump):
            if not dump.exists():
                _migrate(airflow, env, url, cwd=cwd)
                partial = staging(dump)
                dump_args = ["--no-owner", "--no-privileges", "-f", str(partial), "airflow"]
                _run([str(bins / "pg_dump"), *client, *dump_args], server.client_env())
                os.replace(partial, dump)
                return
    # One transaction: a restore cut short leaves the database empty, as it was.
    _run([str(bins / "psql"), *client, "-X", "-q", "-v", "ON_ERROR_STOP=1", "--single-transaction", "-d", "airflow",
          "-f", str(dump)], server.client_env())  # fmt: skip


def _run(argv: list[str], client_env: dict[str, str]) -> None:
    """A PostgreSQL client program, with libpq's environment for the embedded server (its TLS and password files)."""
    env = {**os.environ, **client_env}
    result = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300, env=env)
    if result.returncode != 0:
        raise ComponentError(f"{Path(argv[0]).name} failed:\n{result.stdout}{result.stderr}")
