"""The embedded Airflow: its components started directly (`airflow api-server`, `scheduler`, and two
`dag-processor`s, one for the stores' generated DAG files and one for the rest; LocalExecutor on SQLite), each a
managed process of its own, with the project's dags/ and plugins/, bound to 127.0.0.1, parallelism small enough
for two cores. No triggerer: nothing the project runs defers (sensors reschedule, and Airflow 3.3's
human-in-the-loop tasks wait in `awaiting_input` without one).

Not `airflow standalone`, which costs a parent process importing Airflow (and a triggerer) and creates the
database before it starts anything. The database is created once per Airflow version, as a template in the cache
(`$VENICE_CACHE_DIR/airflow-db/`), and copied into a new Airflow home; a home's database from another Airflow
version is migrated in place first. The settings are in the home's airflow.cfg too, so that Airflow's own CLI
given AIRFLOW_HOME alone sees this same Airflow; `venice airflow` runs it in the components' environment."""

from __future__ import annotations

import base64
import configparser
import contextlib
import importlib.metadata
import json
import os
import secrets
import shutil
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

from venice_core.cache import cache_dir, clear_staging, filling, staging
from venice_core.config import ENV_CONFIG, ENV_HOME, ClusterConfig, process_env
from venice_core.embedded.process import ManagedProcess
from venice_core.errors import ComponentError, ConfigError

PROJECT_ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_SECONDS = 240.0
USER = "admin"
# The components, in start order: the API server takes longest to start (it builds every route's models). Two
# dag-processors, each for its bundles: the stores' generated files, parsed on request only (see STORE_SETTINGS),
# and the rest (the platform's dags/, the users' own folder), parsed as Airflow does by default.
STORE_DAG_PROCESSOR = "store-dag-processor"
COMPONENTS = ("api-server", "dag-processor", STORE_DAG_PROCESSOR, "scheduler")
DB_FILE = "airflow.db"


def processes(config: ClusterConfig) -> list[ManagedProcess]:
    """One managed process per component (`run/airflow-<component>.{pid,log}`)."""
    return [ManagedProcess(f"airflow-{name}", config.run_dir) for name in COMPONENTS]


def pids(config: ClusterConfig) -> list[int]:
    """The pids of the components running."""
    return [pid for pid in (proc.pid() for proc in processes(config)) if pid is not None]


def home(config: ClusterConfig) -> Path:
    return config.home / "airflow"


def base_url(config: ClusterConfig) -> str:
    return f"http://127.0.0.1:{config.airflow_port}"


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
        ("core", "executor"): "LocalExecutor",
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
        ("database", "sql_alchemy_conn"): _sqlite_url(home(config) / DB_FILE),
        ("api", "host"): "127.0.0.1",
        ("api", "port"): str(config.airflow_port),
        ("api", "base_url"): url,
        # The log servers of the workers and the triggerer, next to the API's port: Airflow's defaults (8793,
        # 8794) would collide between two platforms on one machine.
        ("logging", "worker_log_server_port"): str(config.airflow_port + 1),
        ("logging", "trigger_log_server_port"): str(config.airflow_port + 2),
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
        # The venice config, as the components get it in their environment: its file, if any, and its data dir.
        **({(PLATFORM_SECTION, ENV_CONFIG.lower()): venice[ENV_CONFIG]} if ENV_CONFIG in venice else {}),
        (PLATFORM_SECTION, ENV_HOME.lower()): str(config.home),
    }


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
        users = ["--bundle-name", USER_BUNDLE] if config.airflow_user_dags is not None else []
        return ["dag-processor", "--bundle-name", PLATFORM_BUNDLE, *users]
    if name == "scheduler":
        # No log server: it listens on every interface (Airflow has no setting for its host), and the API server
        # reads the task logs it would serve from the files the local executor's tasks write on this machine.
        return ["scheduler", "--skip-serve-logs"]
    return [name]


def _component_env(name: str, env: dict[str, str]) -> dict[str, str]:
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
    if config.airflow_user_dags is not None:
        bundles.append(
            {"name": USER_BUNDLE, "classpath": LOCAL_BUNDLE, "kwargs": {"path": str(config.airflow_user_dags)}}
        )
    return json.dumps(bundles)


def spark_connection(config: ClusterConfig) -> str:
    """Airflow's `spark_default` connection (the push job's SparkSubmitOperator's): the config's Spark master (its
    whole URL as the host), the driver in the submitting task's process (client mode, as `venice push --local`)."""
    return json.dumps({"conn_type": "spark", "host": config.spark_master, "extra": {"deploy-mode": "client"}})


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


def _health(config: ClusterConfig) -> dict | None:
    """The API server's health report, or None while it does not answer."""
    try:
        with urllib.request.urlopen(f"{base_url(config)}/api/v2/monitor/health", timeout=3) as response:
            return json.load(response)
    except (urllib.error.URLError, OSError, ValueError):
        return None


