"""Region-server instances and the leases they hold in the metadata store.

An instance registers under its (region, instance number) with a token of its own (`owner`) and renews its lease
every second with an UPDATE naming that token. That row is the one source of an instance's liveness: the region's
coordinator moves leadership away from an instance whose lease ran out and places its replicas elsewhere once it has
been gone past the grace period. A second process started under a live instance's id is refused; a lease that ran
out is taken over, and the process that held it learns at its next renewal that it is no longer the instance. So is
the lease of a process that died on this machine (its token names the machine and the pid): a crashed instance
restarts at once, while a paused one (SIGSTOP) still holds its lease.

The coordinator of a region (the instance that places replicas and picks leaders) holds a lease of the same kind in
`region_coordinators`. Both are conditional UPDATEs in one transaction of the metadata database (row locks in
PostgreSQL, the database's write lock in SQLite): the coordination Airflow's HA schedulers rely on, no protocol of
our own. Every lease time is the database's clock (`meta.db.database_now`), written and compared in SQL, never a
caller's: processes on machines whose clocks disagree agree on when a lease runs out. A process judges its own
lease only by durations on its monotonic clock (`server.membership`).
"""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError

from venice_core.errors import VeniceError
from venice_core.host.pids import running
from venice_core.meta import MetadataStore
from venice_core.meta.db import database_now, database_time, rows_matched
from venice_core.meta.models import RegionCoordinator, RegionInstance, Replica


class InstanceAlreadyRunning(VeniceError):
    http_status = 409
    exit_code = 2


@dataclass(frozen=True)
class InstanceState:
    """An instance as `venice status` and the routing table see it."""

    region: str
    instance: int
    host: str
    port: int
    pid: int
    started_at: float
    heartbeat_at: float
    live: bool  # its lease runs
    replicas: int  # replicas placed on it

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


def register(
    meta: MetadataStore, region: str, instance: int, host: str, port: int, owner: str, pid: int, lease: float
) -> None:
    """Take the instance's registration for `owner`, unless another process holds a lease on it that still runs.
    The conditional UPDATE comes first: it takes the database's write lock before anything is read. Times are the
    database's (`database_now`), as every lease's."""
    registration: dict[str, Any] = {
        "host": host, "port": port, "owner": owner, "pid": pid, "started_at": database_now(),
        "heartbeat_at": database_now(), "spare": [],
    }  # fmt: skip
    mine = (RegionInstance.owner == owner) | (RegionInstance.heartbeat_at <= database_now() - lease)
    with meta.session() as session:
        taken = session.execute(
            update(RegionInstance)
            .where(RegionInstance.region == region, RegionInstance.instance == instance, mine)
            .values(**registration)
        )
        if rows_matched(taken) == 1:
            return
        holder = session.get(RegionInstance, (region, instance))
        if holder is not None and _died_here(holder.owner):  # killed on this machine: its lease has no holder
            for field, value in registration.items():
                setattr(holder, field, value)
            return
        if holder is not None:
            renewed = database_time(session) - holder.heartbeat_at
            raise InstanceAlreadyRunning(
                f"instance {instance} of region {region} is already running (pid {holder.pid} on {holder.host}, "
                f"lease renewed {renewed:.1f}s ago): stop it first, or start another instance"
            )
    try:
        with meta.session() as session:
            session.add(RegionInstance(region=region, instance=instance, **registration))
    except IntegrityError:  # another process registered it between our two transactions
        raise InstanceAlreadyRunning(
            f"instance {instance} of region {region} was just registered by another process"
        ) from None


def owner_token() -> str:
    """A process's token on a lease: the machine and the pid (what `register` checks to take over the lease of a
    process killed on this machine at once), and a random part (a restarted process never holds its predecessor's)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


def _died_here(owner: str) -> bool:
    """The lease's holder ran on this machine and is gone."""
    machine, _, rest = owner.partition(":")
    pid_text = rest.partition(":")[0]
    if machine != socket.gethostname() or not pid_text.isdigit():
        return False
    return not running(int(pid_text))


