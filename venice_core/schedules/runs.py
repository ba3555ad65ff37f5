"""A store's schedule on working hours, what its scheduled repush (`venice_core.schedules.repush`) and its scheduled
push (`venice_core.schedules.push`) share:

- `cron`: when it runs, a five-field cron expression in the calendar's time zone, or `daily` (once each working
  day, at opening);
- the working-hours calendar (`days`, `hours`, `timezone`, `holidays`, as the swap window has them): runs happen
  only inside it. The DAG runs on the plugin's `BusinessHoursTimetable` (`timetable_args`).

Pure and Airflow-free: each kind adds its own fields (keyword-only) and its name for messages (`KIND`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any, ClassVar, Self

from venice_core.errors import ConfigError
from venice_core.schedules.calendar import BusinessCalendar, CalendarUpdate

DAILY = "daily"
DEFAULT_DAYS, DEFAULT_HOURS, DEFAULT_TIMEZONE = "mon-fri", "9-17", "UTC"


def check_cron(expression: str, kind: str = "") -> str:
    """A five-field cron expression (or `daily`), checked and normalised: ConfigError names what is wrong (`kind`:
    whose schedule it is). Airflow's `@daily` is taken as `daily` (once a day, here at the working day's opening);
    its other presets are refused, saying why: they fire at midnight, outside any working hours."""
    from croniter import croniter

    text = " ".join(expression.split())
    if text.lower() in (DAILY, f"@{DAILY}"):
        return DAILY
    what = f"{kind} schedule" if kind else "schedule"
    if text.startswith("@"):
        raise ConfigError(
            f"invalid {what} {expression!r}: of Airflow's presets only @daily is taken (as '{DAILY}', each working "
            f"day at opening); the others fire at midnight, outside working hours: give a cron expression of five "
            f"fields, e.g. '0 10 * * mon-fri'"
        )
    if len(text.split(" ")) != 5 or not croniter.is_valid(text):
        raise ConfigError(
            f"invalid {what} {expression!r}: a cron expression of five fields (minute hour day month weekday, "
            f"e.g. '0 10 * * mon-fri') or '{DAILY}'"
        )
    return text


def _holidays(value: object) -> tuple[str, ...]:
    """Holidays as a command line gives them (`2026-12-24,2026-12-25`) or as stored (a list)."""
    if isinstance(value, str):
        return tuple(h.strip() for h in value.split(",") if h.strip())
    return tuple(str(h) for h in value) if isinstance(value, Iterable) else ()


@dataclass(frozen=True)
class Schedule:
    cron: str
    days: str = DEFAULT_DAYS
    hours: str = DEFAULT_HOURS
    timezone: str = DEFAULT_TIMEZONE
    holidays: tuple[str, ...] = field(default=())

    KIND: ClassVar[str] = ""  # "repush", "push": what messages call it

    def __post_init__(self) -> None:
        """Checked whole: a bad field is one ConfigError, nothing recorded."""
        check_cron(self.cron, self.KIND)
        try:
            BusinessCalendar.parse(self.days, self.hours, self.timezone, self.holidays)
        except ValueError as exc:  # the calendar's parsers name the value and what it should be
            raise ConfigError(f"invalid {self.KIND} calendar: {exc}") from None

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "holidays": list(self.holidays)}

    @classmethod
    def of(cls, data: Mapping[str, Any] | None) -> Self | None:
        """The schedule a JSON column holds (None: none)."""
        if not data:
            return None
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        return cls(**{**values, "holidays": _holidays(values.get("holidays"))})

    @classmethod
    def updated(cls, current: Self | None, cron: str | None, calendar: CalendarUpdate, **settings: object) -> Self:
        """`current` with what an update gives (None: kept): the cron, calendar fields, the kind's own settings.
        Without a current schedule, the defaults (the caller makes sure the cron and the settings are given)."""
        values: dict[str, Any] = current.to_json() if current is not None else {}
        values.update({k: v for k, v in settings.items() if v is not None})
        values.update(calendar.given())
        if cron is not None:
            values["cron"] = check_cron(cron, cls.KIND)
        return cls(**{**values, "holidays": _holidays(values.get("holidays"))})

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
