"""Version statuses and per-region push statuses, with Venice's names."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class VersionStatus(StrEnum):
    NOT_CREATED = "NOT_CREATED"  # what pre_store_version_creation sees: the version about to be created
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
    NOT_CREATED = "NOT_CREATED"
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


@dataclass(frozen=True)
class RegionJobStatus:
    status: ExecutionStatus
    updated_at: float  # when the region's push status last changed (VIP-4)
    details: str = ""
    serving: bool = False  # the region's current version is this one
    current_since: float | None = None  # when the region's current version last changed (its last swap)
    da_vinci_swap_at: float | None = None  # when the region's Da Vinci clients were let serve this version
    da_vinci_not_serving: tuple[str, ...] = ()  # the region's live Da Vinci clients that do not serve it (yet)


@dataclass(frozen=True)
class JobStatus:
    """VIP-4's JobStatusQueryResponse: the overall status plus each region's status and when it last changed."""

    store: str
    version: int
    version_status: VersionStatus
    overall: ExecutionStatus
    regions: dict[str, RegionJobStatus]

    def to_json(self) -> dict[str, Any]:
        return {
            "store": self.store,
            "version": self.version,
            "version_status": self.version_status.value,
            "overall": self.overall.value,
            "regions": {
                r: {
                    "status": s.status.value,
                    "updated_at": s.updated_at,
                    "details": s.details,
                    "serving": s.serving,
                    "current_since": s.current_since,
                    "da_vinci_swap_at": s.da_vinci_swap_at,
                    "da_vinci_not_serving": list(s.da_vinci_not_serving),
                }
                for r, s in self.regions.items()
            },
        }
