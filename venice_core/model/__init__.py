"""The store and version vocabulary every layer speaks: version and push statuses (`status`) and a hybrid store's
settings (`hybrid`). Plain values, no I/O."""

from venice_core.model.hybrid import HybridSettings
from venice_core.model.status import ExecutionStatus, JobStatus, RegionJobStatus, VersionStatus

__all__ = ["ExecutionStatus", "HybridSettings", "JobStatus", "RegionJobStatus", "VersionStatus"]
