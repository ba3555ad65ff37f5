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
import select
import socket
import socketserver
import stat
import threading
import time
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
REPLY_SECONDS = 30.0  # a request's one deadline: QUERY_TIMEOUT_SECONDS and this, its reading and reply included
MAX_REQUEST_BYTES = 1 << 20
MAX_REPLY_BYTES = 32 << 20  # of rows as JSON: a big SELECT * is cut there, never held whole by the live client
DEFAULT_MAX_ROWS = 10_000
MAX_QUERIES = 2  # at once: each takes cores the client's ingestion needs
BUSY_WAIT_SECONDS = 5.0  # a query beyond MAX_QUERIES waits this long for a turn, then is answered busy
MAX_CONNECTIONS = 16  # open at once (a thread each); more are answered busy at once
CLOSE_WAIT_SECONDS = 2.0  # for interrupted queries to end when the endpoint closes
INTERRUPT_AGAIN_SECONDS = 0.05  # how often an interrupt is sent until the query ends
HANG_UP_POLL_MS = 200  # how soon a query whose asker hung up is interrupted
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


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True  # a handler never keeps the process alive
    block_on_close = False  # `server_close` waits for no handler: `SqlEndpoint.close` ends their connections
    endpoint: SqlEndpoint

    def process_request(self, request: Any, client_address: Any) -> None:
        if self.endpoint._admit(request):
            super().process_request(request, client_address)
            return
        # Beyond MAX_CONNECTIONS (or stopping): answered at once, without a thread. A fresh connection's send
        # buffer is empty: this never blocks the accepting thread.
        with contextlib.suppress(OSError):
            request.setblocking(False)
            request.send(_error(f"the Da Vinci client is busy ({MAX_CONNECTIONS} connections open): try again"))
        self.shutdown_request(request)

    def shutdown_request(self, request: Any) -> None:
        self.endpoint._release(request)
        super().shutdown_request(request)


