"""The embedded Redis: Debian's `redis-server`, run by `venice up` when `redis.embedded.enabled`, the broker of
Airflow's CeleryExecutor in the cluster profile.

On its host's address only (the loopback, unless it runs on a host of its own), in the foreground as a managed
process (`run/redis.{pid,log}`), its working dir `<home>/redis`.
On a secured platform it asks for a password (`requirepass`, in a config file of mode 0600) and speaks TLS only (no
plain port), requiring a client certificate of the platform's CA; Airflow's Celery components present the admin's.
Nothing is persisted (no snapshot, no append-only file): the broker holds only the tasks the scheduler sent that no
worker has taken yet, and the scheduler sends one lost with a restart again (`[scheduler] task_queued_timeout`).
"""

from __future__ import annotations

import socket
import ssl

from venice_core.config import ClusterConfig
from venice_core.embedded.process import ManagedProcess, host_of
from venice_core.errors import ComponentError, ConfigError
from venice_core.host.programs import require_program
from venice_core.security.files import ca_path, certificate, write_private
from venice_core.security.secrets import secret
from venice_core.security.tls import ADMIN, context_presenting

NAME = "redis"  # its process's name, its host's and its certificate's
START_TIMEOUT_SECONDS = 30.0
INSTALL_HINT = "Redis (Debian: apt-get install redis-server; scripts/install-system-packages.sh --with-cluster-deps)"


def process(config: ClusterConfig) -> ManagedProcess:
    return ManagedProcess(NAME, config.run_dir)


def address(config: ClusterConfig) -> str:
    return f"{config.redis.host}:{config.redis.port}"


def password(config: ClusterConfig) -> str | None:
    """The server's password on a secured platform (one of its generated secrets), else None."""
    return secret(config, "redis") if config.security.enabled else None


def broker_url(config: ClusterConfig) -> str:
    """The Celery broker's URL: the config's, for the embedded server of a secured platform over TLS (`rediss`) with
    its password."""
    url, secured = config.airflow.celery_broker_url, password(config)
    if secured is None or not config.redis.enabled or not url.startswith("redis://") or "@" in url:
        return url
    return f"rediss://:{secured}@{url.removeprefix('redis://')}"


def client_tls_files(config: ClusterConfig) -> dict[str, str]:
    """The files a client of the embedded server of a secured platform connects with (Airflow's `[celery] ssl_*`
    names), none unsecured."""
    if password(config) is None or not config.redis.enabled:
        return {}
    cert, key = certificate(config, ADMIN)  # what Airflow's components and the health checks present
    return {"ssl_cacert": str(ca_path(config)), "ssl_cert": str(cert), "ssl_key": str(key)}


def _command(*parts: str) -> bytes:
    return f"*{len(parts)}\r\n".encode() + b"".join(f"${len(p)}\r\n{p}\r\n".encode() for p in parts)


def ping(
    host: str, port: int, timeout: float = 1.0, secret_: str | None = None, tls: ssl.SSLContext | None = None
) -> bool:
    """Redis at `host:port` answers PING (over TLS with `tls`, after AUTH with `secret_`, when given)."""
    try:
        with (
            socket.create_connection((host, port), timeout=timeout) as plain,
            tls.wrap_socket(plain, server_hostname=host) if tls is not None else plain as sock,
        ):
            if secret_ is not None:
                sock.sendall(_command("AUTH", secret_))
                if not sock.recv(64).startswith(b"+OK"):
                    return False
            sock.sendall(_command("PING"))
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


def is_healthy(config: ClusterConfig) -> bool:
    try:
        tls = client_context(config)
    except ConfigError:  # the client certificate not issued (yet): no TLS client can be let in
        return False
    return ping(config.redis.host, config.redis.port, secret_=password(config), tls=tls)


def client_context(config: ClusterConfig) -> ssl.SSLContext | None:
    """What a client of the embedded server of a secured platform speaks TLS with, None unsecured."""
    files = client_tls_files(config)
    return context_presenting(files["ssl_cacert"], files["ssl_cert"], files["ssl_key"]) if files else None


def _port_open(host: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def command(config: ClusterConfig, server: str = "redis-server") -> list[str]:
    """The server's command line: every setting on it, but a secured platform's password, which is in a config file
    of mode 0600 it names first (never on the command line). Secured, its port speaks TLS only."""
    secured = password(config)
    conf: list[str] = []
    ports = ["--port", str(config.redis.port)]
    if secured is not None:
        path = config.data_dir / "redis" / "redis.conf"
        write_private(path, f"requirepass {secured}\n".encode())
        conf = [str(path)]
        cert, key = certificate(config, NAME)
        ports = ["--port", "0", "--tls-port", str(config.redis.port)]
        ports += ["--tls-cert-file", str(cert), "--tls-key-file", str(key), "--tls-ca-cert-file", str(ca_path(config))]
        ports += ["--tls-auth-clients", "yes"]
    return [
        server,
        *conf,
        # Protected mode answers only the loopback while Redis has no password: on a host of its own, its clients are
        # the other hosts (the subnet, which nothing outside this machine reaches); with a password it asks for it.
        *("--bind", config.redis.host, *ports),
        *("--protected-mode", "no" if config.hosts.enabled else "yes"),
        *("--dir", str(config.data_dir / "redis"), "--save", "", "--appendonly", "no"),
        *("--daemonize", "no", "--logfile", ""),  # its log on stdout: the managed process's log file
        # Secured: each connection's address logged as it is accepted (Redis's line for a refused handshake names none).
        *(("--loglevel", "verbose") if secured is not None else ()),
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
