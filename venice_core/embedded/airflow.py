"""The embedded Airflow: its components started directly (`airflow api-server`, `scheduler`, and two
`dag-processor`s, one for the stores' generated DAG files and one for the rest; LocalExecutor on SQLite), each a
managed process of its own, with the project's dags/ and plugins/, bound to 127.0.0.1, parallelism small enough
for two cores. No triggerer by default: nothing the project runs defers (sensors reschedule, and Airflow 3.3's
human-in-the-loop tasks wait in `awaiting_input` without one); `airflow.triggerer.enabled` runs one.

The cluster profile's Airflow (`airflow.executor=CeleryExecutor`): its database on PostgreSQL (`airflow.db.url`, the
embedded server's `airflow` database), tasks sent through Redis to `airflow.celery.workers` Celery workers, each a
managed process (`airflow-celery-worker-<n>`, Celery node `venice-worker-<n>@<host>`, two task slots); the scheduler
runs no task itself. A task whose worker dies is noticed by its missing heartbeats within ~35 s and retried (on a
worker alive). The workers serve no logs: the API server reads every task's log from the log folder they share on
this machine, as it does the local executor's. On a database server every component runs under `keepalive`, which
starts it again when it exits: Airflow's scheduler, triggerer and dag-processors exit at a database error, and the
server may restart under them.

Not `airflow standalone`, which costs a parent process importing Airflow (and a triggerer) and creates the
database before it starts anything. The database is created once per Airflow version, as a template in the cache
(`$VENICE_CACHE_DIR/airflow-db/`), and copied into a new Airflow home; a home's database from another Airflow
version is migrated in place first. On the embedded PostgreSQL the template is a dump of a migrated database (per
Airflow and PostgreSQL version), restored into an empty one in 0.3 s instead of a 3 s migration; another server's
database is migrated by `airflow db migrate` when its schema is not this Airflow's. The settings are in the home's
airflow.cfg too, so that Airflow's own CLI given AIRFLOW_HOME alone sees this same Airflow; `venice airflow` runs it
in the components' environment."""

from __future__ import annotations

import base64
import configparser
import contextlib
import importlib.metadata
import json
import os
import re
import secrets
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from venice_core.config import ENV_CONFIG, ClusterConfig, embedded_postgres_url, process_env
from venice_core.embedded import postgres
from venice_core.embedded.process import ManagedProcess
from venice_core.errors import ComponentError, ConfigError
from venice_core.host.cache import cache_dir, clear_staging, filling, staging

PROJECT_ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_SECONDS = 240.0
USER = "admin"
# The components, in start order: the API server takes longest to start (it builds every route's models). Two
# dag-processors, each for its bundles: the stores' generated files, parsed on request only (see STORE_SETTINGS),
# and the rest (the platform's dags/, the users' own folder), parsed as Airflow does by default.
STORE_DAG_PROCESSOR = "store-dag-processor"
COMPONENTS = ("api-server", "dag-processor", STORE_DAG_PROCESSOR, "scheduler")
DB_FILE = "airflow.db"
CELERY = "CeleryExecutor"
TRIGGERER = "triggerer"
CELERY_WORKER = "celery-worker"  # worker n: the component `celery-worker-<n>`
CELERY_CONCURRENCY = 2  # task slots per worker (two workers: the four of `[core] parallelism`)
# The Celery workers' tasks name their worker as their host (`venice-worker-<n>@<host>`): a task instance's
# `hostname` says which worker ran each try. The callable reads the worker's name from its environment.
ENV_WORKER = "VENICE_AIRFLOW_WORKER"
HOSTNAME_CALLABLE = "venice_core.embedded.airflow.worker_hostname"


def worker_hostname() -> str:
    """`[core] hostname_callable` of the Celery workers' tasks: `<worker>@<host>`, their worker's Celery node."""
    worker = os.environ.get(ENV_WORKER)
    return f"{worker}@{socket.gethostname()}" if worker else socket.getfqdn()