class _Handler(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        endpoint = self.server.endpoint
        deadline = time.monotonic() + endpoint.request_timeout  # one for the request, the query and the reply
        try:
            request = _read(self.request, deadline)
            if request is None:
                reply = _error(f"query longer than {MAX_REQUEST_BYTES} bytes")
            else:
                reply = endpoint.answer(request, deadline, asker=self.request)
            self.request.settimeout(max(deadline - time.monotonic(), 0.001))
            self.request.sendall(reply)  # the timeout bounds the whole sendall
        except OSError as exc:  # the asker gone, too slow, or the endpoint closing: nothing to answer
            log.debug("SQL endpoint: %s", exc)


def _interrupt_on_hang_up(asker: socket.socket, cursor: duckdb.DuckDBPyConnection, done: threading.Event) -> None:
    """Interrupt `cursor`'s query once the asker has closed its connection, until `done`. The asker shut its sending
    side after the request, so the socket reads EOF all along; its closing the connection, and only that, makes
    the socket hang up (POLLHUP)."""
    poller = select.poll()
    poller.register(asker, select.POLLHUP)
    while not done.is_set():
        if poller.poll(HANG_UP_POLL_MS) and not done.is_set():
            log.info("SQL endpoint: the asker hung up; its query is interrupted")
            # Again until it ends: an interrupt before DuckDB runs the query (its SQL still being checked) is lost.
            while not done.is_set():
                with contextlib.suppress(duckdb.Error):  # the query ended meanwhile and its cursor is closed
                    cursor.interrupt()
                done.wait(INTERRUPT_AGAIN_SECONDS)
            return


def _read(sock: socket.socket, deadline: float) -> bytes | None:
    """The request, up to the asker's EOF, by `deadline` (TimeoutError past it: an asker sending a byte at a time
    gains nothing); None if longer than MAX_REQUEST_BYTES."""
    parts: list[bytes] = []
    size = 0
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("the request took too long")
        sock.settimeout(remaining)
        part = sock.recv(1 << 16)
        if not part:
            return b"".join(parts)
        parts.append(part)
        size += len(part)
        if size > MAX_REQUEST_BYTES:
            return None


def _error(message: str, refused: bool = False) -> bytes:
    return json.dumps({"error": message, **({"refused": True} if refused else {})}).encode()


class SqlEndpoint:
    """Serves read-only SQL on `<duckdb_file>.sock` for as long as it runs; `cursor` opens a cursor of the client's
    connection (`DuckDBRecordTransformer.cursor`). At most `max_queries` queries run at once (each takes cores
    ingestion needs): another waits up to `busy_wait` seconds, then is answered busy."""

    def __init__(
        self,
        duckdb_file: Path,
        cursor: Callable[[], duckdb.DuckDBPyConnection],
        timeout: float = QUERY_TIMEOUT_SECONDS,
        *,
        request_timeout: float | None = None,
        max_queries: int = MAX_QUERIES,
        busy_wait: float = BUSY_WAIT_SECONDS,
    ) -> None:
        self.path = socket_path(Path(duckdb_file).resolve())  # a symlinked path finds the same endpoint
        self.cursor, self.timeout = cursor, timeout
        self.request_timeout = timeout + REPLY_SECONDS if request_timeout is None else request_timeout
        self.busy_wait = busy_wait
        self._queries = threading.BoundedSemaphore(max_queries)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._inode: tuple[int, int] | None = None
        self._running: set[duckdb.DuckDBPyConnection] = set()
        self._connections: set[socket.socket] = set()
        self._closing = False
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)  # notified as a query ends

    def check(self) -> SqlEndpoint:
        """Refuse a path that is not a socket, or that another live client serves; remove a killed client's. Called
        before the client starts, so neither is found only once ingestion began."""
        try:
            mode = self.path.lstat().st_mode
        except FileNotFoundError:
            return self
        if not stat.S_ISSOCK(mode):
            raise ConfigError(f"{self.path} exists and is not a socket: move it away (the client serves SQL there)")
        live = _connect(self.path, timeout=1)
        if live is not None:
            live.close()
            raise DuckDBFileBusy(f"another Da Vinci client serves SQL at {self.path}")
        self.path.unlink(missing_ok=True)
        log.info("removed %s, left by a client that did not stop cleanly", self.path)
        return self

    def start(self) -> SqlEndpoint:
        self.check()
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

    def _admit(self, connection: socket.socket) -> bool:
        with self._lock:
            if self._closing or len(self._connections) >= MAX_CONNECTIONS:
                return False
            self._connections.add(connection)
            return True

    def _release(self, connection: socket.socket) -> None:
        with self._lock:
            self._connections.discard(connection)

    def answer(self, request: bytes, deadline: float | None = None, asker: socket.socket | None = None) -> bytes:
        """One request's reply, as JSON: the result, or an error (the client goes on whatever the query does). An
        `asker` that hangs up while its query runs (Ctrl-C on `venice davinci sql`) has the query interrupted."""
        deadline = time.monotonic() + self.request_timeout if deadline is None else deadline
        try:
            parsed = json.loads(request)
            sql, max_rows = parsed["sql"], parsed.get("max_rows", DEFAULT_MAX_ROWS)
            if not isinstance(sql, str) or type(max_rows) is not int or max_rows < 1:
                raise TypeError(sql)
        except (ValueError, KeyError, TypeError, AttributeError):
            return _error('bad request: expected {"sql": "<query>", "max_rows": <a positive number>}')
        if not self._queries.acquire(timeout=max(0.0, min(self.busy_wait, deadline - time.monotonic()))):
            return _error("the Da Vinci client is busy (it runs few queries at once, beside ingestion): try again")
        try:
            return self._run(sql, max_rows, deadline, asker)
        finally:
            self._queries.release()

    def _run(self, sql: str, max_rows: int, deadline: float, asker: socket.socket | None) -> bytes:
        try:
            cursor = self.cursor()
        except VeniceError as exc:  # the client is closing its file
            return _error(str(exc))
        with self._lock:
            if self._closing:
                cursor.close()
                return _error("the Da Vinci client is stopping")
            self._running.add(cursor)
        done = threading.Event()
        if asker is not None:
            threading.Thread(target=_interrupt_on_hang_up, args=(asker, cursor, done), daemon=True).start()
        try:
            timeout = max(0.001, min(self.timeout, deadline - time.monotonic()))
            return read_only_sql.run_json(cursor, sql, timeout, max_rows, MAX_REPLY_BYTES).encode()
        except QueryRefused as exc:
            return _error(str(exc), refused=True)
        except VeniceError as exc:
            return _error(str(exc))
        except Exception as exc:  # noqa: BLE001 - an error reply, never a crashed client
            log.exception("SQL endpoint: query failed")
            return _error(f"query failed: {exc}")
        finally:
            done.set()
            with self._lock:
                self._running.discard(cursor)
                self._idle.notify_all()
            cursor.close()

    def close(self) -> None:
        """Stop answering and remove the socket, if it is still this endpoint's: running queries interrupted, open
        connections shut (a slow asker holds nothing), no handler waited for beyond CLOSE_WAIT_SECONDS."""
        server, self._server = self._server, None
        if server is None:
            return
        with self._lock:
            self._closing = True
            for cursor in self._running:
                cursor.interrupt()
            for connection in self._connections:
                with contextlib.suppress(OSError):
                    connection.shutdown(socket.SHUT_RDWR)
        server.shutdown()  # the accepting loop, within its 0.5 s poll
        server.server_close()  # the listening socket only (block_on_close is off)
        with self._idle:  # interrupted queries end at once: the client closes their connection next
            self._idle.wait_for(lambda: not self._running, CLOSE_WAIT_SECONDS)
        with contextlib.suppress(FileNotFoundError):
            info = self.path.lstat()
            if (info.st_dev, info.st_ino) == self._inode:
                self.path.unlink()


