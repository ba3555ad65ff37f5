"""The standalone Spark cluster `venice up` runs when `spark.standalone.workers` is more than 0: a master at
`spark.master` (spark://host:port, its web UI on `spark.standalone.ui.port`) and that many workers (worker n's UI on
the port after the master's plus n), each started from pyspark's own `bin/spark-class` (SPARK_HOME: the installed
pyspark package) as a managed process (`spark-master`, `spark-worker-<n>`: pid files and logs in the run dir), bound
to its host's address (SPARK_LOCAL_IP: the web UIs and the executors the workers start, too; the loopback unless
each runs on a host of its own, the hosts profile).

Each worker has `spark.standalone.worker.cores` cores and `.memory` for the executors of the jobs submitted to it
(`spark.submit`: every job goes to `spark.master`), its own work dir under `<data.dir>/spark/` (an application's
executor logs and the files it ships, removed a day after it finished). The master and the workers schedule and
do no work of their own: small heaps, the client compiler and the serial collector.
"""

from __future__ import annotations

import socket
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from venice_core.config import ClusterConfig, process_env
from venice_core.config.keys import SPARK_MASTER, SPARK_STANDALONE_UI_PORT, SPARK_STANDALONE_WORKERS
from venice_core.embedded.process import ManagedProcess, host_of
from venice_core.errors import ComponentError, ConfigError
from venice_core.host.programs import require_program
from venice_core.security import spark as spark_security
from venice_core.spark.python_path import spark_home
from venice_core.spark.submit import standalone
from venice_core.utils.waiting import poll_until

MASTER = "spark-master"
WORKER_PREFIX = "spark-worker-"
START_TIMEOUT_SECONDS = 120.0
DAEMON_MEMORY = "256m"
DAEMON_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
# Jobs are submitted in client mode: no REST submission server (it would listen on 6066, whatever the config).
MASTER_OPTIONS = "-Dspark.master.rest.enabled=false"
# A finished application's directories on a worker (its executors' logs, the job's py-files) are kept a day.
WORKER_OPTIONS = "-Dspark.worker.cleanup.enabled=true -Dspark.worker.cleanup.appDataTtl=86400"


def master_address(config: ClusterConfig) -> tuple[str, int]:
    address = config.spark.standalone_master
    if address is None:
        raise ConfigError(f"no standalone Spark cluster is configured ({SPARK_STANDALONE_WORKERS} is 0)")
    return address


def master_process(config: ClusterConfig) -> ManagedProcess:
    return ManagedProcess(MASTER, config.run_dir)


def worker_process(config: ClusterConfig, n: int) -> ManagedProcess:
    return ManagedProcess(f"{WORKER_PREFIX}{n}", config.run_dir)


def processes(config: ClusterConfig) -> list[ManagedProcess]:
    """The configured cluster's processes, master first (none when there is no standalone cluster)."""
    if config.spark.workers == 0:
        return []
    return [master_process(config), *(worker_process(config, n) for n in range(config.spark.workers))]


def _worker_pid_files(config: ClusterConfig) -> list[ManagedProcess]:
    """Every worker with a pid file, configured or not (the config may have fewer workers than are running)."""
    found = sorted(config.run_dir.glob(f"{WORKER_PREFIX}*.pid")) if config.run_dir.is_dir() else []
    return [ManagedProcess(f.stem, config.run_dir) for f in found]


def host_address(config: ClusterConfig, name: str) -> str:
    """Where the process `name` of the cluster listens (its host's address)."""
    return config.hosts.address(name)


def ui_url(config: ClusterConfig) -> str:
    return f"http://{master_address(config)[0]}:{config.spark.ui_port}"


def worker_ui_port(config: ClusterConfig, n: int) -> int:
    return config.spark.ui_port + 1 + n


def ports(config: ClusterConfig) -> list[int]:
    """The ports the cluster listens on that are fixed by the config (a worker's RPC port is picked at random)."""
    if config.spark.workers == 0:
        return []
    workers = range(config.spark.workers)
    return [master_address(config)[1], config.spark.ui_port, *(worker_ui_port(config, n) for n in workers)]