def answers(config: ClusterConfig) -> bool:
    """The API server answers (whatever the state of the other components)."""
    return _health(config) is not None


def is_healthy(config: ClusterConfig) -> bool:
    """The API server answers and reports a healthy scheduler."""
    return ((_health(config) or {}).get("scheduler") or {}).get("status") == "healthy"


def _airflow_version() -> str:
    return importlib.metadata.version("apache-airflow")


def _migrate(airflow: str, env: dict[str, str], database: Path) -> None:
    """`airflow db migrate` on one SQLite file (created if absent)."""
    env = {**env, "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": _sqlite_url(database)}
    result = subprocess.run(
        [airflow, "db", "migrate"], env=env, cwd=database.parent, capture_output=True, text=True, timeout=600
    )
    if result.returncode != 0:
        output = "\n".join((result.stdout + result.stderr).splitlines()[-20:])
        raise ComponentError(f"`airflow db migrate` failed on {database}:\n{output}")


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
    stamp beside it names another version (or none)."""
    database = home(config) / DB_FILE
    stamp = database.with_name(f"{DB_FILE}.version")
    version = _airflow_version()
    if database.exists() and stamp.exists() and stamp.read_text() == version:
        return
    if database.exists():
        if running := [p.name for p in processes(config) if p.pid() is not None]:
            raise ComponentError(
                f"Airflow's database in {home(config)} needs a migration to Airflow {version}, but "
                f"{', '.join(running)} still run on it: stop them first (`venice down`)"
            )
        _migrate(airflow, env, database)
        _write_ahead_log(database)
    else:
        clear_staging(database)
        partial = staging(database)
        shutil.copyfile(_template(airflow, env), partial)
        _write_ahead_log(partial)
        os.replace(partial, database)
    stamp.write_text(version)


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
    if config.airflow_user_dags is not None and not config.airflow_user_dags.is_dir():
        raise ConfigError(f"airflow.user.dags.folder: {config.airflow_user_dags} is not a folder")
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
    and wait until the API server answers with a healthy scheduler. If that fails, every component is stopped."""
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
    if all(proc.pid() is None for proc in procs):
        _write_ahead_log(home(config) / DB_FILE)  # a home made before the platform used SQLite's write-ahead log
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    # The scheduler last, once the API server answers: at its start it resets the tasks a crashed scheduler was
    # running and queues them again at once, and a task whose process cannot reach the execution API fails (three
    # tries in a few seconds, on a busy machine, while the API server was still importing).
    # The store dag-processor once the other has registered the bundles in the database: each registers every
    # bundle at its start, and two inserting the first rows at once fail one of them on the rows' unique names.
    for index, (name, proc) in enumerate(zip(COMPONENTS, procs, strict=True)):
        if name == STORE_DAG_PROCESSOR:
            _wait(config, procs[:index], deadline, _bundles_registered)
        if name == "scheduler":
            _wait(config, procs[:index], deadline, answers)
        if proc.pid() is None:
            proc.start([airflow, *_component_command(config, name)], env=_component_env(name, env), cwd=home(config))
    _wait(config, procs, deadline, is_healthy)
    return f"airflow started (pids {_pid_list(config)}) on {base_url(config)} (user {USER})"


def _bundles_registered(config: ClusterConfig) -> bool:
    """Every DAG bundle has its row in Airflow's database (read-only, and quietly false while it has no table)."""
    wanted = {bundle["name"] for bundle in json.loads(_bundles(config))}
    uri = f"{(home(config) / DB_FILE).as_uri()}?mode=ro"
    try:
        with contextlib.closing(sqlite3.connect(uri, uri=True, timeout=5)) as connection:
            names = {row[0] for row in connection.execute("SELECT name FROM dag_bundle")}
    except sqlite3.Error:
        return False
    return wanted <= names


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


# How long a component may take to exit on SIGTERM before it is killed. The scheduler waits for its running tasks.
# The dag-processor keeps nothing (a parse cut short is done again at the next start), and one SIGTERMed mid-parse
# was seen to ignore the signal until killed: the whole 60 s.
STOP_TIMEOUT_SECONDS = {"dag-processor": 10.0, STORE_DAG_PROCESSOR: 10.0}
DEFAULT_STOP_TIMEOUT_SECONDS = 60.0


def stop(config: ClusterConfig) -> bool:
    """Stop every component at once (and an `airflow standalone` an earlier version started). False if none ran."""
    names = [*COMPONENTS, "standalone"]
    procs = [*processes(config), ManagedProcess("airflow", config.run_dir)]
    with ThreadPoolExecutor(len(procs)) as pool:
        stopped = pool.map(
            lambda name, proc: proc.stop(timeout=STOP_TIMEOUT_SECONDS.get(name, DEFAULT_STOP_TIMEOUT_SECONDS)),
            names,
            procs,
        )
        return any(list(stopped))


def kill(config: ClusterConfig) -> None:
    """SIGKILL every component and its task processes, as a crash would: for tests of recovery."""
    for proc in processes(config):
        proc.kill()
