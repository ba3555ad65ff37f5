"""Waiting for what regions serve: a condition polled until it holds, and a check that every region's reads equal
an oracle (None for a key that must be absent)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from tests.support.platform import PlatformEnv
from venice_core.client import ReadClient
from venice_core.errors import VeniceError


def eventually(check: Callable[[], Any], what: str, timeout: float = 90, interval: float = 0.1) -> None:
    """Until `check()` returns True; its last other answer says why not in the failure."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last is True:
            return
        time.sleep(interval)
    raise AssertionError(f"{what} not within {timeout:.0f}s (last: {last})")


def wait_for(what: str, check: Callable[[], Any], timeout: float = 240.0, interval: float = 0.3) -> Any:
    """Until `check()` returns something truthy, which it returns (minutes by default: a loaded machine); asked
    every `interval` seconds. A check may assert, to fail at once on what the wait can never get past."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(interval)


def reads_equal(
    env: PlatformEnv, store: str, expected: dict[str, Any], regions: Iterable[str] | None = None
) -> Callable[[], Any]:
    """A check for `eventually`: True once every region reads `expected`, else what differs where."""
    clients = {r: ReadClient("127.0.0.1", env.config.server_port(r)) for r in (regions or env.config.region_names)}
    keys = sorted(expected)
    want = {k: v for k, v in expected.items() if v is not None}

    def check() -> Any:
        for region, client in clients.items():
            try:
                got = {k: v for k, v in client.batch_get(store, keys).items() if v is not None}
            except VeniceError as exc:  # a server just restarted serves the store a moment later
                return f"{region}: {exc}"
            if got != want:
                diff = sorted(k for k in set(got) | set(want) if got.get(k) != want.get(k))
                return f"{region}: {len(diff)} keys differ, e.g. {diff[:3]}"
        return True

    return check


def assert_serves(env: PlatformEnv, store: str, expected: dict[str, dict]) -> None:
    """Every region serves exactly `expected` (by batch get and get), and nothing for an unknown key."""
    config = env.config
    keys = sorted(expected)
    for region in config.region_names:
        client = ReadClient("127.0.0.1", config.server_port(region))
        got = {}
        for start in range(0, len(keys), 500):
            got.update(client.batch_get(store, keys[start : start + 500]))
        assert got == expected, f"region {region} differs"
        assert client.get(store, keys[0]) == expected[keys[0]]
        assert client.get(store, "no-such-key") is None