def _read_reply(sock: socket.socket) -> bytes:
    """Up to the endpoint's EOF. An endpoint that answered before reading the whole request (busy, too long)
    resets the connection after its reply: the reply counts."""
    parts: list[bytes] = []
    while True:
        try:
            part = sock.recv(1 << 16)
        except ConnectionResetError:
            if not parts:
                raise
            part = b""
        if not part:
            return b"".join(parts)
        parts.append(part)


def ask(
    duckdb_file: Path,
    sql: str,
    max_rows: int = DEFAULT_MAX_ROWS,
    timeout: float = QUERY_TIMEOUT_SECONDS + REPLY_SECONDS,
) -> dict[str, Any] | None:
    """`sql` run by the client serving `duckdb_file` (`read_only_sql.run`'s result: at most `max_rows` rows, and
    MAX_REPLY_BYTES of them); None if no client serves it."""
    path = socket_path(Path(duckdb_file).resolve())  # as the endpoint names it: a symlink finds the same one
    sock = _connect(path, timeout)
    if sock is None:
        return None
    with sock:
        try:
            sock.sendall(json.dumps({"sql": sql, "max_rows": max_rows}).encode())
            sock.shutdown(socket.SHUT_WR)
            data = _read_reply(sock)
        except OSError as exc:
            raise ComponentError(f"the Da Vinci client at {path} stopped answering: {exc}") from None
    if not data:
        raise ComponentError(f"the Da Vinci client at {path} closed the connection without an answer (stopping?)")
    try:
        reply: dict[str, Any] = json.loads(data)
    except ValueError:
        raise ComponentError(f"the Da Vinci client at {path} answered something other than JSON") from None
    if "error" in reply:
        raise (QueryRefused if reply.get("refused") else QueryFailed)(reply["error"])
    return reply


__all__ = ["SqlEndpoint", "ask", "socket_path"]
