"""How `venice davinci sql` reaches a running client: DuckDB lets no other process open a file a live client
writes, so `venice davinci run` answers read-only queries on a Unix socket beside its file, `<file>.sock` (mode
0600: only the file's owner connects; no port). One query per connection: `{"sql": ...}` as JSON, the asker shuts
its side, the reply is `read_only_sql.run`'s result or `{"error": ...}`. Each query runs on its own cursor of the
client's connection, in a read-only transaction: it sees committed batches only and ingestion goes on beside it."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import socketserver
import stat
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb

from venice_core.davinci import read_only_sql
from venice_core.davinci.duckdb_store import DuckDBFileBusy
from venice_core.davinci.read_only_sql import QueryFailed, QueryRefused
from venice_core.errors import ComponentError, ConfigError, VeniceError

log = logging.getLogger(__name__)

QUERY_TIMEOUT_SECONDS = 60.0  # a query still running then is interrupted: it holds a cursor of the live client
MAX_REQUEST_BYTES = 1 << 20
SUN_PATH_MAX = 107  # AF_UNIX's limit on a socket path, in bytes


def socket_path(duckdb_file: Path) -> Path:
    return duckdb_file.with_name(duckdb_file.name + ".sock")


@contextlib.contextmanager
def _address(path: Path) -> Iterator[str]:
    """The address to bind or connect `path` at: itself, or past AF_UNIX's length limit the same file through a
    descriptor of its folder (Linux's /proc/self/fd)."""
    if len(os.fsencode(path)) <= SUN_PATH_MAX:
        yield str(path)
        return
    folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{folder}/{path.name}"
    finally:
        os.close(folder)


def _connect(path: Path, timeout: float) -> socket.socket | None:
    """A connection to the client serving `path`; None if none does (no socket, or one a killed client left)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        with _address(path) as address:
            sock.connect(address)
        return sock
    except (FileNotFoundError, ConnectionRefusedError):
        sock.close()
        return None
    except OSError as exc:
        sock.close()
        raise ComponentError(f"cannot reach the Da Vinci client's SQL endpoint {path}: {exc.strerror or exc}") from None


class _Server(socketserver.ThreadingUnixStreamServer):
    endpoint: SqlEndpoint


class _Handler(socketserver.StreamRequestHandler):
    server: _Server
    timeout = 30  # an asker that neither sends nor reads does not hold the endpoint's close

    def handle(self) -> None:
        try:
            request = self.rfile.read(MAX_REQUEST_BYTES + 1)
            if len(request) > MAX_REQUEST_BYTES:
                reply: dict[str, Any] = {"error": f"query longer than {MAX_REQUEST_BYTES} bytes"}
            else:
                reply = self.server.endpoint.answer(request)
            self.wfile.write(json.dumps(reply).encode())
        except OSError as exc:  # the asker gone or silent: nothing to answer
            log.debug("SQL endpoint: %s", exc)


class SqlEndpoint:
    """Serves read-only SQL on `<duckdb_file>.sock` for as long as it runs; `cursor` opens a cursor of the client's
    connection (`DuckDBRecordTransformer.cursor`)."""

    def __init__(
        self,
        duckdb_file: Path,
        cursor: Callable[[], duckdb.DuckDBPyConnection],
        timeout: float = QUERY_TIMEOUT_SECONDS,
    ) -> None:
        self.path = socket_path(Path(duckdb_file).absolute())
        self.cursor, self.timeout = cursor, timeout
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._inode: tuple[int, int] | None = None
        self._running: set[duckdb.DuckDBPyConnection] = set()
        self._closing = False
        self._lock = threading.Lock()

    def start(self) -> SqlEndpoint:
        self._clear_stale()
        server = _Server("", _Handler, bind_and_activate=False)
        server.endpoint = self
        # Bound under a temporary name, made 0600, then renamed into place: never reachable with the umask's mode.
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        try:
            with contextlib.suppress(FileNotFoundError):
                temporary.unlink()
            with _address(temporary) as address:
                server.socket.bind(address)
            os.chmod(temporary, 0o600)
            os.replace(temporary, self.path)
            server.server_activate()
        except OSError as exc:
            server.server_close()
            with contextlib.suppress(OSError):
                temporary.unlink()
            raise ConfigError(f"cannot serve SQL at {self.path}: {exc.strerror or exc}") from None
        info = self.path.stat()
        self._inode = (info.st_dev, info.st_ino)
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, daemon=True, name="davinci-sql")
        self._thread.start()
        log.info("read-only SQL served at %s", self.path)
        return self

    def _clear_stale(self) -> None:
        """A socket a killed client left is removed; a live one (another client on this file) refused."""
        try:
            mode = self.path.lstat().st_mode
        except FileNotFoundError:
            return
        if not stat.S_ISSOCK(mode):
            raise ConfigError(f"{self.path} exists and is not a socket: move it away (the client serves SQL there)")
        live = _connect(self.path, timeout=1)
        if live is not None:
            live.close()
            raise DuckDBFileBusy(f"another Da Vinci client serves SQL at {self.path}")
        self.path.unlink(missing_ok=True)
        log.info("removed %s, left by a client that did not stop cleanly", self.path)

    def answer(self, request: bytes) -> dict[str, Any]:
        """One request's reply: the result, or an error (the client goes on whatever the query does)."""
        try:
            sql = json.loads(request)["sql"]
            if not isinstance(sql, str):
                raise TypeError(sql)
        except (ValueError, KeyError, TypeError):
            return {"error": 'bad request: expected {"sql": "<query>"}'}
        try:
            cursor = self.cursor()
        except VeniceError as exc:  # the client is closing its file
            return {"error": str(exc)}
        with self._lock:
            if self._closing:
                cursor.close()
                return {"error": "the Da Vinci client is stopping"}
            self._running.add(cursor)
        try:
            return read_only_sql.run(cursor, sql, self.timeout)
        except QueryRefused as exc:
            return {"error": str(exc), "refused": True}
        except VeniceError as exc:
            return {"error": str(exc)}
        except Exception as exc:  # noqa: BLE001 - an error reply, never a crashed client
            log.exception("SQL endpoint: query failed")
            return {"error": f"query failed: {exc}"}
        finally:
            with self._lock:
                self._running.discard(cursor)
            cursor.close()

    def close(self) -> None:
        """Stop answering (running queries interrupted) and remove the socket, if it is still this endpoint's."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        with self._lock:
            self._closing = True
            for cursor in self._running:
                cursor.interrupt()
        server.server_close()  # waits for the requests' threads
        with contextlib.suppress(FileNotFoundError):
            info = self.path.lstat()
            if (info.st_dev, info.st_ino) == self._inode:
                self.path.unlink()


def ask(duckdb_file: Path, sql: str, timeout: float = QUERY_TIMEOUT_SECONDS + 30) -> dict[str, Any] | None:
    """`sql` run by the client serving `duckdb_file` (`read_only_sql.run`'s result); None if no client serves it."""
    path = socket_path(Path(duckdb_file).absolute())
    sock = _connect(path, timeout)
    if sock is None:
        return None
    with sock:
        try:
            sock.sendall(json.dumps({"sql": sql}).encode())
            sock.shutdown(socket.SHUT_WR)
            data = b"".join(iter(lambda: sock.recv(1 << 16), b""))
        except OSError as exc:
            raise ComponentError(f"the Da Vinci client at {path} stopped answering: {exc}") from None
    if not data:
        raise ComponentError(f"the Da Vinci client at {path} closed the connection without an answer (stopping?)")
    try:
        reply = json.loads(data)
    except ValueError:
        raise ComponentError(f"the Da Vinci client at {path} answered something other than JSON") from None
    if "error" in reply:
        raise (QueryRefused if reply.get("refused") else QueryFailed)(reply["error"])
    return reply


__all__ = ["SqlEndpoint", "ask", "socket_path"]
