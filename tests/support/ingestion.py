"""Wait for regions to ingest a version, for tests that write versions without a rollout; read a partition's
checkpoint while its server holds the database."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rocksdict import AccessType, Options, Rdict

from venice_core.controller import versions
from venice_core.meta import MetadataStore
from venice_core.model.status import ExecutionStatus
from venice_core.rollout.local import PushFailed
from venice_core.storage.ingestion_checkpoint import IngestionCheckpoint
from venice_core.storage.rocksdb import CHECKPOINT_KEY, META_CF
from venice_core.utils.waiting import poll_until


def wait_for_ingestion(
    meta: MetadataStore,
    store: str,
    number: int,
    regions: list[str],
    progress: Callable[[str], None],
    timeout: float = 300,
) -> None:
    """Until every given region has ingested the version (an ERROR anywhere fails the push)."""
    said = [""]  # the last progress line printed

    def ingested() -> bool:
        status = versions.job_status(meta, store, number)
        line = ", ".join(f"{r}={s.status.value}" for r, s in sorted(status.regions.items()))
        if line != said[0]:
            progress(f"ingestion: {line}")
            said[0] = line
        errors = [f"{r}: {s.details}" for r, s in status.regions.items() if s.status is ExecutionStatus.ERROR]
        if errors:
            raise PushFailed(f"ingestion failed: {'; '.join(errors)}")
        return all(status.regions[r].status is ExecutionStatus.COMPLETED for r in regions if r in status.regions)

    poll_until(
        ingested,
        timeout=timeout,
        interval=0.5,
        timeout_error=lambda _: PushFailed(f"ingestion did not complete within {timeout:.0f}s"),
    )


def read_checkpoint(partition_dir: Path) -> IngestionCheckpoint | None:
    """A partition's checkpoint, read from its RocksDB while the server holds it (read-only opens take no lock)."""
    if not (partition_dir / "db" / "CURRENT").exists():
        return None
    try:
        db = Rdict(
            str(partition_dir / "db"),
            Options(raw_mode=True),
            column_families={META_CF: Options(raw_mode=True)},
            access_type=AccessType.read_only(),
        )
    except Exception:  # noqa: BLE001 - a file the server is replacing at this moment: read again at the next poll
        return None
    try:
        raw = db.get_column_family(META_CF).get(CHECKPOINT_KEY)
        return None if raw is None else IngestionCheckpoint.decode(raw)
    finally:
        db.close()