def celery_worker_name(number: int) -> str:
    """Celery worker n's node name (without its host)."""
    return f"venice-worker-{number}"


def components(config: ClusterConfig) -> tuple[str, ...]:
    """The components the config runs, in start order: COMPONENTS, with the triggerer and the Celery workers (when
    configured) after the API server: they need nothing of the others to start."""
    extra = [TRIGGERER] if config.airflow.triggerer else []
    if config.airflow.executor == CELERY:
        extra += [f"{CELERY_WORKER}-{n}" for n in range(config.airflow.celery_workers)]
    return (COMPONENTS[0], *extra, *COMPONENTS[1:])


def processes(config: ClusterConfig) -> list[ManagedProcess]:
    """One managed process per component (`run/airflow-<component>.{pid,log}`)."""
    return [ManagedProcess(f"airflow-{name}", config.run_dir) for name in components(config)]


def celery_workers(config: ClusterConfig) -> list[ManagedProcess]:
    """The Celery workers' managed processes (none with the local executor)."""
    return [proc for name, proc in zip(components(config), processes(config), strict=True) if _is_worker(name)]


def triggerer(config: ClusterConfig) -> ManagedProcess:
    return ManagedProcess(f"airflow-{TRIGGERER}", config.run_dir)


def _is_worker(name: str) -> bool:
    return name.startswith(f"{CELERY_WORKER}-")


def pids(config: ClusterConfig) -> list[int]:
    """The pids of the components running."""
    return [pid for pid in (proc.pid() for proc in processes(config)) if pid is not None]


def home(config: ClusterConfig) -> Path:
    return config.data_dir / "airflow"


def base_url(config: ClusterConfig) -> str:
    return f"http://127.0.0.1:{config.airflow.port}"


def password(config: ClusterConfig) -> str:
    """The admin password, generated once and kept in the Airflow home (simple auth manager's file)."""
    path = home(config) / "simple_auth_manager_passwords.json.generated"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({USER: secrets.token_urlsafe(12)}))
        path.chmod(0o600)
    return json.loads(path.read_text())[USER]


# How long a connection waits for another's write lock (sqlite3's default is 5 s). Airflow's components and task
# processes all write to the one file; on two busy cores a write waited past 5 s and failed a trigger (500).
SQLITE_BUSY_TIMEOUT_SECONDS = 60
# How long a REST call waits for Airflow's answer: past the database's own wait for a lock, so that an API server
# slowed by a long write (seen on a loaded two-core machine) answers late rather than being called unreachable. An
# Airflow that is down is refused at once, whatever this is.
API_READ_TIMEOUT_SECONDS = SQLITE_BUSY_TIMEOUT_SECONDS + 30


def _sqlite_url(path: Path) -> str:
    return f"sqlite:///{path}?timeout={SQLITE_BUSY_TIMEOUT_SECONDS}"


BUNDLES_SETTING = ("dag_processor", "dag_bundle_config_list")  # the DAG bundles: `_bundles`
# The section of the home's airflow.cfg naming the venice config the DAG files read (`venice_plugin.platform_config`).
PLATFORM_SECTION = "venice"


