"""Version statuses and per-region push statuses, with Venice's names."""

from __future__ import annotations

from enum import StrEnum


class VersionStatus(StrEnum):
    STARTED = "STARTED"
    PUSHED = "PUSHED"  # ingested everywhere, waiting for the swap
    ONLINE = "ONLINE"
    PARTIALLY_ONLINE = "PARTIALLY_ONLINE"
    ERROR = "ERROR"
    KILLED = "KILLED"
    ROLLED_BACK = "ROLLED_BACK"


IN_FLIGHT = frozenset({VersionStatus.STARTED, VersionStatus.PUSHED})
HOSTABLE = frozenset(
    {
        VersionStatus.STARTED,
        VersionStatus.PUSHED,
        VersionStatus.ONLINE,
        VersionStatus.PARTIALLY_ONLINE,
        VersionStatus.ROLLED_BACK,
    }
)


class ExecutionStatus(StrEnum):
    NEW = "NEW"
    STARTED = "STARTED"
    PROGRESS = "PROGRESS"
    END_OF_PUSH_RECEIVED = "END_OF_PUSH_RECEIVED"
    COMPLETED = "COMPLETED"
    ERROR = "ERROR"


def aggregate(statuses: list[ExecutionStatus]) -> ExecutionStatus:
    """Parent-style aggregation: any error is an error; all completed is completed; else in progress."""
    if not statuses:
        return ExecutionStatus.NEW
    if ExecutionStatus.ERROR in statuses:
        return ExecutionStatus.ERROR
    if all(s is ExecutionStatus.COMPLETED for s in statuses):
        return ExecutionStatus.COMPLETED
    if all(s is ExecutionStatus.NEW for s in statuses):
        return ExecutionStatus.NEW
    if all(s in (ExecutionStatus.END_OF_PUSH_RECEIVED, ExecutionStatus.COMPLETED) for s in statuses):
        return ExecutionStatus.END_OF_PUSH_RECEIVED
    return ExecutionStatus.PROGRESS
