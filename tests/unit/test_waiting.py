"""`poll_until`, the one way to wait, on a clock moved by hand: no test sleeps."""

from __future__ import annotations

import pytest

from venice_core.errors import ComponentError
from venice_core.utils.waiting import Nudge, poll_until


class HandClock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_returns_the_first_truthy_answer() -> None:
    clock = HandClock()
    answers = iter([None, 0, "", "ready"])
    assert poll_until(lambda: next(answers), timeout=10, interval=1, clock=clock) == "ready"
    assert clock.slept == [1, 1, 1]


def test_asks_once_even_with_no_time() -> None:
    calls: list[int] = []
    assert poll_until(lambda: calls.append(1) or 7, timeout=0, interval=1, clock=HandClock()) == 7
    assert calls == [1]


def test_returns_the_last_falsy_answer_at_the_deadline() -> None:
    clock = HandClock()
    assert poll_until(lambda: [], timeout=2.5, interval=1, clock=clock) == []
    assert clock.slept == [1, 1, 0.5]  # the last sleep never overshoots the deadline
    assert clock.now == 102.5


def test_raises_the_callers_error_naming_the_last_answer() -> None:
    with pytest.raises(ComponentError, match="still 'starting'"):
        poll_until(
            lambda: "",
            timeout=3,
            interval=1,
            clock=HandClock(),
            timeout_error=lambda last: ComponentError(f"still 'starting'{last}"),
        )


def test_a_check_that_raises_ends_the_wait_at_once() -> None:
    clock = HandClock()

    def check() -> bool:
        raise ComponentError("died")

    with pytest.raises(ComponentError, match="died"):
        poll_until(check, timeout=60, interval=1, clock=clock)
    assert clock.slept == []


def test_nudges_first_and_again_each_period() -> None:
    clock = HandClock()
    asked: list[float] = []
    answers = iter([False] * 7 + [True])
    poll_until(
        lambda: next(answers),
        timeout=60,
        interval=1,
        nudge=Nudge(lambda: asked.append(clock.now), every=3),
        clock=clock,
    )
    assert asked == [100, 103, 106]