def settings(config: ClusterConfig, dags_folder: Path | None = None) -> dict[tuple[str, str], str]:
    """The platform's Airflow settings by (section, option): written into the home's `airflow.cfg` (so Airflow's
    own CLI run with AIRFLOW_HOME alone sees the Airflow the components run) and set in the components'
    environment too (`AIRFLOW__SECTION__OPTION`, which wins over a shell's own)."""
    url = base_url(config)
    venice = process_env(config)
    return {
        ("core", "dags_folder"): str(dags_folder or PROJECT_ROOT / "dags"),
        ("core", "plugins_folder"): str(PROJECT_ROOT / "plugins"),
        ("core", "executor"): config.airflow.executor,
        ("core", "auth_manager"): "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
        ("core", "load_examples"): "False",
        ("core", "dags_are_paused_at_creation"): "False",
        ("core", "parallelism"): "4",
        ("core", "max_active_tasks_per_dag"): "4",
        ("core", "simple_auth_manager_users"): f"{USER}:admin",
        # The plugin (and the rollout module it imports) is loaded before the scheduler forks its executor's
        # workers, so a task process starts with it imported instead of importing it again.
        ("core", "lazy_load_plugins"): "False",
        ("core", "execution_api_server_url"): f"{url}/execution/",
        ("database", "sql_alchemy_conn"): database_url(config),
        ("api", "host"): "127.0.0.1",
        ("api", "port"): str(config.airflow.port),
        ("api", "base_url"): url,
        # The log servers of the workers and the triggerer, next to the API's port: Airflow's defaults (8793,
        # 8794) would collide between two platforms on one machine.
        ("logging", "worker_log_server_port"): str(config.airflow.port + 1),
        ("logging", "trigger_log_server_port"): str(config.airflow.port + 2),
        ("dag_processor", "refresh_interval"): "5",
        # A file of dags/ or the users' folder is parsed again when it changes (its modification time passes its
        # last parse), and every 2 minutes. (The stores' files have settings of their own: STORE_SETTINGS.)
        ("dag_processor", "min_file_process_interval"): "120",
        BUNDLES_SETTING: _bundles(config),
        ("scheduler", "task_queued_timeout"): "600",
        # The scheduler sleeps this long after a loop that queued nothing. Each loop moves a failure one task
        # further down (upstream_failed) and notices finished tasks: at 1 s (Airflow's default), a 29-step rollout
        # took ~26 s to end after a failed step. At 0.2 s an idle scheduler kept 15% of a core busy; at 0.5 s a
        # 50-task rollout took as long (50-53 s) on 20% less CPU (49-55 against 65-67 CPU-seconds, measured).
        ("scheduler", "scheduler_idle_sleep_time"): "0.5",
        # After a crash, tasks the dead scheduler was running are reset and run again within 20 s (not 300 s).
        ("scheduler", "orphaned_tasks_check_interval"): "20",
        # A task's calls to the execution API ride out an API server restart (Airflow's default, 5 tries, gives up
        # within seconds, and the task fails with it).
        ("workers", "execution_api_retries"): "10",
        ("workers", "execution_api_retry_wait_max"): "30",
        **(_celery_settings(config) if config.airflow.executor == CELERY else {}),
        **(SERVER_DATABASE_SETTINGS if config.airflow.db_url is not None else {}),
        # The venice config, as the components get it in their environment: its file, if any, and its data dir.
        **({(PLATFORM_SECTION, ENV_CONFIG.lower()): venice[ENV_CONFIG]} if ENV_CONFIG in venice else {}),
        (PLATFORM_SECTION, "data_dir"): str(config.data_dir),
    }


# A task's heartbeats (every 5 s, from its supervisor in the worker) missing this long mark it failed, and retried
# when it has tries left: a SIGKILLed Celery worker's task is found within 30-35 s (Airflow's default, 300 s, would
# leave a push waiting five minutes). Six heartbeats missed in a row: a busy machine still makes them.
TASK_HEARTBEAT_TIMEOUT_SECONDS = 30


def _celery_settings(config: ClusterConfig) -> dict[tuple[str, str], str]:
    """The CeleryExecutor's settings: its broker, its results in Airflow's database, the workers' slots."""
    return {
        ("celery", "broker_url"): config.airflow.celery_broker_url,
        ("celery", "result_backend"): f"db+{config.airflow.db_url}",
        ("celery", "worker_concurrency"): str(CELERY_CONCURRENCY),
        # The result backend's connections checked before use: after a database restart, a stale one failed the
        # scheduler's read of its tasks' states (and each worker's first write of a result, retried).
        ("celery", "result_backend_sqlalchemy_engine_options"): '{"pool_pre_ping": true}',
        # Airflow's default, set to say so (it warns when unset): a task not acknowledged (its worker died) is
        # given to another worker after a day; the heartbeat timeout below has retried it long before.
        ("celery_broker_transport_options", "visibility_timeout"): "86400",
        ("scheduler", "task_instance_heartbeat_timeout"): str(TASK_HEARTBEAT_TIMEOUT_SECONDS),
        ("scheduler", "task_instance_heartbeat_timeout_detection_interval"): "5",
    }


