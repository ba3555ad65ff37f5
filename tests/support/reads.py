"""Waiting for what regions serve: a condition polled until it holds (`wait_for`, on `poll_until`), and a check that
every region's reads equal an oracle (None for a key that must be absent)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from tests.support.platform import PlatformEnv
from venice_core.client import ReadClient
from venice_core.errors import VeniceError
from venice_core.utils.waiting import poll_until

T = TypeVar("T")


@dataclass(frozen=True)
class NotYet:
    """A check's answer that what it waits for does not hold yet, and why: falsy, so the wait goes on, and the
    failure names it (`last: <why>`)."""

    why: object

    def __bool__(self) -> bool:
        return False

    def __str__(self) -> str:
        return str(self.why)


def wait_for(what: str, check: Callable[[], T], timeout: float = 240.0, interval: float = 0.3) -> T:
    """Until `check()` returns something truthy, which it returns (minutes by default: a loaded machine); asked
    every `interval` seconds. A check may assert, to fail at once on what the wait can never get past, and may answer
    `NotYet(why)` (see `holds`): the failure says what was awaited and the last answer."""
    return poll_until(
        check,
        timeout=timeout,
        interval=interval,
        timeout_error=lambda last: AssertionError(f"{what} not within {timeout:.0f}s (last: {last})"),
    )


def holds(check: Callable[[], object]) -> Callable[[], bool | NotYet]:
    """A check that holds only when `check()` answers True exactly, any other answer (a reason, a status, False)
    being why not: `check`'s answer as `wait_for` takes it."""

    def answer() -> bool | NotYet:
        said = check()
        return True if said is True else NotYet(said)

    return answer


def reads_equal(
    env: PlatformEnv, store: str, expected: dict[str, Any], regions: Iterable[str] | None = None
) -> Callable[[], Any]:
    """A check for `wait_for`: True once every region reads `expected`, else `NotYet` saying what differs where."""
    clients = {r: ReadClient("127.0.0.1", env.config.server_port(r)) for r in (regions or env.config.region_names)}
    keys = sorted(expected)
    want = {k: v for k, v in expected.items() if v is not None}

    def check() -> bool | NotYet:
        for region, client in clients.items():
            try:
                got = {k: v for k, v in client.batch_get(store, keys).items() if v is not None}
            except VeniceError as exc:  # a server just restarted serves the store a moment later
                return NotYet(f"{region}: {exc}")
            if got != want:
                diff = sorted(k for k in set(got) | set(want) if got.get(k) != want.get(k))
                return NotYet(f"{region}: {len(diff)} keys differ, e.g. {diff[:3]}")
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
