"""A hybrid store's settings, with Venice's names and meanings: a store whose versions, after END_OF_PUSH, also
take the nearline writes of every region's real-time topic.

- `rewind_seconds`: a new version replays the real-time topics from (its END_OF_PUSH time minus this), so the
  nearline writes made while it was pushed are in it.
- `offset_lag_threshold`: a region's version is ready to swap once its real-time lag (records behind the end of
  every region's real-time topic, summed over them, per partition) is at most this.
- `replay_after_ms` (a version's own, never a store's): a TTL repush's cut-off. Its version's replay starts after
  it whatever the rewind (a day), and takes no nearline write stamped at or before it (a write's stamp is its
  logical time, which may be older than when it was produced): the TTL evicted those.

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
    replay_after_ms: int | None = None

    def to_json(self) -> dict[str, int]:
        data = {"rewind_seconds": self.rewind_seconds, "offset_lag_threshold": self.offset_lag_threshold}
        if self.replay_after_ms is not None:
            data["replay_after_ms"] = self.replay_after_ms
        return data

    def replay_from_ms(self, end_of_push_ms: int) -> int:
        """Where the real-time replay starts (a Kafka time): END_OF_PUSH's time minus the rewind, but never at or
        before `replay_after_ms`."""
        start = end_of_push_ms - self.rewind_seconds * 1000
        return start if self.replay_after_ms is None else max(start, self.replay_after_ms + 1)

    @classmethod
    def of(cls, data: Mapping[str, Any] | None) -> HybridSettings | None:
        if not data:
            return None
        after = data.get("replay_after_ms")
        return cls(
            int(data["rewind_seconds"]), int(data["offset_lag_threshold"]), None if after is None else int(after)
        )