# On a database server, which can restart under the components (the tests restart the embedded PostgreSQL mid-run):
# the scheduler's retried transactions wait for it for up to ~40 s (ten tries, the waits random, each at most double
# the one before and 5 s), not ~3 s (Airflow's three). What else it does on the database, and the triggerer and the
# dag-processors, end their process at the first error: `keepalive` starts them again.
SERVER_DATABASE_SETTINGS = {("database", "max_db_retries"): "10"}


def database_url(config: ClusterConfig) -> str:
    """Airflow's database: `airflow.db.url`, else SQLite in the Airflow home."""
    return config.airflow.db_url or _sqlite_url(home(config) / DB_FILE)


LOCAL_BUNDLE = "airflow.dag_processing.bundles.local.LocalDagBundle"
PLATFORM_BUNDLE = "dags-folder"  # Airflow's bundle of its dags_folder: the platform's own DAG files (dags/)
STORES_BUNDLE = "venice-stores"  # the stores' generated DAG files (`store_dags`)
USER_BUNDLE = "user-dags"


# The store dag-processor's own settings (in its environment, over the others). A store's DAG file is rewritten
# when the store changes, and the platform then asks for its parse (`AirflowApi.request_parse`); a new file is found
# at the next look at the folder. So nothing stats the files (at 3,000 stores, stat-ing every file every second
# and listing the folder every 5 s kept 10% of a core busy), nor sorts them (sorting 3,300 paths every second cost
# ~1%: a shuffle seeded by the host is the order instead), nor prints a table of them every 30 s; the folder is
# listed every 10 s, and an unchanged file is parsed again only once a week, a safety net (a parse of 3,000 stores'
# files costs ~750 CPU-seconds: every 6 hours, that would be 3.4% of a core). Measured by bench/dag_scale.py.
STORE_SETTINGS = {
    ("dag_processor", "file_parsing_sort_mode"): "random_seeded_by_host",
    ("dag_processor", "refresh_interval"): "10",
    ("dag_processor", "min_file_process_interval"): str(7 * 24 * 3600),
    ("dag_processor", "print_stats_interval"): "0",
}


def _component_command(config: ClusterConfig, name: str) -> list[str]:
    """The `airflow` arguments that start a component."""
    if name == STORE_DAG_PROCESSOR:
        return ["dag-processor", "--bundle-name", STORES_BUNDLE]
    if name == "dag-processor":
        users = ["--bundle-name", USER_BUNDLE] if config.airflow.user_dags is not None else []
        return ["dag-processor", "--bundle-name", PLATFORM_BUNDLE, *users]
    # No log server for the scheduler, the Celery workers and the triggerer: it listens on every interface
    # (Airflow has no setting for its host), and the API server reads the logs it would serve from the files their
    # tasks and triggers write on this machine.
    if name == "scheduler":
        return ["scheduler", "--skip-serve-logs"]
    if name == TRIGGERER:
        return [TRIGGERER, "--skip-serve-logs"]
    if _is_worker(name):
        number = int(name.rsplit("-", 1)[1])
        return [
            *("celery", "worker", "--concurrency", str(CELERY_CONCURRENCY)),
            *("--celery-hostname", f"{celery_worker_name(number)}@%h", "--skip-serve-logs"),
            # No exchange with the other workers at start-up or after: nothing here uses it (each takes its
            # tasks from the broker), and it costs each a second at start and messages all along.
            *("--without-mingle", "--without-gossip"),
        ]
    return [name]


