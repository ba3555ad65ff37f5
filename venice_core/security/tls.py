"""TLS between the region servers and their callers: mutual, with certificates of the platform's CA.

A region server presents its host's certificate and requires one of its callers; the caller's principal is its
certificate's common name (`principal_of`). Callers present the certificate the config names (`security.client.cert`
and `.key`: by default the platform's `admin` certificate, what the operator's commands and Airflow's tasks are), and
check the server's against the CA and its address. Mutual TLS rather than a signed bearer token: the platform already
issues every process and role a certificate (and Kafka requires them), a certificate cannot be replayed by whoever
sees a request, and a connection is authenticated once, at its handshake, not at every read."""

from __future__ import annotations

import functools
import ssl
from pathlib import Path
from typing import Any

from venice_core.config import ClusterConfig
from venice_core.errors import ConfigError
from venice_core.security.files import ca_path, certificate

ADMIN = "admin"
REGION_SERVER = "region-server"
# Who may call the internal endpoints (`/sync`, `/metrics`) and read every store: the platform's own processes.
PLATFORM_PRINCIPALS = frozenset({ADMIN, REGION_SERVER})


def server_context(config: ClusterConfig, host: str) -> ssl.SSLContext | None:
    """What a region-server instance (`host`, its process name) serves TLS with, None without security."""
    if not config.security.enabled:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(ca_path(config)))
    context.verify_mode = ssl.CERT_REQUIRED
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    # No session tickets: the platform's clients keep their connections rather than resume sessions, and a ticket
    # arriving alone made a client's poll wake for bytes that held no answer.
    context.num_tickets = 0
    cert, key = certificate(config, host)
    _load(context, cert, key)
    return context


def client_context(config: ClusterConfig, role: str = ADMIN) -> ssl.SSLContext | None:
    """What this process calls the region servers with: the config's client certificate (`security.client.cert`),
    else the platform's certificate of `role` (the operator's commands and Airflow's tasks: `admin`; a Da Vinci
    client: `davinci-client`); None without security. One per process and certificate (connections are kept, so a
    handshake is paid per connection, not per request)."""
    if not config.security.enabled:
        return None
    cert, key = config.security.client_cert, config.security.client_key
    if (cert is None) != (key is None):
        raise ConfigError("security.client.cert and security.client.key are set together (a certificate and its key)")
    if cert is None or key is None:
        cert, key = certificate(config, role)
    return context_presenting(str(ca_path(config)), str(cert), str(key))


@functools.cache
def context_presenting(ca: str, cert: str, key: str) -> ssl.SSLContext:
    """A client's TLS context: the server checked against `ca`, `cert` presented (a ConfigError if it cannot be
    loaded); one per process and certificate."""
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=ca)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    _load(context, Path(cert), Path(key))
    return context


def _load(context: ssl.SSLContext, cert: Path, key: Path) -> None:
    try:
        context.load_cert_chain(str(cert), str(key))
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"cannot load the certificate {cert} with its key {key}: {exc}") from None


def principal_of(peer: dict[str, Any] | None) -> str | None:
    """The common name of a verified peer certificate (`SSLSocket.getpeercert()`), None without one."""
    for rdn in (peer or {}).get("subject", ()):
        for name, value in rdn:
            if name == "commonName":
                return str(value)
    return None


def scheme(config: ClusterConfig) -> str:
    return "https" if config.security.enabled else "http"
