"""When work runs: working-hours calendars, and the schedules built on them.

- `calendar`: `BusinessCalendar` (working days, hours, holidays, time zone), what the swap-window hook and the
  plugin's business-hours timetable share;
- `runs`: `Schedule`, a cron (or `daily`) inside such a calendar;
- `push`: a store's scheduled push (`PushSchedule`, with the Jinja template of its input);
- `repush`: a store's scheduled repush (`RepushSchedule` and its TTL decision)."""

from venice_core.schedules.calendar import BusinessCalendar
from venice_core.schedules.runs import Schedule

__all__ = ["BusinessCalendar", "Schedule"]
