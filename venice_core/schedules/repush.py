"""A store's scheduled repush (Venice's log compaction): `venice store update --repush-schedule --repush-ttl`.

- When: a `venice_core.schedules.runs.Schedule` (a cron or `daily`, only inside the working-hours calendar): the
  `venice_repush__<store>` DAG runs on the plugin's `BusinessHoursTimetable`.
- `ttl_seconds`: the threshold. A run repushes only when the store's current version (the newest one a region
  serves) was created more than `ttl_seconds` ago, and skips while it is fresher. For a hybrid store the repush is
  also a TTL repush with the same seconds (`repush.ttl.seconds`): records written more than `ttl_seconds` before
  it are evicted, so no record outlives about twice the threshold. A batch-only store gets a plain repush
  (compaction, sorting, the store's current settings), since Venice refuses TTL on batch-only stores.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import ClassVar

from venice_core.errors import ConfigError
from venice_core.schedules.runs import Schedule

MAX_TTL_SECONDS = 2**31 - 1


def check_ttl(seconds: object) -> int:
    number: int | None = None
    if isinstance(seconds, int) and not isinstance(seconds, bool):
        number = seconds
    elif isinstance(seconds, str) and seconds.strip().isdigit():
        number = int(seconds)
    if number is None or not 1 <= number <= MAX_TTL_SECONDS:
        raise ConfigError(f"repush TTL must be a whole number of seconds from 1 to {MAX_TTL_SECONDS}, got {seconds!r}")
    return number


@dataclass(frozen=True)
class RepushSchedule(Schedule):
    ttl_seconds: int = field(kw_only=True)

    KIND: ClassVar[str] = "repush"

    def __post_init__(self) -> None:
        super().__post_init__()
        check_ttl(self.ttl_seconds)


@dataclass(frozen=True)
class RepushDecision:
    due: bool
    reason: str


def decide(
    current_version: int, created_at: float | None, ttl_seconds: int, in_flight: int | None, now: float | None = None
) -> RepushDecision:
    """Whether a scheduled run repushes: only when the current version is older than the threshold, with no push
    in flight (its version will be fresh)."""
    if not current_version or created_at is None:
        return RepushDecision(False, "the store serves no version yet")
    if in_flight is not None:
        return RepushDecision(False, f"a push of the store is in flight (version {in_flight})")
    age = (time.time() if now is None else now) - created_at
    if age <= ttl_seconds:
        return RepushDecision(
            False, f"version {current_version} is {age:.0f}s old, within the {ttl_seconds}s threshold"
        )
    return RepushDecision(True, f"version {current_version} is {age:.0f}s old, past the {ttl_seconds}s threshold")