def _component_env(name: str, env: dict[str, str]) -> dict[str, str]:
    if _is_worker(name):
        number = int(name.rsplit("-", 1)[1])
        return {**env, ENV_WORKER: celery_worker_name(number), "AIRFLOW__CORE__HOSTNAME_CALLABLE": HOSTNAME_CALLABLE}
    if name != STORE_DAG_PROCESSOR:
        return env
    return {**env, **{f"AIRFLOW__{s.upper()}__{o.upper()}": v for (s, o), v in STORE_SETTINGS.items()}}


def stores_folder(config: ClusterConfig) -> Path:
    """The folder of the stores' DAG files, in the Airflow home."""
    return home(config) / "store_dags"


def _bundles(config: ClusterConfig) -> str:
    """The DAG bundles: Airflow's default one (its dags_folder: the platform's dags/), the stores' generated
    files, and the users' own folder when there is one (`airflow.user.dags.folder`: a model-training DAG scheduled
    on a store's asset, say)."""
    bundles = [
        {"name": PLATFORM_BUNDLE, "classpath": LOCAL_BUNDLE, "kwargs": {}},
        {"name": STORES_BUNDLE, "classpath": LOCAL_BUNDLE, "kwargs": {"path": str(stores_folder(config))}},
    ]
    if config.airflow.user_dags is not None:
        bundles.append(
            {"name": USER_BUNDLE, "classpath": LOCAL_BUNDLE, "kwargs": {"path": str(config.airflow.user_dags)}}
        )
    return json.dumps(bundles)


def spark_connection(config: ClusterConfig) -> str:
    """Airflow's `spark_default` connection (the push job's SparkSubmitOperator's): the config's Spark master (its
    whole URL as the host), the driver in the submitting task's process (client mode, as `venice push --local`)."""
    return json.dumps({"conn_type": "spark", "host": config.spark.master, "extra": {"deploy-mode": "client"}})


def environment(config: ClusterConfig, dags_folder: Path | None = None) -> dict[str, str]:
    """The environment of every `airflow` process the platform runs: its components and `venice airflow`."""
    env = process_env(config)
    env.update({f"AIRFLOW__{s.upper()}__{o.upper()}": v for (s, o), v in settings(config, dags_folder).items()})
    env.update(
        {
            "AIRFLOW_HOME": str(home(config)),
            # Only here, not in airflow.cfg: a plain `airflow` command runs tasks without them (see the README).
            "AIRFLOW_CONN_SPARK_DEFAULT": spark_connection(config),
            "PYSPARK_PYTHON": sys.executable,
            "PATH": f"{Path(sys.executable).parent}:{env.get('PATH', '')}",
        }
    )
    return env


def health(config: ClusterConfig) -> dict | None:
    """The API server's health report (each component's status: `metadatabase`, `scheduler`, `triggerer`,
    `dag_processor`), or None while it does not answer."""
    try:
        with urllib.request.urlopen(f"{base_url(config)}/api/v2/monitor/health", timeout=3) as response:
            return json.load(response)
    except (urllib.error.URLError, OSError, ValueError):
        return None


def answers(config: ClusterConfig) -> bool:
    """The API server answers (whatever the state of the other components)."""
    return health(config) is not None


def is_healthy(config: ClusterConfig, report: dict | None = None) -> bool:
    """The API server answers and reports a healthy scheduler (in `report`, when the caller has read it)."""
    return _status(report if report is not None else health(config), "scheduler") == "healthy"


def _status(report: dict | None, component: str) -> str | None:
    return ((report or {}).get(component) or {}).get("status")


def triggerer_healthy(config: ClusterConfig, report: dict | None = None) -> bool:
    """The API server reports a healthy triggerer (its heartbeat recent)."""
    return _status(report if report is not None else health(config), TRIGGERER) == "healthy"


def _airflow_version() -> str:
    return importlib.metadata.version("apache-airflow")


def _migrate(airflow: str, env: dict[str, str], database: Path | str, cwd: Path | None = None) -> None:
    """`airflow db migrate` on one SQLite file (created if absent), or on a database server's URL."""
    url = _sqlite_url(database) if isinstance(database, Path) else database
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


