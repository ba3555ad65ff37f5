"""The embedded Airflow: its components started directly (`airflow api-server`, `scheduler`, `dag-processor`;
LocalExecutor on SQLite), each a managed process of its own, with the project's dags/ and plugins/, bound to
127.0.0.1, parallelism small enough for two cores. No triggerer: nothing the project runs defers (sensors
reschedule, and Airflow 3.3's human-in-the-loop tasks wait in `awaiting_input` without one).

Not `airflow standalone`, which costs a parent process importing Airflow (and a triggerer) and creates the
database before it starts anything. The database is created once per Airflow version, as a template in the cache
(`$VENICE_CACHE_DIR/airflow-db/`), and copied into a new Airflow home; a home's database from another Airflow
version is migrated in place first."""

from __future__ import annotations

import base64
import importlib.metadata
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from venice_core.config import ClusterConfig, process_env
from venice_core.embedded.maven import cache_dir
from venice_core.embedded.process import ManagedProcess
from venice_core.errors import ComponentError
from venice_core.jobs.spark_spec import DEFAULT_MASTER

PROJECT_ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_SECONDS = 240.0
USER = "admin"
# The components, in start order: the API server takes longest to start (it builds every route's models).
COMPONENTS = ("api-server", "scheduler", "dag-processor")
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


def _sqlite_url(path: Path) -> str:
    return f"sqlite:///{path}"


def environment(config: ClusterConfig, dags_folder: Path | None = None) -> dict[str, str]:
    url = base_url(config)
    env = process_env(config)
    env.update(
        {
            "AIRFLOW_HOME": str(home(config)),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": _sqlite_url(home(config) / DB_FILE),
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__AUTH_MANAGER": "airflow.api_fastapi.auth.managers.simple.simple_auth_manager."
            "SimpleAuthManager",
            "AIRFLOW__CORE__DAGS_FOLDER": str(dags_folder or PROJECT_ROOT / "dags"),
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(PROJECT_ROOT / "plugins"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
            "AIRFLOW__CORE__PARALLELISM": "4",
            "AIRFLOW__CORE__MAX_ACTIVE_TASKS_PER_DAG": "4",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{USER}:admin",
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(config.airflow_port),
            # The log servers of the workers and the triggerer, next to the API's port: Airflow's defaults (8793,
            # 8794) would collide between two platforms on one machine.
            "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(config.airflow_port + 1),
            "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(config.airflow_port + 2),
            "AIRFLOW__API__BASE_URL": url,
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{url}/execution/",
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
            # Parsing builds every store's DAG: every 20 s, not continuously. A push to a store whose DAG is not
            # there yet asks for a parse at once (`AirflowApi.request_parse`).
            "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "20",
            # The plugin (and the rollout module it imports) is loaded before the scheduler forks its executor's
            # workers, so a task process starts with it imported instead of importing it again.
            "AIRFLOW__CORE__LAZY_LOAD_PLUGINS": "False",
            "AIRFLOW__SCHEDULER__TASK_QUEUED_TIMEOUT": "600",
            # The scheduler sleeps this long after a loop that queued nothing. Each loop moves a failure one task
            # further down (upstream_failed) and notices finished tasks: at 1 s, a 29-step rollout takes ~26 s to
            # end after a failed step, and every dependent task waits up to 1 s to start.
            "AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME": "0.2",
            # After a crash, tasks the dead scheduler was running are reset and run again within 20 s (not 300 s).
            "AIRFLOW__SCHEDULER__ORPHANED_TASKS_CHECK_INTERVAL": "20",
            "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": DEFAULT_MASTER}),
            "PYSPARK_PYTHON": sys.executable,
            "PATH": f"{Path(sys.executable).parent}:{env.get('PATH', '')}",
        }
    )
    return env


