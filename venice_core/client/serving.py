"""A region-server instance's `/health`, and waiting until a region serves a version through its instances'."""

from __future__ import annotations

import http.client
import json
import ssl
import time
from collections.abc import Callable
from typing import Any, cast

from venice_core.config import ClusterConfig
from venice_core.errors import ComponentError
from venice_core.security.tls import client_context
from venice_core.utils.waiting import poll_until


def _ask(
    host: str, port: int, method: str, path: str, timeout: float, tls: ssl.SSLContext | None
) -> tuple[int, bytes] | None:
    """One request to an instance (over TLS with `tls`): its status and body, None if it does not answer."""
    conn = (
        http.client.HTTPConnection(host, port, timeout=timeout)
        if tls is None
        else http.client.HTTPSConnection(host, port, timeout=timeout, context=tls)
    )
    try:
        conn.request(method, path)
        response = conn.getresponse()
        return response.status, response.read()
    except OSError:
        return None
    finally:
        conn.close()


def health(host: str, port: int, timeout: float = 5, tls: ssl.SSLContext | None = None) -> dict[str, Any] | None:
    """A region-server instance's `/health` document, None if it does not answer."""
    answer = _ask(host, port, "GET", "/health", timeout, tls)
    if answer is None or answer[0] != 200:
        return None
    try:
        return cast(dict[str, Any], json.loads(answer[1]))
    except ValueError:
        return None


def _served(host: str, port: int, store: str, tls: ssl.SSLContext | None) -> int | None:
    """The version of `store` the instance serves (0: none), None if it does not answer."""
    answer = health(host, port, tls=tls)
    return None if answer is None else int(answer.get("stores", {}).get(store, 0))


def request_sync(host: str, port: int, timeout: float = 5, tls: ssl.SSLContext | None = None) -> None:
    """Ask an instance to sync with the metadata store now (`POST /sync`); one that does not answer syncs anyway
    within a second."""
    _ask(host, port, "POST", "/sync", timeout, tls)


ABANDONED_CHECK_SECONDS = 0.5


def wait_until_served(
    config: ClusterConfig,
    store: str,
    number: int,
    regions: list[str],
    timeout: float = 30,
    abandoned: Callable[[], bool] | None = None,
) -> None:
    """Instances pick up a swap within a second, at once when asked; ask them, then wait until every instance of
    each region that answers serves it, so a read right after the push sees the new data. Returns early once
    `abandoned()` says the version will not be served after all (its push stopped meanwhile, say)."""
    tls = client_context(config)
    for region in regions:
        for host, port in config.server_addresses(region):
            request_sync(host, port, tls=tls)
        if _served_or_abandoned(config, region, store, number, timeout, abandoned) == "abandoned":
            return


def _served_or_abandoned(
    config: ClusterConfig,
    region: str,
    store: str,
    number: int,
    timeout: float,
    abandoned: Callable[[], bool] | None,
) -> str:
    """ "served" once every instance of `region` that answers serves the version, "abandoned" once `abandoned()`
    (asked every ABANDONED_CHECK_SECONDS) says it will not be; ComponentError past `timeout`."""
    checked = [time.monotonic()]
    tls = client_context(config)

    def outcome() -> str:
        answers = [_served(host, port, store, tls) for host, port in config.server_addresses(region)]
        alive = [a for a in answers if a is not None]
        if alive and all(a == number for a in alive):
            return "served"
        now = time.monotonic()
        if abandoned is not None and now - checked[0] > ABANDONED_CHECK_SECONDS:
            checked[0] = now
            if abandoned():
                return "abandoned"
        return ""

    return poll_until(
        outcome,
        timeout=timeout,
        interval=0.05,
        timeout_error=lambda _: ComponentError(
            f"region {region} did not start serving {store} v{number} within {timeout}s"
        ),
    )
