"""The Airflow plugin of the platform: timetables now; operators, sensors and the rollout view next."""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from venice_plugin.timetables import BusinessHoursTimetable


class VenicePlugin(AirflowPlugin):
    name = "venice"
    timetables = [BusinessHoursTimetable]
