"""The embedded Airflow's components by name (the API server, scheduler, dag-processors, triggerer and Celery
workers) and their managed processes."""

from __future__ import annotations

import os
import socket

from venice_core.config import ClusterConfig
from venice_core.embedded.process import ManagedProcess

# The components, in start order: the API server takes longest to start (it builds every route's models). Two
# dag-processors, each for its bundles: the stores' generated files, parsed on request only (see STORE_SETTINGS),
# and the rest (the platform's dags/, the users' own folder), parsed as Airflow does by default.
STORE_DAG_PROCESSOR = "store-dag-processor"
COMPONENTS = ("api-server", "dag-processor", STORE_DAG_PROCESSOR, "scheduler")
CELERY = "CeleryExecutor"
TRIGGERER = "triggerer"
CELERY_WORKER = "celery-worker"  # worker n: the component `celery-worker-<n>`
CELERY_CONCURRENCY = 2  # task slots per worker (two workers: the four of `[core] parallelism`)
# The Celery workers' tasks name their worker as their host (`venice-worker-<n>@<host>`): a task instance's
# `hostname` says which worker ran each try. The callable reads the worker's name from its environment.
ENV_WORKER = "VENICE_AIRFLOW_WORKER"
HOSTNAME_CALLABLE = "venice_core.embedded.airflow.component_processes.worker_hostname"


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
    return [proc for name, proc in zip(components(config), processes(config), strict=True) if is_worker(name)]


def triggerer(config: ClusterConfig) -> ManagedProcess:
    return ManagedProcess(f"airflow-{TRIGGERER}", config.run_dir)


def is_worker(name: str) -> bool:
    return name.startswith(f"{CELERY_WORKER}-")


def pids(config: ClusterConfig) -> list[int]:
    """The pids of the components running."""
    return [pid for pid in (proc.pid() for proc in processes(config)) if pid is not None]
