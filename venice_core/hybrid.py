"""A hybrid store's settings, with Venice's names and meanings: a store whose versions, after END_OF_PUSH, also
take the nearline writes of every region's real-time topic.

- `rewind_seconds`: a new version replays the real-time topics from (its END_OF_PUSH time minus this), so the
  nearline writes made while it was pushed are in it.
- `offset_lag_threshold`: a region's version is ready to swap once its real-time lag (records behind the end of
  every region's real-time topic, summed over them, per partition) is at most this.

A version records the settings it was created with (`VersionLifecycle.hybrid`): a store made hybrid, or batch-only
again, changes its next version, never one already created.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

DEFAULT_OFFSET_LAG_THRESHOLD = 1000


@dataclass(frozen=True)
class HybridSettings:
    rewind_seconds: int
    offset_lag_threshold: int = DEFAULT_OFFSET_LAG_THRESHOLD

    def to_json(self) -> dict[str, int]:
        return {"rewind_seconds": self.rewind_seconds, "offset_lag_threshold": self.offset_lag_threshold}

    @classmethod
    def of(cls, data: Mapping[str, Any] | None) -> HybridSettings | None:
        if not data:
            return None
        return cls(int(data["rewind_seconds"]), int(data["offset_lag_threshold"]))