def spark_dir(config: ClusterConfig) -> Path:
    return config.data_dir / "spark"


def work_dir(config: ClusterConfig, n: int) -> Path:
    return spark_dir(config) / f"worker-{n}"


def master_state(config: ClusterConfig, timeout: float = 2.0) -> dict[str, Any] | None:
    """The master's state as its web UI reports it (`/json/`: workers, running and completed applications), or
    None while it does not answer."""
    return standalone.master_state(config, timeout=timeout)


def _alive(config: ClusterConfig) -> set[int]:
    """The configured workers running that the master lists ALIVE (by their UI's port: a worker started again
    registers anew, and the master lists its lost run until it notices the loss)."""
    state = master_state(config)
    if state is None:
        return set()
    listed = {
        urllib.parse.urlparse(str(worker.get("webuiaddress", ""))).port
        for worker in state.get("workers", [])
        if worker.get("state") == "ALIVE"
    }
    return {
        n
        for n in range(config.spark.workers)
        if worker_ui_port(config, n) in listed and worker_process(config, n).pid() is not None
    }


def alive_worker_numbers(config: ClusterConfig) -> set[int]:
    """Which configured workers run and are registered ALIVE with the master (none when it does not answer)."""
    return _alive(config)


def alive_workers(config: ClusterConfig) -> int:
    """How many of the configured workers run and are registered ALIVE with the master (0 when it does not
    answer): the cluster is healthy when it is `spark.standalone.workers`."""
    return len(_alive(config))


