"""Where the platform's Airflow is and how to reach it: its home, URL, user and password, its DAG bundles' names,
its airflow.cfg as the platform wrote it. The facts that `embedded.airflow` deploys Airflow by and that every layer
above reads (`orchestration.airflow` calls its API, the plugin reads the venice section of its airflow.cfg): below
them all, so none of them depends on how the embedded Airflow is started."""

from __future__ import annotations

import configparser
import json
import secrets
from pathlib import Path

from venice_core.config import ClusterConfig
from venice_core.errors import ComponentError

USER = "admin"


def home(config: ClusterConfig) -> Path:
    return config.data_dir / "airflow"


def base_url(config: ClusterConfig) -> str:
    """Where Airflow's API server and UI are reached (`airflow.api.url`)."""
    return config.airflow.api_url.rstrip("/")


def password(config: ClusterConfig) -> str:
    """The admin password, generated once and kept in the Airflow home (simple auth manager's file)."""
    path = home(config) / "simple_auth_manager_passwords.json.generated"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({USER: secrets.token_urlsafe(12)}))
        path.chmod(0o600)
    password: str = json.loads(path.read_text())[USER]
    return password


# How long a connection waits for another's write lock (sqlite3's default is 5 s). Airflow's components and task
# processes all write to the one file; on two busy cores a write waited past 5 s and failed a trigger (500).
SQLITE_BUSY_TIMEOUT_SECONDS = 60
# How long a REST call waits for Airflow's answer: past the database's own wait for a lock, so that an API server
# slowed by a long write (seen on a loaded two-core machine) answers late rather than being called unreachable. An
# Airflow that is down is refused at once, whatever this is.
API_READ_TIMEOUT_SECONDS = SQLITE_BUSY_TIMEOUT_SECONDS + 30

# The section of the home's airflow.cfg naming the venice config the DAG files read (`venice_plugin.platform_config`).
PLATFORM_SECTION = "venice"
PLATFORM_BUNDLE = "dags-folder"  # Airflow's bundle of its dags_folder: the platform's own DAG files (dags/)
STORES_BUNDLE = "venice-stores"  # the stores' generated DAG files (`store_dags`)
USER_BUNDLE = "user-dags"


def stores_folder(config: ClusterConfig) -> Path:
    """The folder of the stores' DAG files, in the Airflow home."""
    return home(config) / "store_dags"


def read_config(path: Path) -> configparser.ConfigParser:
    """An airflow.cfg as the platform writes it (no interpolation; empty when there is no file)."""
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read(path)
    except configparser.Error as exc:
        raise ComponentError(f"{path} is not an Airflow config file: {str(exc).splitlines()[0]}") from None
    return parser


def config_value(airflow_home: Path, section: str, option: str) -> str:
    """A value of the home's airflow.cfg, as the platform wrote it."""
    path = airflow_home / "airflow.cfg"
    try:
        return read_config(path).get(section, option).replace("%%", "%")
    except configparser.Error as exc:
        raise ComponentError(f"{path}: no [{section}] {option}: {exc}") from None
