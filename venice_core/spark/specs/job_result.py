"""What a push or repush job reports, in its result file (`--result-file`): what it wrote, or why it refused its
input. The job writes it; `rollout.local`, the rollout's END_OF_PUSH step and the DAG's `PushJobOperator` read it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class RepushStats:
    """Where a repush read, its plan (`map-only` or `shuffled`), and what its compaction left out or kept."""

    source: str
    plan: str
    tombstones: int = 0
    expired: int = 0
    deleted: int = 0
    superseded: int = 0


@dataclass(frozen=True)
class JobResult:
    """A job's result: the records it wrote to each Kafka partition (keyed by the partition's number as text, as
    END_OF_PUSH carries them), their sum, the value schema (a push's; a repush writes each record with its own),
    and a repush's stats. Or, instead, `refused`: the job refused its input or store, so running it again would
    not change the outcome."""

    record_counts: Mapping[str, int] = field(default_factory=dict)
    records: int = 0
    schema_id: int | None = None
    repush: RepushStats | None = None
    refused: str | None = None

    def to_json(self) -> dict[str, Any]:
        if self.refused is not None:
            return {"refused": self.refused}
        data = asdict(self)
        data["record_counts"] = dict(self.record_counts)
        del data["refused"]
        if self.repush is None:
            del data["repush"]
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> JobResult:
        repush = data.get("repush")
        return cls(
            {str(p): int(n) for p, n in (data.get("record_counts") or {}).items()},
            int(data.get("records", 0)),
            data.get("schema_id"),
            None if repush is None else RepushStats(**repush),
            data.get("refused"),
        )

    def write(self, path: Path) -> None:
        """Written whole or not at all (renamed into place): a reader that polls for it never sees half of it."""
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{path.name}.partial")
        partial.write_text(json.dumps(self.to_json()))
        partial.replace(path)

    @classmethod
    def read(cls, path: Path) -> JobResult:
        return cls.from_json(json.loads(path.read_text()))


def refusal(path: Path) -> str | None:
    """Why the job refused its input (a missing field, an incompatible schema, ...), if its result file says that is
    how it ended: a failure that running the job again would not change. None when it has no readable result."""
    try:
        return JobResult.read(path).refused
    except (OSError, ValueError):
        return None
