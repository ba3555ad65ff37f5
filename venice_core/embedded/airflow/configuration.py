"""The embedded Airflow's settings: the home's airflow.cfg (its settings and the secrets generated once), the DAG
bundles, each component's environment, its database's URL."""

from __future__ import annotations

import base64
import json
import secrets
import sys
from collections.abc import Callable
from pathlib import Path

from venice_core.config import ENV_CONFIG, ClusterConfig, libpq_environment, process_env
from venice_core.deployment.airflow import (
    PLATFORM_BUNDLE,
    PLATFORM_SECTION,
    SQLITE_BUSY_TIMEOUT_SECONDS,
    STORES_BUNDLE,
    USER,
    USER_BUNDLE,
    base_url,
    home,
    read_config,
    stores_folder,
)
from venice_core.embedded import redis
from venice_core.embedded.airflow.component_processes import CELERY, CELERY_CONCURRENCY
from venice_core.security import principals
from venice_core.security.files import write_private

PROJECT_ROOT = Path(__file__).resolve().parents[3]
DB_FILE = "airflow.db"


def sqlite_url(path: Path) -> str:
    return f"sqlite:///{path}?timeout={SQLITE_BUSY_TIMEOUT_SECONDS}"


BUNDLES_SETTING = ("dag_processor", "dag_bundle_config_list")  # the DAG bundles: `bundles`


API_SERVER_HOST = "airflow-api-server"  # the API server's process and host name


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
        **({("database", "sql_alchemy_conn_async"): async_url} if (async_url := async_database_url(config)) else {}),
        ("api", "host"): config.hosts.address(API_SERVER_HOST),
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
        BUNDLES_SETTING: bundles(config),
        ("scheduler", "task_queued_timeout"): "600",
        # The scheduler sleeps this long after a loop that queued nothing. Each loop moves a failure one task
        # further down (upstream_failed) and notices finished tasks: at 1 s (Airflow's default), a 29-step rollout
        # took ~26 s to end after a failed step. At 0.2 s an idle scheduler kept 15% of a core busy; at 0.5 s a
        # 50-task rollout took as long (50-53 s) on 20% less CPU (49-55 against 65-67 CPU-seconds, measured).
        ("scheduler", "scheduler_idle_sleep_time"): "0.5",
        # After a crash, tasks the dead scheduler was running are reset and run again within 20 s (not 300 s)
        # once its heartbeat is older than the threshold below.
        ("scheduler", "orphaned_tasks_check_interval"): "20",
        # A scheduler whose heartbeat is older than this is taken for dead: the orphan check marks its job failed
        # and resets its tasks, and a scheduler stalled that long on a saturated machine did that to itself (its
        # running Spark step reset mid-push, a try lost). Airflow's default is 30 s.
        ("scheduler", "scheduler_health_check_threshold"): "60",
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
        ("celery", "broker_url"): redis.broker_url(config),  # with its password on a secured platform
        # Secured: TLS to the embedded Redis, the admin's certificate presented (Airflow's own settings for it).
        **({("celery", "ssl_active"): "True"} if (tls := redis.client_tls_files(config)) else {}),
        **{("celery", option): path for option, path in tls.items()},
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
    return config.airflow.db_url or sqlite_url(home(config) / DB_FILE)


# libpq's TLS files, which asyncpg (Airflow's async engine) takes from the environment alone: SQLAlchemy hands a URL's
# query to `asyncpg.connect` as keywords, and it has none for them.
ASYNCPG_TLS_FILES = ("sslrootcert", "sslcert", "sslkey")


def async_database_url(config: ClusterConfig) -> str | None:
    """Airflow's async engine's URL when its database is reached with libpq's TLS parameters (the secured embedded
    PostgreSQL's): asyncpg's scheme, its own keywords for the password file and the TLS mode, the files in
    `async_database_env`. None otherwise: Airflow derives it from the sync URL."""
    from sqlalchemy.engine import make_url

    url = make_url(database_url(config))
    if url.get_backend_name() != "postgresql" or "sslmode" not in url.query:
        return None
    query = {"ssl": url.query["sslmode"], **({"passfile": url.query["passfile"]} if "passfile" in url.query else {})}
    async_url = url.set(drivername="postgresql+asyncpg", query=query)
    return async_url.render_as_string(hide_password=False)


def async_database_env(config: ClusterConfig) -> dict[str, str]:
    """The environment that gives asyncpg the TLS files of `async_database_url`."""
    from sqlalchemy.engine import make_url

    query = make_url(database_url(config)).query
    if async_database_url(config) is None:
        return {}
    return libpq_environment({key: str(query[key]) for key in ASYNCPG_TLS_FILES if key in query})


LOCAL_BUNDLE = "airflow.dag_processing.bundles.local.LocalDagBundle"


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


def bundles(config: ClusterConfig) -> str:
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
    env = {**process_env(config), **principals.client_env(config, principals.ADMIN)}  # its tasks run the controller
    env.update(async_database_env(config))
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


# The secrets every component must share, generated once and kept in airflow.cfg: the Fernet key, the API's secret
# key, the JWT secret the scheduler signs task tokens with.
SECRETS: dict[tuple[str, str], Callable[[], str]] = {
    ("core", "fernet_key"): lambda: base64.urlsafe_b64encode(secrets.token_bytes(32)).decode(),
    ("api", "secret_key"): lambda: secrets.token_urlsafe(16),
    ("api_auth", "jwt_secret"): lambda: secrets.token_urlsafe(16),
}


CONFIG_HEADER = (
    "# Written by the platform (venice_core/embedded/airflow/) at each Airflow start and `venice airflow`:\n"
    "# an edit here is overwritten. The secrets are generated once and kept.\n"
)


def write_config(config: ClusterConfig, dags_folder: Path | None = None) -> None:
    """The home's `airflow.cfg`: the platform's `settings` and the `SECRETS`, kept from the file there (one an
    earlier start or Airflow itself wrote), else new. Written only when it changes, and atomically: a component
    reading it meanwhile sees the old file or the new, and without one each component would race to write its
    own."""
    path = home(config) / "airflow.cfg"
    current = read_config(path)
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
    write_private(path, text.encode())  # its secrets (the Fernet key, a broker's password): 0600 from the first byte
