"""The embedded Redis: Debian's `redis-server`, run by `venice up` when `redis.embedded.enabled`, the broker of
Airflow's CeleryExecutor in the cluster profile.

On 127.0.0.1 only, in the foreground as a managed process (`run/redis.{pid,log}`), its working dir `<home>/redis`.
Nothing is persisted (no snapshot, no append-only file): the broker holds only the tasks the scheduler sent that no
worker has taken yet, and the scheduler sends one lost with a restart again (`[scheduler] task_queued_timeout`).
"""

from __future__ import annotations

import socket

from venice_core.config import ClusterConfig
from venice_core.embedded.process import ManagedProcess
from venice_core.errors import ComponentError
from venice_core.host.programs import require_program

HOST = "127.0.0.1"
START_TIMEOUT_SECONDS = 30.0
INSTALL_HINT = "Redis (Debian: apt-get install redis-server; scripts/install-system-packages.sh --with-cluster-deps)"


def process(config: ClusterConfig) -> ManagedProcess:
    return ManagedProcess("redis", config.run_dir)


def ping(port: int, timeout: float = 1.0) -> bool:
    """Redis on `port` answers PING."""
    try:
        with socket.create_connection((HOST, port), timeout=timeout) as sock:
            sock.sendall(b"*1\r\n$4\r\nPING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


def is_healthy(config: ClusterConfig) -> bool:
    return ping(config.redis.port)


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((HOST, port)) == 0


def command(config: ClusterConfig, server: str = "redis-server") -> list[str]:
    """The server's command line: every setting on it, no config file."""
    return [
        server,
        *("--bind", HOST, "--port", str(config.redis.port), "--protected-mode", "yes"),
        *("--dir", str(config.data_dir / "redis"), "--save", "", "--appendonly", "no"),
        *("--daemonize", "no", "--logfile", ""),  # its log on stdout: the managed process's log file
    ]


def start(config: ClusterConfig) -> str:
    """Start the server and wait until it answers PING. Returns a line for the user."""
    proc = process(config)
    pid = proc.pid()
    address = f"{HOST}:{config.redis.port}"
    if pid is not None:
        return f"redis is already running (pid {pid}) on {address}"
    server = require_program("redis-server", INSTALL_HINT)
    if _port_open(config.redis.port):
        raise ComponentError(f"port {address} is taken by another process: stop it or set redis.embedded.port")
    (config.data_dir / "redis").mkdir(parents=True, exist_ok=True)
    proc.start(command(config, server), cwd=config.data_dir / "redis")
    proc.wait_until_healthy("redis", lambda: is_healthy(config), START_TIMEOUT_SECONDS, 0.05)
    return f"redis started (pid {proc.pid()}) on {address}"


def stop(config: ClusterConfig) -> bool:
    return process(config).stop(timeout=30.0)


def kill(config: ClusterConfig) -> None:
    """SIGKILL the server, as a crash would: for tests of recovery."""
    process(config).kill()
