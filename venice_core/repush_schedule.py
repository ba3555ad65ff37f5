"""A store's scheduled repush (Venice's log compaction): `venice store update --repush-schedule --repush-ttl`.

- `cron`: when the maintenance runs, a five-field cron expression in the calendar's time zone, or `daily` (once
  each working day, at opening). Either way only inside the working-hours calendar (`days`, `hours`, `timezone`,
  `holidays`, as the swap window has them): the `venice_repush__<store>` DAG runs on the plugin's
  `BusinessHoursTimetable`.
- `ttl_seconds`: the threshold. A run repushes only when the store's current version (the newest one a region
  serves) was created more than `ttl_seconds` ago, and skips while it is fresher. For a hybrid store the repush is
  also a TTL repush with the same seconds (`repush.ttl.seconds`): records written more than `ttl_seconds` before
  it are evicted, so no record outlives about twice the threshold. A batch-only store gets a plain repush
  (compaction, sorting, the store's current settings), since Venice refuses TTL on batch-only stores.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from venice_core.calendar import BusinessCalendar
from venice_core.errors import ConfigError

DAILY = "daily"
DEFAULT_DAYS, DEFAULT_HOURS, DEFAULT_TIMEZONE = "mon-fri", "9-17", "UTC"
MAX_TTL_SECONDS = 2**31 - 1


def check_cron(expression: str) -> str:
    """A five-field cron expression (or `daily`), checked: ConfigError names what is wrong."""
    from croniter import croniter

    text = " ".join(expression.split())
    if text == DAILY:
        return text
    if len(text.split(" ")) != 5 or not croniter.is_valid(text):
        raise ConfigError(
            f"invalid repush schedule {expression!r}: a cron expression of five fields (minute hour day month "
            f"weekday, e.g. '0 10 * * mon-fri') or '{DAILY}'"
        )
    return text


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
class RepushSchedule:
    cron: str
    ttl_seconds: int
    days: str = DEFAULT_DAYS
    hours: str = DEFAULT_HOURS
    timezone: str = DEFAULT_TIMEZONE
    holidays: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        """Checked whole: a bad field is one ConfigError, nothing recorded."""
        check_cron(self.cron)
        check_ttl(self.ttl_seconds)
        try:
            BusinessCalendar.parse(self.days, self.hours, self.timezone, self.holidays)
        except Exception as exc:  # noqa: BLE001 - the calendar's parsers raise ValueError, KeyError, ZoneInfo's
            raise ConfigError(
                f"invalid repush calendar: {exc} (days like mon-fri, hours like 9-17, an IANA zone, ISO dates)"
            ) from None

    def to_json(self) -> dict[str, Any]:
        return {
            "cron": self.cron,
            "ttl_seconds": self.ttl_seconds,
            "days": self.days,
            "hours": self.hours,
            "timezone": self.timezone,
            "holidays": list(self.holidays),
        }

    @classmethod
    def of(cls, data: Mapping[str, Any] | None) -> RepushSchedule | None:
        if not data:
            return None
        return cls(
            str(data["cron"]),
            int(data["ttl_seconds"]),
            str(data.get("days", DEFAULT_DAYS)),
            str(data.get("hours", DEFAULT_HOURS)),
            str(data.get("timezone", DEFAULT_TIMEZONE)),
            tuple(data.get("holidays") or ()),
        )

    def timetable_args(self) -> dict[str, Any]:
        """The `BusinessHoursTimetable` arguments: `daily` is one slot a working day (at opening), a cron its fire
        times inside working hours."""
        args: dict[str, Any] = {
            "days": self.days,
            "hours": self.hours,
            "timezone": self.timezone,
            "holidays": list(self.holidays),
        }
        if self.cron == DAILY:
            args["interval_minutes"] = 24 * 60
        else:
            args["cron"] = self.cron
        return args


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