def is_healthy(config: ClusterConfig) -> bool:
    try:
        with urllib.request.urlopen(f"{base_url(config)}/api/v2/monitor/health", timeout=3) as response:
            body = json.load(response)
        return body.get("scheduler", {}).get("status") == "healthy"
    except (urllib.error.URLError, OSError, ValueError):
        return False


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
    """An empty database of this Airflow version, migrated once into the cache (atomically: two starts at once
    each migrate their own and the last rename wins)."""
    template = cache_dir() / "airflow-db" / f"airflow-{_airflow_version()}.db"
    if not template.exists():
        template.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=template.parent) as scratch:
            database = Path(scratch) / DB_FILE
            _migrate(airflow, {**env, "AIRFLOW_HOME": scratch}, database)
            os.replace(database, template)
    return template


def _write_config(config: ClusterConfig) -> None:
    """The home's `airflow.cfg`, once: the secrets every component must share (the Fernet key, the API's secret
    key, the JWT secret the scheduler signs task tokens with). Everything else is Airflow's default or set by the
    environment. Airflow writes one itself when there is none, but each component would race to write its own."""
    path = home(config) / "airflow.cfg"
    if path.exists():
        return
    fernet_key = base64.urlsafe_b64encode(secrets.token_bytes(32)).decode()
    text = (
        f"[core]\nfernet_key = {fernet_key}\n\n[api]\nsecret_key = {secrets.token_urlsafe(16)}\n\n"
        f"[api_auth]\njwt_secret = {secrets.token_urlsafe(16)}\n"
    )
    partial = path.with_name("airflow.cfg.partial")
    partial.write_text(text)
    partial.chmod(0o600)
    os.replace(partial, path)


def _prepare_database(config: ClusterConfig, airflow: str, env: dict[str, str]) -> None:
    """The home's database at this Airflow version: a copy of the template when there is none, migrated when a
    stamp beside it names another version (or none)."""
    database = home(config) / DB_FILE
    stamp = database.with_name(f"{DB_FILE}.version")
    version = _airflow_version()
    if database.exists() and stamp.exists() and stamp.read_text() == version:
        return
    if database.exists():
        _migrate(airflow, env, database)
    else:
        partial = database.with_name(f"{DB_FILE}.partial")
        shutil.copyfile(_template(airflow, env), partial)
        os.replace(partial, database)
    stamp.write_text(version)


def start(config: ClusterConfig, dags_folder: Path | None = None) -> str:
    """Start the components not running (the project's dags/ unless another folder is given, as benchmarks do),
    and wait until the API server answers with a healthy scheduler. If that fails, every component is stopped."""
    procs = processes(config)
    if all(proc.pid() is not None for proc in procs):
        return f"airflow is already running (pids {_pid_list(config)}) on {base_url(config)}"
    airflow = shutil.which("airflow", path=str(Path(sys.executable).parent))
    if airflow is None:
        raise ComponentError("the `airflow` command is not installed in this environment: run `make install`")
    password(config)
    _write_config(config)
    env = environment(config, dags_folder)
    _prepare_database(config, airflow, env)
    for name, proc in zip(COMPONENTS, procs, strict=True):
        if proc.pid() is None:
            proc.start([airflow, name], env=env, cwd=home(config))
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while not is_healthy(config):
        dead = next((proc for proc in procs if proc.pid() is None), None)
        if dead is not None or time.monotonic() > deadline:
            stop(config)
            if dead is not None:
                raise ComponentError(
                    f"airflow's {dead.name} exited during start-up; last lines of {dead.log_file}:\n{dead.log_tail()}"
                )
            raise ComponentError(f"airflow did not become healthy within {START_TIMEOUT_SECONDS:.0f}s")
        time.sleep(0.5)
    return f"airflow started (pids {_pid_list(config)}) on {base_url(config)} (user {USER})"


def _pid_list(config: ClusterConfig) -> str:
    return ", ".join(map(str, pids(config)))


# How long a component may take to exit on SIGTERM before it is killed. The scheduler waits for its running tasks.
# The dag-processor keeps nothing (a parse cut short is done again at the next start), and one SIGTERMed mid-parse
# was seen to ignore the signal until killed: the whole 60 s.
STOP_TIMEOUT_SECONDS = {"dag-processor": 10.0}
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


class AirflowUnreachable(ComponentError):
    pass


