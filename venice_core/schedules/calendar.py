"""Business hours: working days, daily hours and holidays in a time zone. Pure and Airflow-free: the swap-window
hook and the Airflow business-hours timetable both use it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


def parse_days(text: str) -> frozenset[int]:
    """`mon-fri`, `sat,sun`, `fri-mon` (wrapping) -> weekday numbers (Monday is 0)."""
    days: set[int] = set()
    for part in text.lower().replace(" ", "").split(","):
        first, _, last = part.partition("-")
        if first not in DAYS or (last and last not in DAYS):
            raise ValueError(f"unknown day in {text!r} (use {', '.join(DAYS)})")
        start, end = DAYS.index(first), DAYS.index(last or first)
        days.update(range(start, end + 1) if start <= end else [*range(start, 7), *range(0, end + 1)])
    return frozenset(days)


def parse_hours(text: str) -> tuple[int, int]:
    """`9-17` -> (9, 17): open from 09:00 to 17:00, local time. ValueError naming the text otherwise; a window
    across midnight (`18-6`) is said to be one, as it is not supported."""
    start, _, end = text.partition("-")
    try:
        begin, finish = int(start), int(end)
    except ValueError:
        raise ValueError(f"hours must be like 9-17 within 0-24, got {text!r}") from None
    if 0 <= finish < begin <= 24:
        raise ValueError(
            f"hours {text!r} cross midnight: overnight windows are not supported (hours like 9-17 within 0-24)"
        )
    if not 0 <= begin < finish <= 24:
        raise ValueError(f"hours must be like 9-17 within 0-24, got {text!r}")
    return begin, finish


def parse_zone(text: str) -> ZoneInfo:
    """An IANA time zone (`Europe/Paris`); ValueError naming the text otherwise."""
    try:
        return ZoneInfo(text)
    except (ZoneInfoNotFoundError, ValueError, OSError):  # unknown key; a path; a folder of the zone database
        raise ValueError(f"unknown time zone {text!r} (an IANA zone, e.g. Europe/Paris)") from None


def parse_holiday(text: str) -> date:
    """An ISO date (`2026-12-24`); ValueError naming the text and what is wrong with it otherwise."""
    try:
        return date.fromisoformat(text.strip())
    except ValueError as exc:
        why = "" if "isoformat" in str(exc) else f" ({exc})"  # `month must be in 1..12`, not the text again
        raise ValueError(f"holiday {text.strip()!r} is not a date YYYY-MM-DD{why}") from None


def _plain_utc(at: datetime) -> datetime:
    """A stdlib UTC datetime (Airflow hands pendulum ones, whose differences are not timedeltas)."""
    return datetime.fromtimestamp(at.timestamp(), tz=UTC)


@dataclass(frozen=True)
class BusinessCalendar:
    days: frozenset[int]
    open_hour: int
    close_hour: int
    zone: ZoneInfo
    holidays: frozenset[date] = frozenset()

    @classmethod
    def parse(
        cls, days: str = "mon-fri", hours: str = "9-17", timezone: str = "UTC", holidays: Iterable[str] = ()
    ) -> BusinessCalendar:
        begin, end = parse_hours(hours)
        return cls(
            parse_days(days),
            begin,
            end,
            parse_zone(timezone),
            frozenset(parse_holiday(h) for h in holidays if h.strip()),
        )

    def is_business_day(self, day: date) -> bool:
        return day.weekday() in self.days and day not in self.holidays

    def window(self, day: date) -> tuple[datetime, datetime]:
        """The day's opening and closing times (aware, local zone; DST-correct)."""
        opens = datetime(day.year, day.month, day.day, self.open_hour, tzinfo=self.zone)
        midnight = datetime(day.year, day.month, day.day, tzinfo=self.zone)
        closes = (
            (midnight + timedelta(hours=self.close_hour))
            if self.close_hour < 24
            else datetime.combine(day + timedelta(days=1), datetime.min.time(), tzinfo=self.zone)
        )
        return opens, closes

    def next_open(self, at: datetime, delay: timedelta = timedelta(0), horizon_days: int = 400) -> datetime | None:
        """The first moment at or after `at` when it is business time (the opening delayed by `delay`), in UTC."""
        at = _plain_utc(at)
        local = at.astimezone(self.zone)
        for offset in range(horizon_days):
            day = local.date() + timedelta(days=offset)
            if not self.is_business_day(day):
                continue
            opens, closes = self.window(day)
            opens = opens + delay
            if opens >= closes:
                continue
            if local < closes:
                # Compare in UTC: two times of one zone compare by wall clock, which a DST change skews.
                return max(opens.astimezone(UTC), at.astimezone(UTC))
        return None

    def next_slot(
        self, at: datetime, interval: timedelta, inclusive: bool = True, horizon_days: int = 400
    ) -> datetime | None:
        """The next of the slots `open, open + interval, ...` (before closing) of a business day, at or after
        (`inclusive`) or strictly after `at`; in UTC. Slot arithmetic is in absolute time, each day's opening in
        local time, so a DST change moves the UTC time of the opening and nothing else."""
        at_utc = _plain_utc(at)
        local_day = at_utc.astimezone(self.zone).date()
        for offset in range(-1, horizon_days):
            day = local_day + timedelta(days=offset)
            if not self.is_business_day(day):
                continue
            opens, closes = (t.astimezone(UTC) for t in self.window(day))
            if at_utc >= closes:
                continue
            steps = max(0, -(-(at_utc - opens) // interval))  # ceil, never before the opening
            slot = opens + steps * interval
            if slot == at_utc and not inclusive:
                slot += interval
            if slot < closes:
                return slot
        return None


@dataclass(frozen=True)
class CalendarUpdate:
    """What a store update changes of a schedule's working-hours calendar, as text (`days`, `hours`, `timezone`
    as `BusinessCalendar.parse` takes them; `holidays` ISO dates): each field given, or None (kept). Checked whole
    with the schedule it lands in, which names whose calendar is wrong."""

    days: str | None = None
    hours: str | None = None
    timezone: str | None = None
    holidays: tuple[str, ...] | None = None  # (): none any more

    @classmethod
    def of_options(
        cls, days: str | None, hours: str | None, timezone: str | None, holidays: str | None
    ) -> CalendarUpdate:
        """From a command line's options: holidays as one comma-separated list (`2026-12-24,2026-12-25`; empty:
        none any more)."""
        listed = None if holidays is None else tuple(h.strip() for h in holidays.split(",") if h.strip())
        return cls(days, hours, timezone, listed)

    def given(self) -> dict[str, str | tuple[str, ...]]:
        """The fields the update sets, by name."""
        return {f.name: value for f in fields(self) if (value := getattr(self, f.name)) is not None}
