"""The business-hours timetable, across weekends, holidays and DST changes, and its registration by the plugin."""

from __future__ import annotations

import pendulum
import pytest
from airflow.timetables.base import DataInterval, TimeRestriction
from venice_plugin.timetables import BusinessHoursTimetable


def utc(*args: int) -> pendulum.DateTime:
    return pendulum.datetime(*args, tz="UTC")


def runs(timetable: BusinessHoursTimetable, earliest: pendulum.DateTime, count: int) -> list[str]:
    restriction = TimeRestriction(earliest=earliest, latest=None, catchup=True)
    last, out = None, []
    for _ in range(count):
        info = timetable.next_dagrun_info(last_automated_data_interval=last, restriction=restriction)
        out.append(info.run_after.in_tz(timetable.calendar.zone.key).strftime("%a %Y-%m-%d %H:%M %Z"))
        last = info.data_interval
    return out


def test_runs_every_interval_within_hours_and_skips_the_weekend() -> None:
    timetable = BusinessHoursTimetable(hours="9-12", interval_minutes=90)
    assert runs(timetable, utc(2026, 11, 20, 8, 0), 5) == [
        "Fri 2026-11-20 09:00 UTC",
        "Fri 2026-11-20 10:30 UTC",
        "Mon 2026-11-23 09:00 UTC",
        "Mon 2026-11-23 10:30 UTC",
        "Tue 2026-11-24 09:00 UTC",
    ]


def test_an_earliest_inside_the_window_starts_at_the_next_slot() -> None:
    timetable = BusinessHoursTimetable(hours="9-17", interval_minutes=60)
    assert runs(timetable, utc(2026, 11, 18, 10, 20), 2) == ["Wed 2026-11-18 11:00 UTC", "Wed 2026-11-18 12:00 UTC"]
    assert runs(timetable, utc(2026, 11, 18, 11, 0), 1) == ["Wed 2026-11-18 11:00 UTC"]


def test_holidays_are_skipped() -> None:
    timetable = BusinessHoursTimetable(hours="9-10", holidays=["2026-12-25", "2026-12-28"])
    assert runs(timetable, utc(2026, 12, 24, 12, 0), 2) == ["Tue 2026-12-29 09:00 UTC", "Wed 2026-12-30 09:00 UTC"]


@pytest.mark.parametrize(
    ("earliest", "expected_utc_hour"),
    [
        (utc(2026, 3, 6, 22, 0), 13),  # after spring forward: 09:00 EDT is 13:00 UTC
        (utc(2026, 10, 30, 22, 0), 14),  # after fall back: 09:00 EST is 14:00 UTC
    ],
)
def test_opening_follows_local_time_across_dst(earliest: pendulum.DateTime, expected_utc_hour: int) -> None:
    timetable = BusinessHoursTimetable(hours="9-17", timezone="America/New_York")
    restriction = TimeRestriction(earliest=earliest, latest=None, catchup=True)
    info = timetable.next_dagrun_info(last_automated_data_interval=None, restriction=restriction)
    assert info.run_after.weekday() == 0 and info.run_after.hour == expected_utc_hour
    assert info.run_after.in_tz("America/New_York").hour == 9


def test_latest_and_catchup_restrictions() -> None:
    timetable = BusinessHoursTimetable()
    restriction = TimeRestriction(earliest=utc(2026, 11, 20, 18, 0), latest=utc(2026, 11, 22, 0, 0), catchup=True)
    assert timetable.next_dagrun_info(last_automated_data_interval=None, restriction=restriction) is None
    no_catchup = TimeRestriction(earliest=utc(2020, 1, 1), latest=None, catchup=False)
    info = timetable.next_dagrun_info(last_automated_data_interval=None, restriction=no_catchup)
    assert info.run_after >= pendulum.now("UTC").subtract(seconds=1)
    last = DataInterval.exact(utc(2026, 11, 20, 16, 0))
    info = timetable.next_dagrun_info(
        last_automated_data_interval=last,
        restriction=TimeRestriction(earliest=utc(2026, 1, 1), latest=None, catchup=True),
    )
    assert info.run_after == utc(2026, 11, 23, 9, 0)


def test_serialisation_round_trip_and_validation() -> None:
    timetable = BusinessHoursTimetable(
        days="tue-sat", hours="8-18", timezone="Europe/Paris", holidays=["2026-07-14"], interval_minutes=30
    )
    again = BusinessHoursTimetable.deserialize(timetable.serialize())
    assert again.serialize() == timetable.serialize() and again.summary == timetable.summary
    with pytest.raises(ValueError, match="unknown day"):
        BusinessHoursTimetable(days="mon-fry")
    with pytest.raises(ValueError, match="hours '17-9' cross midnight: overnight windows are not supported"):
        BusinessHoursTimetable(hours="17-9")
    with pytest.raises(ValueError, match="hours must be like 9-17 within 0-24, got '9-25'"):
        BusinessHoursTimetable(hours="9-25")


def test_the_plugin_registers_the_timetable() -> None:
    from airflow import plugins_manager

    plugins_manager.ensure_plugins_loaded()
    assert "venice" in str(plugins_manager.get_plugin_info())
    registered = plugins_manager.get_timetables_plugins()
    assert any(name.endswith("BusinessHoursTimetable") for name in registered), registered
