"""VIP-4's `/job` reply for one store-version: the controller's JobStatusQueryResponse extended, as the seed asks,
with each region's status and the time it last changed; and the hooks' latest answers. Served by the Airflow
plugin at `/venice/api/job/<store>/<version>` and printed by `venice rollout status --json`."""

from __future__ import annotations

from typing import Any

from venice_core.controller import versions
from venice_core.hooks.records import latest_answers
from venice_core.meta import MetadataStore


def job_reply(meta: MetadataStore, store: str, number: int) -> dict[str, Any]:
    """The version's status, its overall execution status, each region's status, status-update time (epoch
    seconds), details and serving state, and each hook's latest answer at each function of its push."""
    reply = versions.job_status(meta, store, number).to_json()
    push_job_id = versions.get_version(meta, store, number).push_job_id
    reply["push_job_id"] = push_job_id
    reply["hook_answers"] = latest_answers(meta, push_job_id) if push_job_id else []
    return reply
