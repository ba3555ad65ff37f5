"""The embedded Airflow's processes: prepared (home, airflow.cfg, database), started in order and waited for until
healthy, stopped, killed; Airflow's own CLI run against them."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from venice_core.config import ClusterConfig
from venice_core.deployment.airflow import (
    PLATFORM_BUNDLE,
    STORES_BUNDLE,
    USER,
    USER_BUNDLE,
    base_url,
    home,
    password,
    stores_folder,
)
from venice_core.embedded.airflow.component_processes import (
    CELERY_CONCURRENCY,
    ENV_WORKER,
    HOSTNAME_CALLABLE,
    STORE_DAG_PROCESSOR,
    TRIGGERER,
    celery_worker_name,
    components,
    is_worker,
    pids,
    processes,
)
from venice_core.embedded.airflow.configuration import DB_FILE, STORE_SETTINGS, environment, write_config
from venice_core.embedded.airflow.database import prepare_database, write_ahead_log
from venice_core.embedded.airflow.health import answers, bundles_registered, log_size, ready
from venice_core.embedded.process import ManagedProcess, host_of
from venice_core.errors import ComponentError, ConfigError
from venice_core.host.cache import filling
from venice_core.utils.waiting import poll_until

START_TIMEOUT_SECONDS = 240.0


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
    if is_worker(name):
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
    if is_worker(name):
        number = int(name.rsplit("-", 1)[1])
        return {**env, ENV_WORKER: celery_worker_name(number), "AIRFLOW__CORE__HOSTNAME_CALLABLE": HOSTNAME_CALLABLE}
    if name != STORE_DAG_PROCESSOR:
        return env
    return {**env, **{f"AIRFLOW__{s.upper()}__{o.upper()}": v for (s, o), v in STORE_SETTINGS.items()}}


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
        write_config(config, dags_folder)
        env = environment(config, dags_folder)
        prepare_database(config, airflow, env)
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
        write_ahead_log(home(config) / DB_FILE)  # a home made before the platform used SQLite's write-ahead log
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    started: dict[str, int] = {}  # the Celery workers this call starts: where their start-up lines begin
    # The scheduler last, once the API server answers: at its start it resets the tasks a crashed scheduler was
    # running and queues them again at once, and a task whose process cannot reach the execution API fails (three
    # tries in a few seconds, on a busy machine, while the API server was still importing).
    # The store dag-processor once the other has registered the bundles in the database: each registers every
    # bundle at its start, and two inserting the first rows at once fail one of them on the rows' unique names.
    for index, (name, proc) in enumerate(zip(components(config), procs, strict=True)):
        if name == STORE_DAG_PROCESSOR:
            _wait(config, procs[:index], deadline, bundles_registered)
        if name == "scheduler":
            _wait(config, procs[:index], deadline, answers)
        if proc.pid() is None:
            if is_worker(name):
                started[proc.name] = log_size(proc)
            command = [airflow, *_component_command(config, name)]
            if config.airflow.db_url is not None:  # started again when it exits: `keepalive`
                command = [sys.executable, "-m", "venice_core.embedded.keepalive", "--", *command]
            proc.start(command, env=_component_env(name, env), cwd=home(config), host=host_of(config, proc.name))
    _wait(config, procs, deadline, lambda c: ready(c, started))
    return f"airflow started (pids {_pid_list(config)}) on {base_url(config)} (user {USER})"


def _wait(
    config: ClusterConfig, procs: list[ManagedProcess], deadline: float, ready: Callable[[ClusterConfig], bool]
) -> None:
    """Until `ready` holds; if one of `procs` (the components started) dies or the deadline passes, stop every
    component and raise."""

    def started() -> bool:
        if ready(config):
            return True
        dead = next((proc for proc in procs if proc.pid() is None), None)
        if dead is not None:
            stop(config)
            raise ComponentError(
                f"airflow's {dead.name} exited during start-up; last lines of {dead.log_file}:\n{dead.log_tail()}"
            )
        return False

    if not poll_until(started, timeout=max(0.0, deadline - time.monotonic()), interval=0.5):
        stop(config)
        raise ComponentError(f"airflow did not become healthy within {START_TIMEOUT_SECONDS:.0f}s")


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