# The secrets every component must share, generated once and kept in airflow.cfg: the Fernet key, the API's secret
# key, the JWT secret the scheduler signs task tokens with.
SECRETS: dict[tuple[str, str], Callable[[], str]] = {
    ("core", "fernet_key"): lambda: base64.urlsafe_b64encode(secrets.token_bytes(32)).decode(),
    ("api", "secret_key"): lambda: secrets.token_urlsafe(16),
    ("api_auth", "jwt_secret"): lambda: secrets.token_urlsafe(16),
}


CONFIG_HEADER = (
    "# Written by the platform (venice_core/embedded/airflow.py) at each Airflow start and `venice airflow`:\n"
    "# an edit here is overwritten. The secrets are generated once and kept.\n"
)


def _read_config(path: Path) -> configparser.ConfigParser:
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
        return _read_config(path).get(section, option).replace("%%", "%")
    except configparser.Error as exc:
        raise ComponentError(f"{path}: no [{section}] {option}: {exc}") from None


def _write_config(config: ClusterConfig, dags_folder: Path | None = None) -> None:
    """The home's `airflow.cfg`: the platform's `settings` and the `SECRETS`, kept from the file there (one an
    earlier start or Airflow itself wrote), else new. Written only when it changes, and atomically: a component
    reading it meanwhile sees the old file or the new, and without one each component would race to write its
    own."""
    path = home(config) / "airflow.cfg"
    current = _read_config(path)
    sections: dict[str, dict[str, str]] = {}
    for (section, option), value in settings(config, dags_folder).items():
        sections.setdefault(section, {})[option] = value.replace("%", "%%")  # Airflow interpolates %(name)s
    for (section, option), generate in SECRETS.items():
        sections.setdefault(section, {})[option] = current.get(section, option, fallback="") or generate()
    text = CONFIG_HEADER + "".join(
        f"\n[{section}]\n" + "".join(f"{option} = {value}\n" for option, value in options.items())
        for section, options in sections.items()
    )
    if path.exists() and path.read_text() == text:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = staging(path)
    partial.write_text(text)
    partial.chmod(0o600)
    os.replace(partial, path)


def _write_ahead_log(database: Path) -> None:
    """SQLite's write-ahead log on the home's database (kept in the file): readers (the API server, the UI, every
    task's heartbeat reads) no longer block the scheduler's writes, nor its writes them."""
    with contextlib.closing(sqlite3.connect(database)) as connection:
        connection.execute("PRAGMA journal_mode=WAL")


def _prepare_database(config: ClusterConfig, airflow: str, env: dict[str, str]) -> None:
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
        _write_ahead_log(database)
    else:
        clear_staging(database)
        partial = staging(database)
        shutil.copyfile(_template(airflow, env), partial)
        _write_ahead_log(partial)
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
    if config.postgres.enabled and config.airflow.db_url == embedded_postgres_url(config.postgres.port, "airflow"):
        return postgres.server(config)
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
    client = ["-h", postgres.HOST, "-p", str(server.port), "-U", postgres.ROLE]
    if not dump.exists():
        with filling(dump):
            if not dump.exists():
                _migrate(airflow, env, url, cwd=cwd)
                partial = staging(dump)
                _run([str(bins / "pg_dump"), *client, "--no-owner", "--no-privileges", "-f", str(partial), "airflow"])
                os.replace(partial, dump)
                return
    # One transaction: a restore cut short leaves the database empty, as it was.
    _run([str(bins / "psql"), *client, "-X", "-q", "-v", "ON_ERROR_STOP=1", "--single-transaction", "-d", "airflow",
          "-f", str(dump)])  # fmt: skip


def _run(argv: list[str]) -> None:
    result = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
    if result.returncode != 0:
        raise ComponentError(f"{Path(argv[0]).name} failed:\n{result.stdout}{result.stderr}")


def _command() -> str:
    """The venv's `airflow` command."""
    airflow = shutil.which("airflow", path=str(Path(sys.executable).parent))
    if airflow is None:
        raise ComponentError("the `airflow` command is not installed in this environment: run `make install`")
    return airflow


