"""A clock a test moves by hand, put in place of the `time` module a product module reads: a time that changes only
when the test says, so an assertion about elapsed or changed times does not depend on how fast the machine is."""

from __future__ import annotations


class ManualClock:
    """`time()` and `monotonic()` read the same value, which only `advance` moves."""

    def __init__(self, start: float = 1_000_000.0) -> None:
        self.now = start

    def time(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
