"""The embedded Airflow: `airflow standalone` (scheduler, dag-processor, api-server, triggerer; LocalExecutor on
SQLite) with the project's dags/ and plugins/, bound to 127.0.0.1, parallelism small enough for two cores."""

from __future__ import annotations

import json
import secrets
import shutil
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from venice_core.config import ClusterConfig, process_env
from venice_core.embedded.process import ManagedProcess
from venice_core.errors import ComponentError
from venice_core.jobs.spark_spec import DEFAULT_MASTER

PROJECT_ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_SECONDS = 240.0
USER = "admin"


def process(config: ClusterConfig) -> ManagedProcess:
    return ManagedProcess("airflow", config.run_dir)


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


def environment(config: ClusterConfig, dags_folder: Path | None = None) -> dict[str, str]:
    url = base_url(config)
    env = process_env(config)
    env.update(
        {
            "AIRFLOW_HOME": str(home(config)),
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
            "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "5",
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


def start(config: ClusterConfig, dags_folder: Path | None = None) -> str:
    """Start `airflow standalone` (the project's dags/ unless another folder is given, as benchmarks do)."""
    proc = process(config)
    pid = proc.pid()
    if pid is not None:
        return f"airflow is already running (pid {pid}) on {base_url(config)}"
    airflow = shutil.which("airflow", path=str(Path(sys.executable).parent))
    if airflow is None:
        raise ComponentError("the `airflow` command is not installed in this environment: run `make install`")
    password(config)
    proc.start([airflow, "standalone"], env=environment(config, dags_folder), cwd=home(config))
    proc.wait_until_healthy("airflow", lambda: is_healthy(config), START_TIMEOUT_SECONDS, 1.0)
    return f"airflow started (pid {proc.pid()}) on {base_url(config)} (user {USER})"


def stop(config: ClusterConfig) -> bool:
    return process(config).stop(timeout=60.0)


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
                return json.load(response)
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