def renew(meta: MetadataStore, region: str, instance: int, owner: str) -> bool:
    """Renew the lease; False if another process has taken the instance over (this one must stop)."""
    with meta.session(announce=False) as session:  # a renewal: liveness is read on its own (`liveness`)
        result = session.execute(
            update(RegionInstance)
            .where(RegionInstance.region == region, RegionInstance.instance == instance, RegionInstance.owner == owner)
            .values(heartbeat_at=database_now())
        )
        return rows_matched(result) == 1


def set_spare(meta: MetadataStore, region: str, instance: int, owner: str, spare: list[str]) -> None:
    """The partitions the instance has data of without holding them (`RegionInstance.spare`)."""
    with meta.session() as session:
        session.execute(
            update(RegionInstance)
            .where(RegionInstance.region == region, RegionInstance.instance == instance, RegionInstance.owner == owner)
            .values(spare=sorted(spare))
        )


def release(meta: MetadataStore, region: str, instance: int, owner: str, lease: float) -> None:
    """On a clean stop: the lease ends now (leadership moves at once); the grace period before the instance's
    replicas are placed elsewhere counts from now, so a restart keeps them."""
    with meta.session() as session:
        session.execute(
            update(RegionInstance)
            .where(RegionInstance.region == region, RegionInstance.instance == instance, RegionInstance.owner == owner)
            .values(heartbeat_at=database_now() - lease)
        )
        session.execute(
            update(RegionCoordinator)
            .where(RegionCoordinator.region == region, RegionCoordinator.owner == owner)
            .values(expires_at=0.0)
        )


def liveness(meta: MetadataStore, region: str, lease: float, grace: float) -> frozenset[tuple[int, bool, bool]]:
    """Each of the region's instances, whether its lease runs and whether it is within its offline grace period: what
    placement and routing read from the clock rather than from a change (renewals move no generation)."""
    with meta.session() as session:
        now = database_time(session)
        rows = session.execute(
            select(RegionInstance.instance, RegionInstance.heartbeat_at).where(RegionInstance.region == region)
        )
        return frozenset((instance, at > now - lease, at > now - grace) for instance, at in rows)


def instances(meta: MetadataStore, lease: float, region: str | None = None) -> list[InstanceState]:
    """Every registered instance (of one region, or all), with whether its lease runs and its replica count."""
    with meta.session() as session:
        now = database_time(session)
        query = select(RegionInstance)
        counts_query = select(Replica.region, Replica.instance)
        if region is not None:
            query = query.where(RegionInstance.region == region)
            counts_query = counts_query.where(Replica.region == region)
        counts: dict[tuple[str, int], int] = {}
        for key in session.execute(counts_query):
            counts[key] = counts.get(key, 0) + 1
        return [
            InstanceState(
                row.region,
                row.instance,
                row.host,
                row.port,
                row.pid,
                row.started_at,
                row.heartbeat_at,
                row.heartbeat_at > now - lease,
                counts.get((row.region, row.instance), 0),
            )
            for row in session.scalars(query.order_by(RegionInstance.region, RegionInstance.instance))
        ]


def hold_coordinator(meta: MetadataStore, region: str, instance: int, owner: str, lease: float) -> bool:
    """Take or renew the region's coordinator lease: True while this instance holds it."""
    mine = (RegionCoordinator.owner == owner) | (RegionCoordinator.expires_at <= database_now())
    with meta.session(announce=False) as session:  # who coordinates is nothing the other instances sync
        taken = session.execute(
            update(RegionCoordinator)
            .where(RegionCoordinator.region == region, mine)
            .values(owner=owner, instance=instance, expires_at=database_now() + lease)
        )
        if rows_matched(taken) == 1:
            return True
        if session.get(RegionCoordinator, region) is not None:
            return False
    try:
        with meta.session(announce=False) as session:
            expires_at = database_now() + lease
            session.add(RegionCoordinator(region=region, owner=owner, instance=instance, expires_at=expires_at))
        return True
    except IntegrityError:
        return False  # another instance took it first
