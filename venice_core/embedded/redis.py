"""The embedded Redis: Debian's `redis-server`, run by `venice up` when `redis.embedded.enabled`, the broker of
Airflow's CeleryExecutor in the cluster profile.

On its host's address only (the loopback, unless it runs on a host of its own), in the foreground as a managed
process (`run/redis.{pid,log}`), its working dir `<home>/redis`.
Nothing is persisted (no snapshot, no append-only file): the broker holds only the tasks the scheduler sent that no
worker has taken yet, and the scheduler sends one lost with a restart again (`[scheduler] task_queued_timeout`).
"""

from __future__ import annotations

import socket

from venice_core.config import ClusterConfig
from venice_core.embedded.process import ManagedProcess, host_of
from venice_core.errors import ComponentError
from venice_core.host.programs import require_program

START_TIMEOUT_SECONDS = 30.0
INSTALL_HINT = "Redis (Debian: apt-get install redis-server; scripts/install-system-packages.sh --with-cluster-deps)"


def process(config: ClusterConfig) -> ManagedProcess:
    return ManagedProcess("redis", config.run_dir)


def address(config: ClusterConfig) -> str:
    return f"{config.redis.host}:{config.redis.port}"


def ping(host: str, port: int, timeout: float = 1.0) -> bool:
    """Redis at `host:port` answers PING."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(b"*1\r\n$4\r\nPING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


def is_healthy(config: ClusterConfig) -> bool:
    return ping(config.redis.host, config.redis.port)


def _port_open(host: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def command(config: ClusterConfig, server: str = "redis-server") -> list[str]:
    """The server's command line: every setting on it, no config file."""
    return [
        server,
        # Protected mode answers only the loopback while Redis has no password: on a host of its own, its clients are
        # the other hosts (the subnet, which nothing outside this machine reaches).
        *("--bind", config.redis.host, "--port", str(config.redis.port)),
        *("--protected-mode", "no" if config.hosts.enabled else "yes"),
        *("--dir", str(config.data_dir / "redis"), "--save", "", "--appendonly", "no"),
        *("--daemonize", "no", "--logfile", ""),  # its log on stdout: the managed process's log file
    ]


def start(config: ClusterConfig) -> str:
    """Start the server and wait until it answers PING. Returns a line for the user."""
    proc = process(config)
    pid = proc.pid()
    where = address(config)
    if pid is not None:
        return f"redis is already running (pid {pid}) on {where}"
    server = require_program("redis-server", INSTALL_HINT)
    host = host_of(config, proc.name)
    if host is None and _port_open(config.redis.host, config.redis.port):  # a host of its own has no other process
        raise ComponentError(f"port {where} is taken by another process: stop it or set redis.embedded.port")
    (config.data_dir / "redis").mkdir(parents=True, exist_ok=True)
    proc.start(command(config, server), cwd=config.data_dir / "redis", host=host)
    proc.wait_until_healthy("redis", lambda: is_healthy(config), START_TIMEOUT_SECONDS, 0.05)
    return f"redis started (pid {proc.pid()}) on {where}"


def stop(config: ClusterConfig) -> bool:
    return process(config).stop(timeout=30.0)


def kill(config: ClusterConfig) -> None:
    """SIGKILL the server, as a crash would: for tests of recovery."""
    process(config).kill()
