"""The one way to wait: ask a check until it answers, with a deadline, an interval, an optional nudge (asking
something to happen, again every so often) and a clock a test can move by hand.

Every waiting loop of the platform and of its tests goes through `poll_until`, so a deadline is measured one way
(a monotonic clock, never the wall clock), the check always runs at least once, and the last sleep never overshoots
the deadline."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar

T = TypeVar("T")


class Clock(Protocol):
    """What a wait reads and how it sleeps: `SYSTEM_CLOCK`, or a test's clock moved by hand."""

    def monotonic(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...


class _SystemClock:
    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


SYSTEM_CLOCK: Clock = _SystemClock()


@dataclass
class Nudge:
    """Something asked of another party while waiting on it (a DAG file's parse, a process's start): `ask` runs
    before the first check and again each `every` seconds the check has not yet held."""

    ask: Callable[[], None]
    every: float


def poll_until(
    check: Callable[[], T],
    *,
    timeout: float,
    interval: float,
    nudge: Nudge | None = None,
    timeout_error: Callable[[T], Exception] | None = None,
    clock: Clock = SYSTEM_CLOCK,
) -> T:
    """Ask `check()` every `interval` seconds until it returns something truthy, and return that. At least once;
    past `timeout` seconds: raise `timeout_error(last answer)` if given, else return the last (falsy) answer. A
    check may raise to end the wait at once on what it can never get past."""
    deadline = clock.monotonic() + timeout
    asked_at: float | None = None
    while True:
        now = clock.monotonic()
        if nudge is not None and (asked_at is None or now - asked_at >= nudge.every):
            nudge.ask()
            asked_at = now
        answer = check()
        if answer:
            return answer
        left = deadline - clock.monotonic()
        if left <= 0:
            if timeout_error is not None:
                raise timeout_error(answer)
            return answer
        clock.sleep(min(interval, left))
