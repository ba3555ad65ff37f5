"""Airflow's states of task instances and DAG runs, as its REST API and database name them, which the UI's read
model (`rollout.view`) and the run follower (`orchestration.airflow.run_following`) compare."""

from __future__ import annotations

from enum import StrEnum


class AirflowState(StrEnum):
    NONE = "none"  # a task instance with no state yet (Airflow's null)
    SCHEDULED = "scheduled"
    QUEUED = "queued"
    RUNNING = "running"
    SUCCESS = "success"
    FAILED = "failed"
    SKIPPED = "skipped"
    UPSTREAM_FAILED = "upstream_failed"
    UP_FOR_RETRY = "up_for_retry"
    UP_FOR_RESCHEDULE = "up_for_reschedule"
    DEFERRED = "deferred"
    AWAITING_INPUT = "awaiting_input"
    RESTARTING = "restarting"
    REMOVED = "removed"


S = AirflowState
ENDED = frozenset({S.SUCCESS, S.FAILED})  # a run's end, or a task's that ran
NEVER_RAN = frozenset({S.SKIPPED, S.UPSTREAM_FAILED, S.REMOVED})  # Airflow stamps their start and end at once
NOT_RUN = frozenset({S.NONE, S.SCHEDULED, S.QUEUED, *NEVER_RAN})
TERMINAL = ENDED | NEVER_RAN
QUIET = frozenset({S.NONE, S.SCHEDULED, S.QUEUED})  # not news to someone following a run
STARTED = frozenset({S.RUNNING, S.DEFERRED, S.AWAITING_INPUT, S.RESTARTING})  # dated by the try's start
SKIPPED = frozenset({S.SKIPPED, S.UPSTREAM_FAILED})  # branches not taken, steps a stop leaves unrun
