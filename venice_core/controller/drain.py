"""Drain notifications (Samza's `DrainNotification` and `DrainUtils`, seed 004), kept in the metadata store
namespaced by pipeline (table `drain_notifications`).

A notification names the run it is meant for (`run_id`): every start of a pipeline is a new run, so a notification
left over from an earlier run (a drain that timed out, then a restart) is stale and ignored by the running job. It
is deleted only after the run it names has stopped cleanly (`cleanup`), by that run.
"""

from __future__ import annotations

import enum
import json
import uuid as uuid_module
from dataclasses import dataclass
from uuid import UUID

from sqlalchemy import delete, select

from venice_core.errors import ConfigError
from venice_core.meta.db import MetadataStore, rows_matched
from venice_core.meta.models import DrainNotificationRecord


class DrainMode(enum.Enum):
    """How to drain; the seed defines one mode."""

    DEFAULT = "DEFAULT"


@dataclass(frozen=True)
class DrainNotification:
    """A request to drain one run of a pipeline: all three fields required, as in the seed."""

    uuid: UUID
    run_id: str
    drain_mode: DrainMode

    def __post_init__(self) -> None:
        if not isinstance(self.uuid, UUID):
            raise ConfigError(f"a drain notification's uuid must be a UUID, got {self.uuid!r}")
        if not isinstance(self.run_id, str) or not self.run_id:
            raise ConfigError("a drain notification needs the run id it is meant for")
        if not isinstance(self.drain_mode, DrainMode):
            raise ConfigError(f"a drain notification's mode must be a DrainMode, got {self.drain_mode!r}")

    @classmethod
    def create(cls, uuid: UUID, run_id: str) -> DrainNotification:
        """A notification in `DrainMode.DEFAULT`."""
        return cls(uuid, run_id, DrainMode.DEFAULT)

    def to_json(self) -> str:
        return json.dumps({"uuid": str(self.uuid), "runId": self.run_id, "drainMode": self.drain_mode.value})

    @classmethod
    def from_json(cls, text: str) -> DrainNotification:
        try:
            data = json.loads(text)
            return cls(UUID(data["uuid"]), data["runId"], DrainMode(data["drainMode"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"not a drain notification: {text[:200]!r} ({exc})") from None


@dataclass(frozen=True)
class StoredNotification:
    """A notification as stored for a pipeline, with the drain timeout its request gave (None: the job's default)."""

    notification: DrainNotification
    timeout_seconds: float | None = None


def write(meta: MetadataStore, pipeline: str, run_id: str, timeout_seconds: float | None = None) -> DrainNotification:
    """Write a new notification for `run_id` of `pipeline` (DrainUtils.writeDrainNotification)."""
    notification = DrainNotification.create(uuid_module.uuid4(), run_id)
    if timeout_seconds is not None and timeout_seconds <= 0:
        raise ConfigError("the drain timeout must be positive")
    with meta.session() as session:
        session.add(
            DrainNotificationRecord(
                uuid=str(notification.uuid),
                pipeline=pipeline,
                payload=notification.to_json(),
                timeout_seconds=timeout_seconds,
            )
        )
    return notification


def read(meta: MetadataStore, pipeline: str) -> list[StoredNotification]:
    """Every notification of the pipeline, oldest first (DrainUtils.readDrainNotifications)."""
    r = DrainNotificationRecord
    with meta.session() as session:
        rows = session.scalars(select(r).where(r.pipeline == pipeline).order_by(r.created_at, r.uuid))
        return [StoredNotification(DrainNotification.from_json(row.payload), row.timeout_seconds) for row in rows]


def for_run(meta: MetadataStore, pipeline: str, run_id: str) -> StoredNotification | None:
    """The notification meant for this run, if any; those of other runs are stale and ignored."""
    return next((n for n in read(meta, pipeline) if n.notification.run_id == run_id), None)


def cleanup(meta: MetadataStore, pipeline: str, run_id: str | None = None) -> int:
    """Delete the pipeline's notifications (only `run_id`'s, if given): after a clean stop
    (DrainUtils.cleanup). Returns how many."""
    r = DrainNotificationRecord
    with meta.session() as session:
        query = delete(r).where(r.pipeline == pipeline)
        if run_id is not None:
            ids = [
                row.uuid
                for row in session.scalars(select(r).where(r.pipeline == pipeline))
                if DrainNotification.from_json(row.payload).run_id == run_id
            ]
            query = query.where(r.uuid.in_(ids))
        return rows_matched(session.execute(query))
