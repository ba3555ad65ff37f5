"""A partition's ingestion figures, kept up to date by its task (the region server's `/metrics` reads them)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass
class IngestionStats:
    records: int = 0
    duplicates: int = 0
    offset: int = -1  # last consumed offset
    end_offset: int = 0
    started_at: float = field(default_factory=time.monotonic)

    @property
    def lag(self) -> int:
        return max(0, self.end_offset - self.offset - 1)
