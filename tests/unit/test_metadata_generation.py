"""The metadata store's generation: every committed change moves it, and nothing else does (a read, a write that
matched no row, a rolled-back transaction, a session opened with `announce=False` as a lease's renewal is). A region
server reads the rest of the metadata store only when it moved, so a change it misses is a replica never hosted."""

from __future__ import annotations

import pytest
from sqlalchemy import select, update

from venice_core.meta import MetadataStore
from venice_core.meta.models import RegionInstance


def _register(meta: MetadataStore, instance: int = 0) -> None:
    with meta.session() as session:
        session.add(
            RegionInstance(
                region="dc-0", instance=instance, host="127.0.0.1", port=7000 + instance, owner="o", pid=1,
                started_at=0.0, heartbeat_at=0.0,
            )
        )  # fmt: skip


def test_an_inserted_row_moves_the_generation(meta: MetadataStore) -> None:
    before = meta.generation()
    _register(meta)
    assert meta.generation() == before + 1


def test_an_updated_or_deleted_row_moves_it_and_one_matching_nothing_does_not(meta: MetadataStore) -> None:
    _register(meta)
    before = meta.generation()
    with meta.session() as session:
        session.execute(update(RegionInstance).where(RegionInstance.instance == 9).values(port=1))
    assert meta.generation() == before
    with meta.session() as session:
        session.execute(update(RegionInstance).where(RegionInstance.instance == 0).values(port=1))
    assert meta.generation() == before + 1
    with meta.session() as session:
        row = session.scalars(select(RegionInstance)).one()
        row.port = 2  # through the unit of work
    assert meta.generation() == before + 2
    with meta.session() as session:
        session.delete(session.scalars(select(RegionInstance)).one())
    assert meta.generation() == before + 3


def test_one_transaction_moves_it_once_and_a_read_not_at_all(meta: MetadataStore) -> None:
    before = meta.generation()
    with meta.session() as session:
        for n in range(3):
            session.add(
                RegionInstance(
                    region="dc-0", instance=n, host="h", port=n, owner="o", pid=1, started_at=0.0, heartbeat_at=0.0
                )
            )
            session.flush()
    assert meta.generation() == before + 1
    with meta.session() as session:
        assert len(session.scalars(select(RegionInstance)).all()) == 3
    assert meta.generation() == before + 1


def test_a_rolled_back_or_unannounced_write_leaves_it(meta: MetadataStore) -> None:
    _register(meta)
    before = meta.generation()
    with pytest.raises(RuntimeError), meta.session() as session:
        session.execute(update(RegionInstance).values(port=3))
        raise RuntimeError("rolled back")
    with meta.session(announce=False) as session:
        session.execute(update(RegionInstance).values(heartbeat_at=5.0))
    with meta.session() as session:  # a row locked by an UPDATE that changes nothing
        session.execute(update(RegionInstance).values(port=RegionInstance.port).execution_options(announce=False))
    assert meta.generation() == before
    with meta.locked_session() as session:  # the serialised writes count too
        session.execute(update(RegionInstance).values(port=4))
    assert meta.generation() == before + 1
