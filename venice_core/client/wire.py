"""The thin client's HTTP/1.1: keep-alive connections over plain sockets (TLS ones on a secured platform), responses
parsed by httptools (http.client's header parsing alone cost a tenth of a millisecond per read), one connection per
(thread, instance).

A connection's socket waits `wait` seconds at most per recv: the long-tail retry delay for a routing client, so a
read that has not answered by then comes back to it (`TimeoutError`, the response so far kept) to be sent to another
replica too; a blocking exchange (`Connection.request`) just waits again until its deadline. A connection whose
response was not read to its end (the other replica answered first) is closed, never reused."""

from __future__ import annotations

import socket
import ssl
import threading
import time

import httptools

Address = tuple[str, int]
Answer = tuple[int, dict[str, str], bytes]  # status, headers, body
_RECV_BYTES = 262144
_BIG_REQUEST = 16384  # a body this large may not fit the socket's free buffer at once: sent under the full timeout


class Response:
    """httptools callbacks: collects one response."""

    __slots__ = ("headers", "body", "complete", "keep_alive", "parser")

    def __init__(self) -> None:
        self.headers: dict[str, str] = {}
        self.body: list[bytes] = []
        self.complete = False
        self.keep_alive = False
        self.parser = httptools.HttpResponseParser(self)

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers[name.decode("latin-1")] = value.decode("latin-1")

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        self.complete = True
        self.keep_alive = self.parser.should_keep_alive()  # valid only until the parser moves on


def encode_request(
    method: str, path: str, host: str, body: bytes | None, content_type: str, headers: str = ""
) -> bytes:
    """`headers`: more header lines, each ending with CRLF."""
    head = f"{method} {path} HTTP/1.1\r\nHost: {host}\r\n{headers}"
    if body is None:
        return (head + "\r\n").encode()
    head += f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n\r\n"
    return head.encode() + body


class Connection:
    """One keep-alive HTTP/1.1 connection to a region-server instance; at most one request in flight."""

    __slots__ = ("address", "sock", "closed", "response", "received", "served", "timeout", "wait")

    def __init__(
        self,
        address: Address,
        timeout: float,
        wait: float,
        connect_timeout: float | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.address = address
        self.timeout, self.wait = timeout, wait
        self.closed = False
        self.response: Response | None = None  # not None: a request in flight
        self.received = False  # bytes of the response in flight arrived
        self.served = 0  # responses read to their end
        self.sock = socket.create_connection(address, timeout=connect_timeout or timeout)
        try:
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if tls is not None:  # the handshake within the connect timeout; the server's address checked
                self.sock = tls.wrap_socket(self.sock, server_hostname=address[0])
            self.sock.settimeout(wait)
        except OSError:
            self.close()
            raise

    def pending(self) -> bool:
        """Bytes already decrypted and waiting (over TLS), which polling the socket would not show."""
        return isinstance(self.sock, ssl.SSLSocket) and self.sock.pending() > 0

    def send(self, request: bytes) -> None:
        self.response = Response()
        self.received = False
        if len(request) < _BIG_REQUEST:
            self.sock.sendall(request)
            return
        self.sock.settimeout(self.timeout)
        try:
            self.sock.sendall(request)
        finally:
            self.sock.settimeout(self.wait)

    def exchange(self, request: bytes) -> Answer:
        """`send`, then read the whole answer (the hot path: one call); TimeoutError after `wait` without a byte
        leaves the response in flight (`read_available` reads on)."""
        self.send(request)
        response = self.response
        assert response is not None
        sock, feed = self.sock, response.parser.feed_data
        while not response.complete:
            data = sock.recv(_RECV_BYTES)
            if not data:
                raise ConnectionError("connection closed by the server")
            self.received = True
            feed(data)
        return self.result()

    def read_available(self) -> bool:
        """Read once (waiting `wait` at most: TimeoutError); True when the response is complete. ConnectionError
        when the server closed the connection, httptools.HttpParserError on a malformed response."""
        data = self.sock.recv(_RECV_BYTES)
        if not data:
            raise ConnectionError("connection closed by the server")
        self.received = True
        response = self.response
        assert response is not None
        response.parser.feed_data(data)
        return response.complete

    def result(self) -> Answer:
        """The complete response; the connection is ready for the next request (or closed if the server said so)."""
        response = self.response
        assert response is not None and response.complete
        self.response = None
        self.served += 1
        if not response.keep_alive:
            self.close()
        return response.parser.get_status_code(), response.headers, b"".join(response.body)

    def request(self, request: bytes) -> Answer:
        """Send and wait for the whole answer, `timeout` at most (TimeoutError)."""
        self.send(request)
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                if self.read_available():
                    return self.result()
            except TimeoutError:
                if time.monotonic() >= deadline:
                    raise

    def close(self) -> None:
        self.closed = True
        self.response = None
        self.sock.close()


class Pool:
    """One keep-alive connection per (thread, instance). Sockets wait `wait` seconds per recv (see the module)."""

    def __init__(self, timeout: float, wait: float, connect_timeout: float, tls: ssl.SSLContext | None = None) -> None:
        self.timeout, self.wait, self.connect_timeout = timeout, wait, connect_timeout
        self.tls = tls  # the platform's TLS (`security.tls.client_context`), None without security
        self._local = threading.local()

    def connections(self) -> dict[Address, Connection]:
        """This thread's connections."""
        connections: dict[Address, Connection] | None = getattr(self._local, "connections", None)
        if connections is None:
            connections = self._local.connections = {}
        return connections

    def open(self, address: Address) -> Connection:
        """A new connection to the instance (OSError if it cannot be reached), not kept by the pool."""
        return Connection(address, self.timeout, self.wait, self.connect_timeout, self.tls)

    def get(self, address: Address) -> Connection:
        """This thread's idle connection to the instance, a new one if it has none open (OSError if the instance
        cannot be reached). One left with a request in flight (an interrupted read) is closed, not reused."""
        connections: dict[Address, Connection] | None = getattr(self._local, "connections", None)
        if connections is None:
            connections = self.connections()
        conn = connections.get(address)
        if conn is None or conn.closed or conn.response is not None:
            if conn is not None:
                conn.close()
            conn = connections[address] = self.open(address)
        return conn

    def checkout(self, address: Address) -> tuple[Connection, bool]:
        """For one of several requests in flight at once: the pooled connection, or a new one (not pooled: the
        second of this pool's connections to the instance) while the pooled one waits for an answer."""
        conn = self.connections().get(address)
        if conn is not None and not conn.closed and conn.response is not None:
            return self.open(address), False
        return self.get(address), True

    def checkin(self, conn: Connection) -> None:
        """An extra connection (`checkout`'s second) that answered: pooled if the pool's own is gone, else closed."""
        connections = self.connections()
        pooled = connections.get(conn.address)
        if conn.closed or pooled is conn:
            return
        if pooled is None or pooled.closed:
            connections[conn.address] = conn
        else:
            conn.close()

    def close(self) -> None:
        """Close this thread's connections."""
        connections = self.connections()
        for conn in connections.values():
            conn.close()
        connections.clear()