def prepare(config: ClusterConfig, dags_folder: Path | None = None) -> tuple[str, dict[str, str]]:
    """The Airflow home ready for any `airflow` command, without starting anything: the admin password, the
    `airflow.cfg`, the database at this Airflow version. Returns the `airflow` command and its environment."""
    airflow = _command()
    if config.airflow.user_dags is not None and not config.airflow.user_dags.is_dir():
        raise ConfigError(f"airflow.user.dags.folder: {config.airflow.user_dags} is not a folder")
    # One preparation at a time (`venice up` beside `venice airflow` on a fresh home): each would write its own
    # secrets into airflow.cfg, and components started with another's would refuse each other's tokens.
    with filling(home(config) / "airflow.cfg"):
        password(config)
        stores_folder(config).mkdir(parents=True, exist_ok=True)  # a bundle's folder must exist
        _write_config(config, dags_folder)
        env = environment(config, dags_folder)
        _prepare_database(config, airflow, env)
    return airflow, env


def run_cli(config: ClusterConfig, args: list[str]) -> int:
    """Airflow's own CLI (`airflow ARGS...`) against the platform's Airflow, in the components' environment and
    the caller's directory and terminal; returns its exit status (128 + N when signal N ended it, as a shell
    says)."""
    airflow, env = prepare(config)
    code = subprocess.run([airflow, *args], env=env).returncode
    return code if code >= 0 else 128 - code


def start(config: ClusterConfig, dags_folder: Path | None = None) -> str:
    """Start the components not running (the project's dags/ unless another folder is given, as benchmarks do),
    and wait until the API server answers with a healthy scheduler (and triggerer, when there is one) and every
    Celery worker started is ready. If that fails, every component is stopped."""
    procs = processes(config)
    if all(proc.pid() is not None for proc in procs):
        return f"airflow is already running (pids {_pid_list(config)}) on {base_url(config)}"
    cfg = home(config) / "airflow.cfg"
    before = cfg.read_text() if cfg.exists() else None
    airflow, env = prepare(config, dags_folder)
    running = [proc.name for proc in procs if proc.pid() is not None]
    if running and cfg.read_text() != before:  # e.g. a new version of the platform, with another bundle list
        raise ComponentError(
            f"Airflow's settings changed since {', '.join(running)} started: they would not see the new ones "
            "(`venice down`, then `venice up`)"
        )
    if not running and config.airflow.db_url is None:
        _write_ahead_log(home(config) / DB_FILE)  # a home made before the platform used SQLite's write-ahead log
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    started: dict[str, int] = {}  # the Celery workers this call starts: where their start-up lines begin
    # The scheduler last, once the API server answers: at its start it resets the tasks a crashed scheduler was
    # running and queues them again at once, and a task whose process cannot reach the execution API fails (three
    # tries in a few seconds, on a busy machine, while the API server was still importing).
    # The store dag-processor once the other has registered the bundles in the database: each registers every
    # bundle at its start, and two inserting the first rows at once fail one of them on the rows' unique names.
    for index, (name, proc) in enumerate(zip(components(config), procs, strict=True)):
        if name == STORE_DAG_PROCESSOR:
            _wait(config, procs[:index], deadline, _bundles_registered)
        if name == "scheduler":
            _wait(config, procs[:index], deadline, answers)
        if proc.pid() is None:
            if _is_worker(name):
                started[proc.name] = _log_size(proc)
            command = [airflow, *_component_command(config, name)]
            if config.airflow.db_url is not None:  # started again when it exits: `keepalive`
                command = [sys.executable, "-m", "venice_core.embedded.keepalive", "--", *command]
            proc.start(command, env=_component_env(name, env), cwd=home(config))
    _wait(config, procs, deadline, lambda c: _ready(c, started))
    return f"airflow started (pids {_pid_list(config)}) on {base_url(config)} (user {USER})"


