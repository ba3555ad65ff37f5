"""The embedded PostgreSQL: Debian's server (the `postgresql` package), run by `venice up` when
`postgres.embedded.enabled`, the database of Airflow (`airflow`) and of the metadata store (`venice`) in the cluster
profile.

Its data dir is `<home>/postgres`, made by `initdb` at its first start (role `venice`), its databases created then.
The server listens on its host's address only (the loopback unless it runs on a host of its own) and on a Unix
socket inside its data dir. Unsecured, it trusts those connections (and the hosts' subnet on the hosts profile).
On a secured platform (`security.enabled`) every network connection, from any address, is TLS with the platform's
`venice` certificate (the role's name) and the role's password (scram-sha-256); the Unix socket in the 0700 data dir
takes the password. The password is set by `initdb` from a file (or, in a data dir made without security, once, as a
SCRAM verifier); the pg_hba.conf is the platform's own: no `trust` line at all. The `postgres` binary runs in
the foreground as a managed process (`run/postgres.{pid,log}`), stopped by a fast shutdown (its clients cut off, a
checkpoint, exit); its settings are on its command line, none written into the data dir.

The server refuses to run as root. Started by root, it runs as Debian's `postgres` user when that user can reach the
data dir (every folder above it searchable: a home in /tmp), else (a home in /root, 0700) in a user namespace of its
own in which the `postgres` user's uid is root's (`unshare`): there it owns its root-owned data dir, with none of
root's privileges. A data dir keeps the way it was made (its owner says which).
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import functools
import glob
import hashlib
import hmac
import os
import pwd
import signal
import socket
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from venice_core.config import (
    LOOPBACK,
    ClusterConfig,
    embedded_postgres_url,
    libpq_environment,
    postgres_client_files,
)
from venice_core.config.security_layout import DATABASE_CLIENT
from venice_core.embedded.process import Host, ManagedProcess, host_of
from venice_core.errors import ComponentError, MissingDependency
from venice_core.host.cache import filling, staging
from venice_core.host.programs import require_program
from venice_core.security.files import ca_path, certificate, keep_private, write_private
from venice_core.security.secrets import secret
from venice_core.utils.waiting import poll_until

ROLE = DATABASE_CLIENT  # the role, and the common name of the certificate its clients present
DATABASES = ("venice", "airflow")  # the metadata store's, Airflow's
START_TIMEOUT_SECONDS = 60.0
STOP_TIMEOUT_SECONDS = 60.0
# Airflow's components each keep two pools (sync and async, up to 15 connections each), its Celery workers a result
# backend's, and every region server one to the metadata store: PostgreSQL's default of 100 is too few.
MAX_CONNECTIONS = 300
SOCKET_PATH_MAX = 107  # a Unix socket's path, without its NUL (sun_path has 108 bytes)
INSTALL_HINT = (
    "PostgreSQL's server (Debian: apt-get install postgresql; scripts/install-system-packages.sh --with-cluster-deps)"
)


def bin_dir() -> Path:
    """The newest installed server's binaries (`/usr/lib/postgresql/<major>/bin`, Debian's layout)."""
    found = [Path(path).parents[1] for path in glob.glob("/usr/lib/postgresql/*/bin/postgres")]
    versions = [folder for folder in found if folder.name.isdigit()]
    if not versions:
        raise MissingDependency(f"PostgreSQL's server binaries are not installed: install {INSTALL_HINT}")
    return max(versions, key=lambda folder: int(folder.name)) / "bin"


def major_version() -> str:
    return bin_dir().parent.name


@dataclass(frozen=True)
class _Runner:
    """How the server's programs run: as this user, as another (`user`), or under a command (`prefix`)."""

    prefix: tuple[str, ...] = ()
    user: str | None = None


class _RunAs(TypedDict, total=False):
    """`subprocess.run`'s keywords that run a program as another account (none: as this one)."""

    user: int
    group: int
    extra_groups: list[int]


def _account() -> pwd.struct_passwd:
    try:
        return pwd.getpwnam("postgres")
    except KeyError:
        raise MissingDependency(f"there is no `postgres` user to run the server as: install {INSTALL_HINT}") from None


def _namespace(account: pwd.struct_passwd) -> _Runner:
    unshare = require_program("unshare", "util-linux (Debian: apt-get install util-linux)")
    return _Runner(prefix=(unshare, "--user", f"--map-user={account.pw_uid}", f"--map-group={account.pw_gid}", "--"))


