"""Whether the embedded Airflow is up: the API server's health report, a Celery worker's start in its log, the DAG
bundles registered in the database."""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
import urllib.error
import urllib.request
from typing import Any

from venice_core.config import ClusterConfig
from venice_core.deployment.airflow import base_url, home
from venice_core.embedded.airflow.component_processes import TRIGGERER, celery_workers
from venice_core.embedded.airflow.configuration import DB_FILE, bundles
from venice_core.embedded.process import ManagedProcess

# The API server's health report, as JSON: {component: {"status": ..., ...}}.
HealthReport = dict[str, Any]


def health(config: ClusterConfig) -> HealthReport | None:
    """The API server's health report (each component's status: `metadatabase`, `scheduler`, `triggerer`,
    `dag_processor`), or None while it does not answer."""
    try:
        with urllib.request.urlopen(f"{base_url(config)}/api/v2/monitor/health", timeout=3) as response:
            report: HealthReport = json.load(response)
            return report
    except (urllib.error.URLError, OSError, ValueError):
        return None


def answers(config: ClusterConfig) -> bool:
    """The API server answers (whatever the state of the other components)."""
    return health(config) is not None


def is_healthy(config: ClusterConfig, report: HealthReport | None = None) -> bool:
    """The API server answers and reports a healthy scheduler (in `report`, when the caller has read it)."""
    return _status(report if report is not None else health(config), "scheduler") == "healthy"


def _status(report: HealthReport | None, component: str) -> str | None:
    return ((report or {}).get(component) or {}).get("status")


def triggerer_healthy(config: ClusterConfig, report: HealthReport | None = None) -> bool:
    """The API server reports a healthy triggerer (its heartbeat recent)."""
    return _status(report if report is not None else health(config), TRIGGERER) == "healthy"


def ready(config: ClusterConfig, started: dict[str, int]) -> bool:
    """A healthy scheduler (and triggerer, when the config runs one), and each Celery worker in `started` (by name,
    with the size of its log before it started) has logged that it is ready to take tasks."""
    report = health(config)
    if not is_healthy(config, report) or (config.airflow.triggerer and not triggerer_healthy(config, report)):
        return False
    return all(worker_ready(proc, started[proc.name]) for proc in celery_workers(config) if proc.name in started)


def log_size(proc: ManagedProcess) -> int:
    try:
        return proc.log_file.stat().st_size
    except OSError:
        return 0


_READY = re.compile(rb"\S@\S+ ready\.")  # Celery's `<node>@<host> ready.`, in a structured log line


def worker_ready(proc: ManagedProcess, offset: int) -> bool:
    """The worker logged Celery's `<node> ready.` since `offset` of its log."""
    try:
        with open(proc.log_file, "rb") as log:
            log.seek(offset)
            return any(_READY.search(line) for line in log)
    except OSError:
        return False


def bundles_registered(config: ClusterConfig) -> bool:
    """Every DAG bundle has its row in Airflow's database (read-only, and quietly false while it has no table)."""
    wanted = {bundle["name"] for bundle in json.loads(bundles(config))}
    if config.airflow.db_url is not None:
        return wanted <= _server_bundles(config.airflow.db_url)
    uri = f"{(home(config) / DB_FILE).as_uri()}?mode=ro"
    try:
        with contextlib.closing(sqlite3.connect(uri, uri=True, timeout=5)) as connection:
            names = {row[0] for row in connection.execute("SELECT name FROM dag_bundle")}
    except sqlite3.Error:
        return False
    return wanted <= names


def _server_bundles(url: str) -> set[str]:
    """The DAG bundles registered in Airflow's database on a server (none while it has no table)."""
    import sqlalchemy

    engine = sqlalchemy.create_engine(url, poolclass=sqlalchemy.pool.NullPool)
    try:
        with engine.connect() as connection:
            return {row[0] for row in connection.execute(sqlalchemy.text("SELECT name FROM dag_bundle"))}
    except sqlalchemy.exc.SQLAlchemyError:
        return set()
    finally:
        engine.dispose()