def _port_open(host: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def _spark_class() -> list[str]:
    require_program("java", "a Java 17+ runtime (Debian: apt-get install openjdk-17-jre-headless)")
    return [str(spark_home() / "bin" / "spark-class")]


def _env(config: ClusterConfig, worker: int | None = None) -> dict[str, str]:
    """A cluster process's environment: the config's (the executors a worker starts inherit it), Spark's home and
    its host's address, its logs and work dir in the data dir."""
    name = MASTER if worker is None else f"{WORKER_PREFIX}{worker}"
    env = {
        **process_env(config),
        "SPARK_HOME": str(spark_home()),
        "SPARK_LOCAL_IP": master_address(config)[0] if worker is None else host_address(config, name),
        "SPARK_LOG_DIR": str(spark_dir(config) / "logs"),
        "SPARK_DAEMON_MEMORY": DAEMON_MEMORY,
        "SPARK_DAEMON_JAVA_OPTS": DAEMON_JAVA_OPTIONS,
        "PYSPARK_PYTHON": sys.executable,
    }
    env.update(spark_security.env(config))  # a secured platform's: authenticated, encrypted RPC
    if worker is None:
        env["SPARK_MASTER_OPTS"] = MASTER_OPTIONS
    else:
        env["SPARK_WORKER_DIR"] = str(work_dir(config, worker))
        env["SPARK_WORKER_OPTS"] = WORKER_OPTIONS
    return env


def _start_master(config: ClusterConfig) -> ManagedProcess:
    host, port = master_address(config)
    ui_port = config.spark.ui_port
    on = host_of(config, MASTER)
    for taken, key in ((port, SPARK_MASTER), (ui_port, SPARK_STANDALONE_UI_PORT)):
        if on is None and _port_open(host, taken):  # a host of its own has no other process
            raise ComponentError(f"port {taken} is taken by another process: stop it or change {key}")
    argv = [*_spark_class(), "org.apache.spark.deploy.master.Master"]
    argv += ["--host", host, "--port", str(port), "--webui-port", str(ui_port)]
    proc = master_process(config)
    (spark_dir(config) / "logs").mkdir(parents=True, exist_ok=True)
    proc.start(argv, env=_env(config), cwd=spark_dir(config), host=on)
    proc.wait_until_healthy("spark master", lambda: master_state(config) is not None, START_TIMEOUT_SECONDS, 0.3)
    return proc


def _start_worker(config: ClusterConfig, n: int) -> ManagedProcess:
    cluster = config.spark
    ui_port = worker_ui_port(config, n)
    name = f"{WORKER_PREFIX}{n}"
    on, address = host_of(config, name), host_address(config, name)
    if on is None and _port_open(address, ui_port):
        raise ComponentError(
            f"port {ui_port} (spark worker {n}'s UI) is taken by another process: stop it or change "
            f"{SPARK_STANDALONE_UI_PORT}"
        )
    work = work_dir(config, n)
    work.mkdir(parents=True, exist_ok=True)
    argv = [*_spark_class(), "org.apache.spark.deploy.worker.Worker", config.spark.master, "--host", address]
    argv += ["--cores", str(cluster.worker_cores), "--memory", cluster.worker_memory]
    argv += ["--webui-port", str(ui_port), "--work-dir", str(work)]
    proc = worker_process(config, n)
    proc.start(argv, env=_env(config, n), cwd=work, host=on)
    return proc


def _wait_for_workers(config: ClusterConfig, workers: list[int], timeout: float = START_TIMEOUT_SECONDS) -> None:
    """Until every worker of `workers` is registered ALIVE; ComponentError (with the end of its log) if one exits
    first, or when `timeout` passes."""
    missing: list[int] = []

    def registered() -> bool:
        missing[:] = [n for n in workers if n not in _alive(config)]
        for n in missing:
            proc = worker_process(config, n)
            if proc.pid() is None:
                raise ComponentError(
                    f"spark worker {n} exited during start-up; last lines of {proc.log_file}:\n{proc.log_tail()}"
                )
        return not missing

    def timed_out(_: bool) -> ComponentError:
        names = ", ".join(str(n) for n in missing)
        return ComponentError(f"spark worker {names} did not register with the master within {timeout:.0f}s")

    poll_until(registered, timeout=timeout, interval=0.3, timeout_error=timed_out)


def _summary(config: ClusterConfig) -> str:
    cluster = config.spark
    count = f"{cluster.workers} worker{'s' if cluster.workers != 1 else ''}"
    return (
        f"{config.spark.master} ({count} of {cluster.worker_cores} core{'s' if cluster.worker_cores != 1 else ''}, "
        f"{cluster.worker_memory}), UI {ui_url(config)}"
    )


def start(config: ClusterConfig) -> str:
    """Start the master, then every worker not running, and wait until the master lists them all ALIVE. What this
    call started is stopped again if the cluster does not come up. Returns a line for the user."""
    master_address(config)
    master = master_process(config)
    missing = [n for n in range(config.spark.workers) if worker_process(config, n).pid() is None]
    if master.pid() is not None and not missing:
        return f"spark is already running (pid {master.pid()}) at {_summary(config)}"
    started: list[ManagedProcess] = []
    try:
        if master.pid() is None:
            started.append(_start_master(config))
        for n in missing:
            started.append(_start_worker(config, n))
        _wait_for_workers(config, missing)
    except BaseException:
        for proc in reversed(started):
            proc.stop()
        raise
    return f"spark started (master pid {master.pid()}) at {_summary(config)}"


def stop(config: ClusterConfig) -> bool:
    """Stop every worker (configured or not), then the master; their executors with them. False if none ran."""
    stopped = False
    for proc in reversed(_worker_pid_files(config)):
        stopped = proc.stop() or stopped
    return master_process(config).stop() or stopped


def kill_worker(config: ClusterConfig, n: int) -> None:
    """SIGKILL worker n and its executors, as a lost machine: for tests of recovery."""
    worker_process(config, n).kill()


def start_worker(config: ClusterConfig, n: int) -> str:
    """Start worker n (not running) and wait until the master lists it ALIVE."""
    proc = worker_process(config, n)
    if proc.pid() is not None:
        return f"spark worker {n} is already running (pid {proc.pid()})"
    try:
        _start_worker(config, n)
        _wait_for_workers(config, [n])
    except BaseException:
        proc.stop()
        raise
    return f"spark worker {n} started (pid {proc.pid()})"
