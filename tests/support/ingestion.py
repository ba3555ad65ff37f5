"""Wait for regions to ingest a version, for tests that write versions without a rollout."""

from __future__ import annotations

import time
from collections.abc import Callable

from venice_core.controller import versions
from venice_core.jobs.local_push import PushFailed
from venice_core.meta import MetadataStore
from venice_core.status import ExecutionStatus


def wait_for_ingestion(
    meta: MetadataStore,
    store: str,
    number: int,
    regions: list[str],
    progress: Callable[[str], None],
    timeout: float = 300,
) -> None:
    """Until every given region has ingested the version (an ERROR anywhere fails the push)."""
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        status = versions.job_status(meta, store, number)
        line = ", ".join(f"{r}={s.status.value}" for r, s in sorted(status.regions.items()))
        if line != last:
            progress(f"ingestion: {line}")
            last = line
        errors = [f"{r}: {s.details}" for r, s in status.regions.items() if s.status is ExecutionStatus.ERROR]
        if errors:
            raise PushFailed(f"ingestion failed: {'; '.join(errors)}")
        if all(status.regions[r].status is ExecutionStatus.COMPLETED for r in regions if r in status.regions):
            return
        time.sleep(0.5)
    raise PushFailed(f"ingestion did not complete within {timeout:.0f}s")
