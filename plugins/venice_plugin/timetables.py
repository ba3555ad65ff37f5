"""A business-hours timetable: runs every `interval_minutes` from opening to closing on working days that are not
holidays, in a time zone. DAG files import it from here (the plugin registers this very class):

    from venice_plugin.timetables import BusinessHoursTimetable
    schedule=BusinessHoursTimetable(days="mon-fri", hours="9-17", timezone="Europe/Paris",
                                    holidays=["2026-12-25"], interval_minutes=60)

With `cron` (a five-field expression, read in the timetable's zone) the runs are the cron's times that fall inside
working hours, instead of every interval from opening (a store's `--repush-schedule`, `--push-schedule`:
`BusinessHoursTimetable.of(schedule)`).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, cast
from zoneinfo import ZoneInfo

import pendulum
from airflow.timetables.base import DagRunInfo, DataInterval, TimeRestriction, Timetable

from venice_core.schedules.calendar import BusinessCalendar
from venice_core.schedules.runs import Schedule


class BusinessHoursTimetable(Timetable):
    def __init__(
        self,
        days: str = "mon-fri",
        hours: str = "9-17",
        timezone: str = "UTC",
        holidays: list[str] | tuple[str, ...] = (),
        interval_minutes: int = 60,
        cron: str | None = None,
    ) -> None:
        if interval_minutes <= 0:
            raise ValueError(f"interval_minutes must be positive, got {interval_minutes}")
        self._settings: dict[str, Any] = {
            "days": days,
            "hours": hours,
            "timezone": timezone,
            "holidays": list(holidays),
            "interval_minutes": interval_minutes,
        }
        if cron is not None:
            from croniter import croniter

            if not croniter.is_valid(cron):
                raise ValueError(f"invalid cron expression {cron!r}")
            self._settings["cron"] = cron
        self.cron = cron
        self.calendar = BusinessCalendar.parse(days, hours, timezone, holidays)
        self.interval = timedelta(minutes=interval_minutes)
        if cron:
            when = f"cron {cron}"
        elif self.interval >= timedelta(hours=self.calendar.close_hour - self.calendar.open_hour):
            when = "daily at opening"  # one slot a working day (a schedule's `daily`)
        else:
            when = f"every {interval_minutes} min"
        count = len(self._settings["holidays"])
        self.description = f"{when}, within {hours} h on {days} ({timezone})" + (
            f", {count} holiday{'s' * (count != 1)}" if count else ""
        )

    @classmethod
    def of(cls, schedule: Schedule) -> BusinessHoursTimetable:
        """The timetable of a store's schedule (its scheduled repush, its scheduled push)."""
        return cls(**schedule.timetable_args())

    @property
    def summary(self) -> str:
        return self.description

    def serialize(self) -> dict[str, Any]:
        return dict(self._settings)

    @classmethod
    def deserialize(cls, data: dict[str, Any]) -> BusinessHoursTimetable:
        return cls(**data)

    def infer_manual_data_interval(self, *, run_after: pendulum.DateTime) -> DataInterval:
        return DataInterval.exact(run_after)

    def next_dagrun_info(
        self, *, last_automated_data_interval: DataInterval | None, restriction: TimeRestriction
    ) -> DagRunInfo | None:
        if last_automated_data_interval is not None:
            start, inclusive = last_automated_data_interval.start, False
        elif restriction.earliest is not None:
            start, inclusive = restriction.earliest, True
        else:
            return None
        if not restriction.catchup:
            now = pendulum.now("UTC")
            if now > start:
                start, inclusive = now, True
        slot = (
            self._next_cron(start, inclusive) if self.cron else self.calendar.next_slot(start, self.interval, inclusive)
        )
        if slot is None or (restriction.latest is not None and slot > restriction.latest):
            return None
        return DagRunInfo.exact(pendulum.instance(slot))

    def _next_cron(self, start: datetime, inclusive: bool, horizon_days: int = 400) -> datetime | None:
        """The first of the cron's times at or after (`inclusive`) or after `start` that is inside working hours."""
        from croniter import croniter

        local = datetime.fromtimestamp(start.timestamp(), ZoneInfo(self._settings["timezone"]))
        times = croniter(self.cron, local - timedelta(seconds=1) if inclusive else local)
        limit = local + timedelta(days=horizon_days)
        while (at := cast(datetime, times.get_next(datetime))) <= limit:
            if self.calendar.next_open(at) == at:  # inside a working window
                return at.astimezone(UTC)
        return None
