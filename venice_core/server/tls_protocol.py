"""TLS in front of the region server's HTTP protocol, with the stdlib's `ssl.SSLObject` over memory buffers (what
asyncio's own TLS does), for two reasons uvloop's TLS did not meet: a caller refused at the handshake (no
certificate, another CA's, not TLS at all) must be logged with its address, which uvloop keeps to its debug log; and
`loop.start_tls` after accepting lost a caller's hello that arrived before the upgrade began (uvloop starts reading
right after `connection_made`).

`TlsProtocol` takes the socket's bytes, runs the handshake, then hands the decrypted bytes to the inner protocol,
which writes through `_TlsTransport` (encrypted on the way out) and learns its caller's certificate from
`get_extra_info("peercert")`."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Callable
from typing import Any, cast

log = logging.getLogger(__name__)
HANDSHAKE_SECONDS = 10.0
_READ_BYTES = 262144


class _TlsTransport:
    """What the inner protocol writes to: its bytes encrypted onto the socket's transport."""

    def __init__(self, outer: TlsProtocol) -> None:
        self._outer = outer

    def write(self, data: bytes) -> None:
        self._outer.send(data)

    def close(self) -> None:
        self._outer.close()

    def abort(self) -> None:
        self._outer.abort()

    def is_closing(self) -> bool:
        return self._outer.transport is None or self._outer.transport.is_closing()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name == "peercert":
            return self._outer.tls.getpeercert()
        if name == "ssl_object":
            return self._outer.tls
        return self._outer.transport.get_extra_info(name, default) if self._outer.transport else default


class TlsProtocol(asyncio.Protocol):
    """One connection: the TLS server side of `context`, then `inner`'s protocol on the decrypted stream."""

    def __init__(
        self, context: ssl.SSLContext, inner: asyncio.Protocol, loop: asyncio.AbstractEventLoop, pending: Pending
    ) -> None:
        self._incoming, self._outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = context.wrap_bio(self._incoming, self._outgoing, server_side=True)
        self.inner, self.loop, self.pending = inner, loop, pending
        self.transport: asyncio.Transport | None = None
        self.secured = False
        self._deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        if len(self.pending.handshaking) >= self.pending.limit:  # callers that never finish theirs hold no more
            self._refuse(f"{self.pending.limit} connections are already in their handshake")
            return
        self.pending.handshaking.add(self)
        self._deadline = self.loop.call_later(HANDSHAKE_SECONDS, self._too_slow)

    def data_received(self, data: bytes) -> None:
        self._incoming.write(data)
        if not self.secured and not self._handshake():
            return
        received, ended = [], False
        while True:
            try:
                chunk = self.tls.read(_READ_BYTES)
            except ssl.SSLWantReadError:
                break
            except ssl.SSLZeroReturnError:  # the caller's close_notify: what came before it is still answered
                ended = True
                break
            except ssl.SSLError:  # a broken session: nothing more can be read or written on it
                self.abort()
                return
            if not chunk:
                break
            received.append(chunk)
        self._flush()  # a TLS 1.3 key update
        if received:
            self.inner.data_received(b"".join(received))
        if ended:
            self.close()

    def _handshake(self) -> bool:
        """One step of the handshake; True once done (the inner protocol then has its connection)."""
        try:
            self.tls.do_handshake()
        except ssl.SSLWantReadError:
            self._flush()
            return False
        except (ssl.SSLError, OSError) as exc:
            self._flush()  # the alert that tells the caller why
            self._refuse(str(exc) or type(exc).__name__)
            return False
        self._flush()
        self.secured = True
        self.pending.handshaking.discard(self)
        if self._deadline is not None:
            self._deadline.cancel()
        self.inner.connection_made(cast(asyncio.Transport, _TlsTransport(self)))
        return True

    def _too_slow(self) -> None:
        if not self.secured:
            self._refuse(f"no TLS handshake within {HANDSHAKE_SECONDS:.0f}s")

    def _refuse(self, reason: str) -> None:
        peer = self.transport.get_extra_info("peername") if self.transport else None
        where = f"{peer[0]}:{peer[1]}" if peer else "?"
        log.warning("refused a connection from %s at the TLS handshake: %s", where, reason)
        self.close()

    def send(self, data: bytes) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        try:
            self.tls.write(data)
        except ssl.SSLError:
            self.abort()
            return
        self._flush()

    def _flush(self) -> None:
        pending = self._outgoing.read()
        if pending and self.transport is not None and not self.transport.is_closing():
            self.transport.write(pending)

    def close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            if self.secured:
                with contextlib.suppress(ssl.SSLError):
                    self.tls.unwrap()  # close_notify: the caller knows the answer was whole
                self._flush()
            self.transport.close()

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self.pending.handshaking.discard(self)
        if self._deadline is not None:
            self._deadline.cancel()
        if self.secured:
            self.inner.connection_lost(exc)
        self.transport = None

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()


class Pending:
    """The connections still in their handshake (at most `limit`), which a server's shutdown closes too."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.handshaking: set[TlsProtocol] = set()

    def close_all(self) -> None:
        for protocol in list(self.handshaking):
            protocol.abort()
        self.handshaking.clear()


def secured(
    context: ssl.SSLContext, inner: Callable[[], asyncio.Protocol], loop: asyncio.AbstractEventLoop, pending: Pending
) -> Callable[[], asyncio.Protocol]:
    """A protocol factory: `inner`'s protocol behind TLS with `context`, its handshakes counted in `pending`."""
    return lambda: TlsProtocol(context, inner(), loop, pending)