class AirflowApi:
    """The few calls of Airflow's REST API (v2) the CLI needs: trigger a DAG run and follow it."""

    def __init__(self, config: ClusterConfig) -> None:
        self.url = base_url(config)
        self._credentials = json.dumps({"username": USER, "password": password(config)}).encode()
        self.headers: dict[str, str] = {}
        self._authenticate()

    def _authenticate(self) -> None:
        token = self._call("POST", "/auth/token", self._credentials, authorised=False)["access_token"]
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def _call(
        self, method: str, path: str, body: bytes | None = None, authorised: bool = True, retry: bool = True
    ) -> dict:
        headers = self.headers if authorised else {"Content-Type": "application/json"}
        request = urllib.request.Request(f"{self.url}{path}", data=body, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                payload = response.read()
                return json.loads(payload) if payload.strip() else {}
        except urllib.error.HTTPError as exc:
            if exc.code == 401 and authorised and retry:  # the token expired: sign in again, once
                self._authenticate()
                return self._call(method, path, body, retry=False)
            raise ComponentError(f"Airflow answered {exc.code} to {method} {path}: {exc.read()[:300]!r}") from None
        except (urllib.error.URLError, OSError) as exc:
            raise AirflowUnreachable(f"Airflow at {self.url} is unreachable: {exc}") from None

    def has_dag(self, dag_id: str) -> bool:
        try:
            self._call("GET", f"/api/v2/dags/{dag_id}")
            return True
        except ComponentError:
            return False

    def request_parse(self, dag_id_prefix: str) -> bool:
        """Ask the dag-processor to parse the DAG file now (a new store's DAG then appears within seconds, not at
        the next periodic parse). The request names the file by a token of one of its known DAGs: False when the
        file has none yet."""
        path = f"/api/v2/dags?dag_id_pattern={urllib.parse.quote(dag_id_prefix)}&limit=1"
        dags = self._call("GET", path)["dags"]
        if not dags:
            return False
        self._call("PUT", f"/api/v2/parseDagFile/{dags[0]['file_token']}")
        return True

    def trigger(self, dag_id: str, conf: dict) -> str:
        body = json.dumps({"logical_date": None, "conf": conf}).encode()
        return self._call("POST", f"/api/v2/dags/{dag_id}/dagRuns", body)["dag_run_id"]

    def run_state(self, dag_id: str, run_id: str) -> str:
        return self._call("GET", f"/api/v2/dags/{dag_id}/dagRuns/{urllib.parse.quote(run_id)}")["state"]

    def run(self, dag_id: str, run_id: str) -> dict:
        return self._call("GET", f"/api/v2/dags/{dag_id}/dagRuns/{urllib.parse.quote(run_id)}")

    def latest_run(self, dag_id: str) -> dict | None:
        runs = self._call("GET", f"/api/v2/dags/{dag_id}/dagRuns?order_by=-run_after&limit=1")["dag_runs"]
        return runs[0] if runs else None

    def active_runs(self, dag_id: str) -> list[str]:
        """The DAG's runs in flight (running, or queued behind one), oldest first."""
        path = f"/api/v2/dags/{dag_id}/dagRuns?state=queued&state=running&order_by=run_after&limit=100"
        return [run["dag_run_id"] for run in self._call("GET", path)["dag_runs"]]

    def task_instances(self, dag_id: str, run_id: str) -> list[dict]:
        path = f"/api/v2/dags/{dag_id}/dagRuns/{urllib.parse.quote(run_id)}/taskInstances?limit=200"
        return self._call("GET", path)["task_instances"]

    def task_states(self, dag_id: str, run_id: str) -> dict[str, str]:
        return {t["task_id"]: t["state"] or "none" for t in self.task_instances(dag_id, run_id)}

    def respond(self, dag_id: str, run_id: str, task_id: str, option: str) -> dict:
        """Answer a human-in-the-loop task (what a person does in the UI's Required Actions)."""
        path = f"/api/v2/dags/{dag_id}/dagRuns/{urllib.parse.quote(run_id)}/taskInstances/{task_id}/-1/hitlDetails"
        return self._call("PATCH", path, json.dumps({"chosen_options": [option], "params_input": {}}).encode())