def _ready(config: ClusterConfig, started: dict[str, int]) -> bool:
    """A healthy scheduler (and triggerer, when the config runs one), and each Celery worker in `started` (by name,
    with the size of its log before it started) has logged that it is ready to take tasks."""
    report = health(config)
    if not is_healthy(config, report) or (config.airflow.triggerer and not triggerer_healthy(config, report)):
        return False
    return all(_worker_ready(proc, started[proc.name]) for proc in celery_workers(config) if proc.name in started)


def _log_size(proc: ManagedProcess) -> int:
    try:
        return proc.log_file.stat().st_size
    except OSError:
        return 0


_READY = re.compile(rb"\S@\S+ ready\.")  # Celery's `<node>@<host> ready.`, in a structured log line


def _worker_ready(proc: ManagedProcess, offset: int) -> bool:
    """The worker logged Celery's `<node> ready.` since `offset` of its log."""
    try:
        with open(proc.log_file, "rb") as log:
            log.seek(offset)
            return any(_READY.search(line) for line in log)
    except OSError:
        return False


def _bundles_registered(config: ClusterConfig) -> bool:
    """Every DAG bundle has its row in Airflow's database (read-only, and quietly false while it has no table)."""
    wanted = {bundle["name"] for bundle in json.loads(_bundles(config))}
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


def _wait(
    config: ClusterConfig, procs: list[ManagedProcess], deadline: float, ready: Callable[[ClusterConfig], bool]
) -> None:
    """Until `ready` holds; if one of `procs` (the components started) dies or the deadline passes, stop every
    component and raise."""
    while not ready(config):
        dead = next((proc for proc in procs if proc.pid() is None), None)
        if dead is not None or time.monotonic() > deadline:
            stop(config)
            if dead is not None:
                raise ComponentError(
                    f"airflow's {dead.name} exited during start-up; last lines of {dead.log_file}:\n{dead.log_tail()}"
                )
            raise ComponentError(f"airflow did not become healthy within {START_TIMEOUT_SECONDS:.0f}s")
        time.sleep(0.5)


def _pid_list(config: ClusterConfig) -> str:
    return ", ".join(map(str, pids(config)))


# How long a component may take to exit on SIGTERM before it is killed. The scheduler, and a Celery worker, waits
# for its running tasks. The dag-processor keeps nothing (a parse cut short is done again at the next start), and
# one SIGTERMed mid-parse was seen to ignore the signal until killed: the whole 60 s.
STOP_TIMEOUT_SECONDS = {"dag-processor": 10.0, STORE_DAG_PROCESSOR: 10.0}
DEFAULT_STOP_TIMEOUT_SECONDS = 60.0


def _all_processes(config: ClusterConfig) -> list[ManagedProcess]:
    """The config's components, and every other Airflow process with a pid file in the run dir: a Celery worker a
    smaller `airflow.celery.workers` no longer names, a triggerer turned off, an `airflow standalone` an earlier
    version started (`airflow.pid`)."""
    procs = {proc.name: proc for proc in processes(config)}
    for pid_file in sorted(config.run_dir.glob("airflow*.pid")):
        name = pid_file.name.removesuffix(".pid")
        if name == "airflow" or name.startswith("airflow-"):
            procs.setdefault(name, ManagedProcess(name, config.run_dir))
    return list(procs.values())


def stop(config: ClusterConfig) -> bool:
    """Stop every Airflow process at once (`_all_processes`). False if none ran."""
    procs = _all_processes(config)
    with ThreadPoolExecutor(len(procs)) as pool:
        stopped = pool.map(
            lambda proc: proc.stop(
                timeout=STOP_TIMEOUT_SECONDS.get(proc.name.removeprefix("airflow-"), DEFAULT_STOP_TIMEOUT_SECONDS)
            ),
            procs,
        )
        return any(list(stopped))


def kill(config: ClusterConfig) -> None:
    """SIGKILL every component and its task processes, as a crash would: for tests of recovery."""
    for proc in _all_processes(config):
        proc.kill()
