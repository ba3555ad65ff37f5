"""What a store's generated DAG file builds its DAG from (`orchestration.airflow.store_dags` writes it,
`venice_plugin.store_dags` reads it): the store's rollout DAG from its name, rollout order and push schedule, its
scheduled repush DAG from its name and repush schedule. In the file, a spec is one JSON text; the DAG built from it
carries that text's fingerprint in its doc, which Airflow's API shows, so the platform can tell whether Airflow
has parsed a file's current text (a parse that read a file while it was rewritten finishes after the write)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from venice_core.rollout.names import repush_dag_id, rollout_dag_id
from venice_core.schedules.push import PushSchedule
from venice_core.schedules.repush import RepushSchedule


@dataclass(frozen=True)
class RolloutDagSpec:
    store: str
    rollout_order: tuple[str, ...]
    push: PushSchedule | None = None

    BUILDER = "rollout_dag"  # the function of `venice_plugin.store_dags` that builds it

    @property
    def dag_id(self) -> str:
        return rollout_dag_id(self.store)

    def to_json(self) -> dict[str, Any]:
        return {
            "store": self.store,
            "rollout_order": list(self.rollout_order),
            "push": None if self.push is None else self.push.to_json(),
        }

    @classmethod
    def of(cls, data: Mapping[str, Any]) -> RolloutDagSpec:
        return cls(data["store"], tuple(data["rollout_order"]), PushSchedule.of(data.get("push")))


@dataclass(frozen=True)
class RepushDagSpec:
    store: str
    repush: RepushSchedule

    BUILDER = "repush_dag"

    @property
    def dag_id(self) -> str:
        return repush_dag_id(self.store)

    def to_json(self) -> dict[str, Any]:
        return {"store": self.store, "repush": self.repush.to_json()}

    @classmethod
    def of(cls, data: Mapping[str, Any]) -> RepushDagSpec:
        schedule = RepushSchedule.of(data.get("repush"))
        if schedule is None:
            raise ValueError(f"no repush schedule in {dict(data)}")
        return cls(data["store"], schedule)


DagSpec = RolloutDagSpec | RepushDagSpec


def encode(spec: DagSpec) -> str:
    """The spec's text in its file (the same spec, the same text)."""
    return json.dumps(spec.to_json(), sort_keys=True)


def fingerprint(text: str) -> str:
    """A spec text's fingerprint, as the DAG built from it shows it (`doc_line`)."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def doc_line(text: str) -> str:
    """The line a DAG built from a spec text carries in its doc."""
    return f"Built from its file's settings {fingerprint(text)} (written by the platform at each store change)."