def _reaches(account: pwd.struct_passwd, folder: Path) -> bool:
    """`account` can reach into `folder` (search permission on it and every folder above it)."""
    test = ["test", "-x", str(folder)]
    ids: _RunAs = {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": []}
    return subprocess.run(test, stdin=subprocess.DEVNULL, **ids).returncode == 0


def _runner(data_dir: Path) -> _Runner:
    if os.geteuid() != 0:
        return _Runner()
    account = _account()
    if data_dir.exists():  # it keeps the way it was made
        owner = data_dir.stat().st_uid
        return _namespace(account) if owner == 0 else _Runner(user=pwd.getpwuid(owner).pw_name)
    return _Runner(user=account.pw_name) if _reaches(account, data_dir.parent) else _namespace(account)


def _port_open(host: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


SECURED_MARKER = "venice.secured"  # in a data dir whose role has the platform's password (a secured platform's)
# The whole pg_hba.conf of a secured server: over the network, TLS with a certificate of the platform's CA whose
# common name is the role's (the platform's `venice` client certificate, `clientcert=verify-full`) and the password;
# on the Unix socket in the 0700 data dir, the password.
SECURED_HBA = (
    "# Written by venice up (security.enabled): over the network, TLS with the platform's certificate of the role's\n"
    "# name and the role's password (scram-sha-256); nothing is trusted, nothing else is let in.\n"
    "local all all scram-sha-256\n"
    "hostssl all all 0.0.0.0/0 scram-sha-256 clientcert=verify-full\n"
    "hostssl all all ::/0 scram-sha-256 clientcert=verify-full\n"
)


@dataclass(frozen=True)
class Secured:
    """A secured server's material: the CA its clients' certificates are checked against, its own certificate and key,
    the role's password, and how its clients connect (libpq's parameters: `config.build.postgres_client_files`)."""

    ca: Path
    cert: Path
    key: Path
    password: Callable[[], str]  # made the first time a start asks for it (not by a status check)
    client: dict[str, str]


@dataclass(frozen=True)
class Server:
    """One PostgreSQL server: its data dir, where its pid file and log go, its port, the databases it has."""

    data_dir: Path
    run_dir: Path
    port: int
    databases: tuple[str, ...] = DATABASES
    name: str = "postgres"
    host: str = LOOPBACK  # the address it listens on
    on: Host | None = None  # the host it runs on (the hosts profile), None: this machine's network
    trusted: str | None = None  # a network whose connections it trusts besides its own host's (the hosts' subnet)
    secured: Secured | None = None  # a secured platform's server: TLS and passwords, no trust

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def process(self) -> ManagedProcess:
        return ManagedProcess(self.name, self.run_dir)

    def url(self, database: str = "postgres") -> str:
        return embedded_postgres_url(self.host, self.port, database, self.secured.client if self.secured else None)

    def client_env(self) -> dict[str, str]:
        """libpq's environment for the server's own programs as clients (`psql`, `pg_dump`): its TLS files and
        password file on a secured platform, nothing else."""
        return libpq_environment(self.secured.client if self.secured else {})

    def _connect(self, database: str, timeout: int = 5) -> Any:  # psycopg2's connection: psycopg2 ships no types
        import psycopg2

        client = self.secured.client if self.secured else {}
        return psycopg2.connect(
            host=self.host, port=self.port, user=ROLE, dbname=database, connect_timeout=timeout, **client
        )

    def is_healthy(self, timeout: int = 2) -> bool:
        """The server accepts a connection and answers a query."""
        import psycopg2

        try:
            with contextlib.closing(self._connect("postgres", timeout)) as connection, connection.cursor() as cursor:
                cursor.execute("SELECT 1")
            return True
        except psycopg2.Error:
            return False

    def settings(self) -> dict[str, str]:
        """The server's settings, given on its command line."""
        socket_path = f"{self.data_dir}/.s.PGSQL.{self.port}"
        return {
            "listen_addresses": self.host,
            "port": str(self.port),
            # Inside the data dir (none when its path would be too long for a socket's: TCP still serves).
            "unix_socket_directories": f'"{self.data_dir}"' if len(socket_path.encode()) <= SOCKET_PATH_MAX else "",
            "max_connections": str(MAX_CONNECTIONS),
            "logging_collector": "off",  # its log on stderr: the managed process's log file
            **(self._tls_settings() if self.secured else {}),
        }

    def _tls_settings(self) -> dict[str, str]:
        """Its certificate, key and CA: copies inside its data dir, which its account can read (`_secure`)."""
        return {
            "ssl": "on",
            "ssl_cert_file": str(self.data_dir / "server.crt"),
            "ssl_key_file": str(self.data_dir / "server.key"),
            "ssl_ca_file": str(self.data_dir / "root.crt"),
            "ssl_min_protocol_version": "TLSv1.2",
            "password_encryption": "scram-sha-256",
        }

    def start(self) -> str:
        """Start the server (made first if it has no data dir), wait until it answers, create its databases that
        are missing. Returns a line for the user."""
        proc = self.process
        pid = proc.pid()
        if pid is not None:
            return f"postgres is already running (pid {pid}) on {self.address}"
        bins = bin_dir()
        if self.on is None and _port_open(self.host, self.port):  # a host of its own has no other process
            raise ComponentError(
                f"port {self.address} is taken by another process: stop it or set postgres.embedded.port"
            )
        if not (self.data_dir / "PG_VERSION").exists():
            self._init(bins)
        secured_before = (self.data_dir / SECURED_MARKER).exists()
        if self.secured is not None:
            if not secured_before:  # made unsecured (before issue 45, say): its role given the password in place
                self._set_password(bins, self.secured)
            self._secure(self.secured)
        elif secured_before:
            raise ComponentError(
                f"{self.data_dir} was made by a secured platform (TLS and a password only): set security.enabled=true"
            )
        else:
            self._trust_network()
        self._launch(bins)
        created = self._create_databases()
        made = f", created {', '.join(created)}" if created else ""
        return f"postgres started (pid {proc.pid()}) on {self.address}{made}"

    def _launch(self, bins: Path) -> None:
        """Run the server with its settings and wait until it answers."""
        runner = _runner(self.data_dir)
        settings = [arg for key, value in self.settings().items() for arg in ("-c", f"{key}={value}")]
        command = [*runner.prefix, str(bins / "postgres"), "-D", str(self.data_dir), *settings]
        self.process.start(command, user=runner.user, host=self.on)
        self.process.wait_until_healthy("postgres", self.is_healthy, START_TIMEOUT_SECONDS, 0.05)

    def _set_password(self, bins: Path, secured: Secured) -> None:
        """A data dir made without security: run once as it was (trusting its own host's connections, and the
        hosts' subnet if it did), give the role the password as a SCRAM verifier (the password itself never reaches
        the server), stop, and mark it secured."""
        as_it_was = dataclasses.replace(self, secured=None)
        as_it_was._trust_network()
        as_it_was._launch(bins)
        try:
            with contextlib.closing(as_it_was._connect("postgres")) as connection, connection.cursor() as cursor:
                connection.autocommit = True
                cursor.execute(f"ALTER ROLE {ROLE} PASSWORD %s", (scram_verifier(secured.password()),))
        finally:
            as_it_was.stop()
        (self.data_dir / SECURED_MARKER).touch()

    def _trust_network(self) -> None:
        """The hosts' subnet in pg_hba.conf (initdb's trusts the loopback only), once."""
        if self.trusted is None:
            return
        hba = self.data_dir / "pg_hba.conf"
        line = f"host all all {self.trusted} trust"
        if line not in hba.read_text().splitlines():
            with hba.open("a") as file:
                file.write(f"# the platform's hosts (venice up)\n{line}\n")

    def _secure(self, secured: Secured) -> None:
        """What a secured server reads, in its data dir and owned like it (PostgreSQL reads a key only its account
        owns, mode 0600): its certificate, key and CA, and the platform's pg_hba.conf; its clients' password
        file."""
        owner = self.data_dir.stat()
        for name, text in (
            ("server.crt", secured.cert.read_text()),
            ("server.key", secured.key.read_text()),
            ("root.crt", secured.ca.read_text()),
            ("pg_hba.conf", SECURED_HBA),
        ):
            path = keep_private(self.data_dir / name, text)
            if os.geteuid() == 0:
                os.chown(path, owner.st_uid, owner.st_gid)
        passfile = Path(secured.client["passfile"])
        keep_private(passfile, f"{self.host}:{self.port}:*:{ROLE}:{secured.password()}\n")

    def _init(self, bins: Path) -> None:
        """`initdb` into a staging dir beside the data dir, renamed into place when whole. Without syncing to disk
        (1.2 s of a first start): a machine crash within seconds of it would leave a data dir to delete."""
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        with filling(self.data_dir):
            if (self.data_dir / "PG_VERSION").exists():
                return
            if self.data_dir.exists():  # not a data dir (no PG_VERSION): what a killed start left, say
                raise ComponentError(
                    f"{self.data_dir} exists but is not a PostgreSQL data dir: move it away (or delete it)"
                )
            partial = staging(self.data_dir)
            runner = _runner(partial)
            partial.mkdir(mode=0o700)
            ids: _RunAs = {}
            if runner.user is not None:
                account = pwd.getpwnam(runner.user)
                os.chown(partial, account.pw_uid, account.pw_gid)
                ids = {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": []}
            initdb = [str(bins / "initdb"), "-D", str(partial), "-U", ROLE, "-E", "UTF8", "--locale=C", "--no-sync"]
            with self._password_file(ids) as pwfile:
                if pwfile is None:
                    initdb.append("--auth=trust")
                else:  # the role's password from a file its account reads (never on the command line)
                    initdb += ["--auth=scram-sha-256", f"--pwfile={pwfile}"]
                result = subprocess.run(
                    [*runner.prefix, *initdb],
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    text=True,
                    cwd=partial,
                    **ids,
                )
            if result.returncode != 0:
                raise ComponentError(f"initdb failed for {self.data_dir}:\n{result.stdout}{result.stderr}")
            if self.secured is not None:
                (partial / SECURED_MARKER).touch()
            os.replace(partial, self.data_dir)

    @contextlib.contextmanager
    def _password_file(self, ids: _RunAs) -> Iterator[Path | None]:
        """A secured server's password for `initdb --pwfile`, beside the data dir, readable by its account alone,
        removed once read; None unsecured."""
        if self.secured is None:
            yield None
            return
        path = self.data_dir.parent / f".{self.data_dir.name}.pwfile"
        write_private(path, f"{self.secured.password()}\n".encode())
        try:
            if "user" in ids:
                os.chown(path, ids["user"], ids["group"])
            yield path
        finally:
            path.unlink(missing_ok=True)

    def _create_databases(self) -> list[str]:
        """Create the databases the server does not have yet; returns their names."""
        if not self.databases:
            return []
        with contextlib.closing(self._connect("postgres")) as connection:
            connection.autocommit = True  # CREATE DATABASE runs outside a transaction
            with connection.cursor() as cursor:
                cursor.execute("SELECT datname FROM pg_database")
                existing = {row[0] for row in cursor.fetchall()}
                created = [database for database in self.databases if database not in existing]
                for database in created:
                    cursor.execute(f'CREATE DATABASE "{database}"')
        return created

    def stop(self, timeout: float = STOP_TIMEOUT_SECONDS) -> bool:
        """A fast shutdown (SIGINT to the server: its sessions are ended, a checkpoint written), then whatever is
        left killed. False if it was not running."""
        proc = self.process
        pid = proc.pid()
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGINT)

            def gone() -> bool:
                if proc.pid() is None:
                    return True
                with contextlib.suppress(ChildProcessError):  # our child (a test's server): reaped here
                    os.waitpid(pid, os.WNOHANG)
                return False

            poll_until(gone, timeout=timeout, interval=0.05)
        return proc.stop(timeout=5.0) or pid is not None

    def restart(self) -> str:
        """A fast shutdown and a start: a fault the tests inject (every client's connections cut at once)."""
        self.stop()
        return self.start()

    def kill(self) -> None:
        """SIGKILL the server and its backends, as a crash would (its next start recovers from its WAL)."""
        self.process.kill()


def server(config: ClusterConfig) -> Server:
    return Server(
        config.data_dir / "postgres",
        config.run_dir,
        config.postgres.port,
        host=config.postgres.host,
        on=host_of(config, "postgres"),
        trusted=config.hosts.subnet if config.hosts.enabled else None,
        secured=secured(config),
    )


def secured(config: ClusterConfig) -> Secured | None:
    """A secured platform's server material (its certificate the `postgres` host's), None unsecured."""
    if not config.security.enabled:
        return None
    cert, key = certificate(config, "postgres")
    client = postgres_client_files(config.data_dir, config.security.ca_cert)
    return Secured(ca_path(config), cert, key, functools.partial(secret, config, "postgres"), client)


def scram_verifier(password: str, iterations: int = 4096) -> str:
    """What PostgreSQL keeps of a scram-sha-256 password (RFC 5802, RFC 7677), made on the client's side as libpq's
    PQencryptPasswordConn does: the server can check the password with it but not recover it."""
    salt = os.urandom(16)
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    stored_key = hashlib.sha256(hmac.digest(salted, b"Client Key", "sha256")).digest()
    server_key = hmac.digest(salted, b"Server Key", "sha256")
    salt_, stored, server = (base64.b64encode(raw).decode() for raw in (salt, stored_key, server_key))
    return f"SCRAM-SHA-256${iterations}:{salt_}${stored}:{server}"


def process(config: ClusterConfig) -> ManagedProcess:
    return server(config).process


def start(config: ClusterConfig) -> str:
    return server(config).start()


def stop(config: ClusterConfig) -> bool:
    return server(config).stop()


def restart(config: ClusterConfig) -> str:
    return server(config).restart()


def kill(config: ClusterConfig) -> None:
    server(config).kill()


def is_healthy(config: ClusterConfig) -> bool:
    return server(config).is_healthy()
