"""Which push jobs have ended. A rollout run pushes once: when an operator clears a run in Airflow after its push
ended (with a version, whatever became of it, or before it created one), its steps find the push here and run
nothing of it again, rather than push an old input over newer data."""

from __future__ import annotations

import time

from sqlalchemy.orm import Session

from venice_core.meta import MetadataStore
from venice_core.meta.models import EndedPushJob


def record_ended(session: Session, store: str, push_job_id: str, reason: str) -> None:
    """The push job has ended, for `reason` (the first end recorded is kept), in the caller's transaction."""
    if push_job_id and session.get(EndedPushJob, push_job_id) is None:
        session.add(EndedPushJob(push_job_id=push_job_id, store_name=store, reason=reason, ended_at=time.time()))


def end(meta: MetadataStore, store: str, push_job_id: str, reason: str) -> None:
    """`record_ended` in a transaction of its own (a run that ended before it created a version)."""
    with meta.session() as session:
        record_ended(session, store, push_job_id, reason)


def ended(meta: MetadataStore, push_job_id: str) -> str | None:
    """Why the push job ended (possibly ""), or None while it has not."""
    with meta.session() as session:
        row = session.get(EndedPushJob, push_job_id)
        return None if row is None else row.reason
