"""A region server reads the metadata store in full only when something moved: its generation (any committed change
but a lease's renewal), which instances are live, a `POST /sync`, or FULL_SYNC_SECONDS gone by. The rest of the time a
sync is two small reads (the generation and the region's leases): the region servers' 1-second syncs were most of
their CPU, and theirs the largest share of a test run's (profiled)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import update

from tests.support.metadata import migrated
from tests.support.platform import make_platform_env
from venice_core.meta.models import RegionInstance
from venice_core.server import region_server
from venice_core.server.region_server import RegionServer


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[RegionServer, list[bool]]]:
    """A registered instance of dc-0 (no broker needed: no version to host) and the full reads it made, each
    recorded with whether it coordinated."""
    config = make_platform_env(tmp_path / "home").config
    server = RegionServer(config, "dc-0")
    migrated(server.meta)
    reads: list[bool] = []
    read_all = server._read_all

    def recorded(coordinating: bool) -> None:
        reads.append(coordinating)
        read_all(coordinating)

    server._read_all = recorded  # type: ignore[method-assign]  # counted, then done as ever
    server.register("127.0.0.1", 1)
    yield server, reads
    server.membership.release()
    server.meta.dispose()


def test_the_first_sync_reads_everything_and_an_unchanged_store_nothing_more(server: tuple) -> None:
    instance, reads = server
    instance.sync_once()
    assert reads == [True]  # the region's only instance: it coordinates
    instance.membership.renew_lease()  # a renewal moves nothing
    instance.sync_once()
    instance.sync_once()
    assert reads == [True]


def test_a_committed_change_a_request_or_the_interval_reads_again(server: tuple) -> None:
    instance, reads = server
    instance.sync_once()
    with instance.meta.session() as session:
        session.execute(update(RegionInstance).values(port=2))
    instance.sync_once()
    assert len(reads) == 2
    instance.request_sync()
    instance.sync_once()
    assert len(reads) == 3
    instance._synced_at -= region_server.FULL_SYNC_SECONDS
    instance.sync_once()
    assert len(reads) == 4
    instance.sync_once()
    assert len(reads) == 4


def test_an_instance_whose_lease_ran_out_is_seen_without_any_write(server: tuple) -> None:
    instance, reads = server
    instance.sync_once()
    with instance.meta.session(announce=False) as session:  # as if it stopped renewing long ago
        session.execute(update(RegionInstance).values(heartbeat_at=0.0))
    instance.sync_once()
    assert len(reads) == 2
