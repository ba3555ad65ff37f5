"""Da Vinci instances as the rollout sees them (VIP-4's Da Vinci steps).

A Da Vinci client heartbeats with the newest version it has ingested in its region and the version it serves. The
rollout opens a region's gate once `pre_start_of_store_version_ingestion_for_da_vinci` lets it (the region's clients
may then start ingesting the new version). Once the region's servers have ingested it, the rollout lets the region's
clients swap (`open_swap`: each serves the version as soon as it has it, ahead of the servers) and waits for the live
ones to report that they serve it (`not_serving`) before it asks `post_start_of_store_version_ingestion_for_da_vinci`
and, later, swaps the region's servers: VIP-4's "DVC Read Traffic SERVING" before "Server Read Traffic SERVING". An
instance silent for `LIVE_SECONDS` is not waited for; none registered, nothing to wait for.
"""

from __future__ import annotations

import time

from sqlalchemy import select

from venice_core.meta import MetadataStore
from venice_core.meta.db import database_now, database_time, retry_on_conflict
from venice_core.meta.models import DaVinciInstance, Version
from venice_core.model.status import ExecutionStatus

LIVE_SECONDS = 60.0


@retry_on_conflict()
def heartbeat(
    meta: MetadataStore,
    store: str,
    region: str,
    instance_id: str,
    version: int | None = None,
    status: ExecutionStatus | None = None,
    serving: int | None = None,
) -> None:
    """An instance says it is alive, and (optionally) which version it has ingested and how far, and which version
    it serves."""
    with meta.session(announce=False) as session:  # nothing a region server syncs
        row = session.get(DaVinciInstance, (store, region, instance_id))
        if row is None:
            row = DaVinciInstance(store_name=store, region=region, instance_id=instance_id, version=0, status="")
            session.add(row)
        if version is not None:
            row.version = version
        if status is not None:
            row.status = status.value
        if serving is not None:
            row.serving = serving
        row.heartbeat_at = database_now()  # the database's clock, which `_live` judges by: not the client's


@retry_on_conflict()
def deregister(meta: MetadataStore, store: str, region: str, instance_id: str) -> None:
    """A client that stops cleanly leaves the registry at once: no rollout waits the live window out for it."""
    with meta.session() as session:
        row = session.get(DaVinciInstance, (store, region, instance_id))
        if row is not None:
            session.delete(row)


def _live(meta: MetadataStore, store: str, region: str, now: float | None) -> list[DaVinciInstance]:
    with meta.session() as session:
        cutoff = (database_time(session) if now is None else now) - LIVE_SECONDS
        return list(
            session.scalars(
                select(DaVinciInstance).where(
                    DaVinciInstance.store_name == store,
                    DaVinciInstance.region == region,
                    DaVinciInstance.heartbeat_at >= cutoff,
                )
            )
        )


def pending(meta: MetadataStore, store: str, region: str, version: int, now: float | None = None) -> list[str]:
    """The live instances in `region` that have not ingested `version` yet."""
    done = ExecutionStatus.COMPLETED.value
    return sorted(
        r.instance_id
        for r in _live(meta, store, region, now)
        if not (r.version > version or (r.version, r.status) == (version, done))
    )


def not_serving(meta: MetadataStore, store: str, region: str, version: int, now: float | None = None) -> list[str]:
    """The live instances in `region` that do not serve `version` (or a newer one) yet."""
    return sorted(r.instance_id for r in _live(meta, store, region, now) if r.serving < version)


def open_swap(meta: MetadataStore, store: str, version: int, region: str) -> float:
    """Let the region's clients serve `version` ahead of the region's servers; when they were first let (the
    clock of the rollout's Da Vinci swap timeout). Idempotent; serialised with the version's other lifecycle writes
    (its details are rewritten whole)."""
    with meta.locked_session() as session:
        row = session.get(Version, (store, version), with_for_update=True)
        if row is None:
            return time.time()
        swaps = row.lifecycle.da_vinci_swaps
        if region not in swaps:
            opened = time.time()
            row.update_lifecycle(da_vinci_swaps={**swaps, region: opened})
            return opened
        return swaps[region]


def swap_open(meta: MetadataStore, store: str, version: int, region: str) -> bool:
    """May the region's clients serve `version` ahead of the region's servers?"""
    with meta.session() as session:
        row = session.get(Version, (store, version))
        return row is not None and region in row.lifecycle.da_vinci_swaps


def open_gate(meta: MetadataStore, store: str, version: int, region: str) -> None:
    with meta.locked_session() as session:  # (serialised with the version's other lifecycle writes)
        row = session.get(Version, (store, version), with_for_update=True)
        if row is None:
            return
        opened = row.lifecycle.da_vinci_regions
        if region not in opened:
            row.update_lifecycle(da_vinci_regions=(*opened, region))


def gate_open(meta: MetadataStore, store: str, version: int, region: str) -> bool:
    """May the region's Da Vinci clients start ingesting `version`?"""
    with meta.session() as session:
        row = session.get(Version, (store, version))
        return row is not None and region in row.lifecycle.da_vinci_regions


def instances(meta: MetadataStore, store: str | None = None, now: float | None = None) -> list[dict[str, object]]:
    """Every registered instance (of one store, or all), with its version, status and whether it is live."""
    with meta.session() as session:
        now = database_time(session) if now is None else now
        query = select(DaVinciInstance).order_by(
            DaVinciInstance.store_name, DaVinciInstance.region, DaVinciInstance.instance_id
        )
        if store is not None:
            query = query.where(DaVinciInstance.store_name == store)
        return [
            {
                "store": r.store_name,
                "region": r.region,
                "instance": r.instance_id,
                "version": r.version,
                "status": r.status or "",
                "serving": r.serving,
                "heartbeat_age_seconds": round(now - r.heartbeat_at, 1),
                "live": now - r.heartbeat_at < LIVE_SECONDS,
            }
            for r in session.scalars(query)
        ]
