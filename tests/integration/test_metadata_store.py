"""The metadata store on SQLite (WAL) and on a real PostgreSQL server: same code, same behaviour."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import text

from tests.support.topics import InMemoryTopics
from venice_core.config import load_config
from venice_core.controller import stores, versions
from venice_core.errors import IncompatibleSchema, MetadataStoreError, StoreAlreadyExists, StoreNotFound
from venice_core.meta import MetadataStore
from venice_core.meta.models import Base
from venice_core.model.hybrid import HybridSettings
from venice_core.model.status import ExecutionStatus
from venice_core.protocol.compression import CompressionStrategy

KEY = '"string"'
V1 = '{"type":"record","name":"V","fields":[{"name":"a","type":"int"}]}'
V2 = '{"type":"record","name":"V","fields":[{"name":"a","type":"int"},{"name":"b","type":"string","default":"x"}]}'
BAD = '{"type":"record","name":"V","fields":[{"name":"a","type":"string"}]}'


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def meta(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MetadataStore]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'meta.db'}"
    else:
        url = request.getfixturevalue("postgres_url")
    store = MetadataStore(url)
    store.migrate()
    yield store
    Base.metadata.drop_all(store.engine)
    with store.engine.begin() as conn:
        conn.execute(text("DROP TABLE IF EXISTS alembic_version"))
    store.dispose()


@pytest.fixture
def config(tmp_path: Path):
    return load_config({"VENICE__DATA_DIR": str(tmp_path)})


def test_migrations_match_the_models(meta: MetadataStore) -> None:
    assert meta.current_revision() == meta.head_revision()
    with meta.engine.connect() as conn:
        assert compare_metadata(MigrationContext.configure(conn), Base.metadata) == []
    meta.migrate()  # idempotent
    meta.check_migrated()


def test_sqlite_runs_in_wal_mode(tmp_path: Path) -> None:
    meta = MetadataStore(f"sqlite:///{tmp_path / 'wal.db'}")
    with meta.engine.connect() as conn:
        assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
    meta.dispose()


def test_store_lifecycle(meta: MetadataStore, config) -> None:
    stores.create_store(meta, config, "users", KEY, V1, partitions=3, rollout_order=["dc-2", "dc-0", "dc-1"])
    assert stores.list_stores(meta) == ["users"]
    info = stores.describe_store(meta, "users")
    assert info.settings.partition_count == 3
    assert info.settings.rollout_order == ["dc-2", "dc-0", "dc-1"]
    assert info.key_schema == "string"
    assert [s.id for s in info.value_schemas] == [1]

    assert stores.add_value_schema(meta, config, "users", V2) == 2
    assert stores.add_value_schema(meta, config, "users", V2) == 2  # same schema: same id
    assert [i for i, _ in stores.list_value_schemas(meta, "users")] == [1, 2]

    stores.update_store(meta, config, "users", partitions=8, hook_configs={"min.delay": "5"}, compression="zstd")
    settings = stores.describe_store(meta, "users").settings
    assert (settings.partition_count, settings.compression, settings.hook_configs) == (
        8,
        CompressionStrategy.ZSTD,
        {"min.delay": "5"},
    )

    topics = InMemoryTopics()
    stores.update_store(meta, config, "users", hybrid_rewind_seconds=600, hybrid_offset_lag_threshold=7, topics=topics)
    assert stores.describe_store(meta, "users").settings.hybrid == HybridSettings(600, 7)

    stores.delete_store(meta, config, "users", topics=topics)
    assert topics.names() == set()
    assert stores.list_stores(meta) == []
    with pytest.raises(StoreNotFound):
        stores.describe_store(meta, "users")


def test_bad_input_changes_nothing(meta: MetadataStore, config) -> None:
    stores.create_store(meta, config, "users", KEY, V1)
    before = stores.describe_store(meta, "users")
    with pytest.raises(StoreAlreadyExists):
        stores.create_store(meta, config, "users", KEY, V2)
    with pytest.raises(IncompatibleSchema):
        stores.add_value_schema(meta, config, "users", BAD)
    with pytest.raises(StoreNotFound):
        stores.add_value_schema(meta, config, "ghost", V2)
    with pytest.raises(Exception, match="partition count"):
        stores.update_store(meta, config, "users", partitions=0, compression="GZIP")
    assert stores.describe_store(meta, "users") == before


def test_unmigrated_store_is_a_clear_error(tmp_path: Path) -> None:
    meta = MetadataStore(f"sqlite:///{tmp_path / 'empty.db'}")
    with pytest.raises(MetadataStoreError, match="not initialised"):
        meta.check_migrated()
    meta.dispose()


def test_partitions_completed_at_once_complete_their_region(meta: MetadataStore, config) -> None:
    """A region's last partitions reported COMPLETED at the same time (a region server's ingestion threads) make
    the region COMPLETED: each report reads its siblings' statuses after the one before it wrote its own. On
    PostgreSQL, two at once each read the other's as it was, and the region stayed PROGRESS for good."""
    partitions = 4
    for round_ in range(8):
        name = f"race{round_}"
        stores.create_store(meta, config, name, KEY, V1, partitions=partitions)
        versions.create_version(meta, config, name, "job", regions=["dc-0"], topics=InMemoryTopics())
        barrier = threading.Barrier(partitions)

        def report(partition: int, name: str = name, barrier: threading.Barrier = barrier) -> None:
            barrier.wait()
            versions.report_partition(meta, name, 1, "dc-0", partition, ExecutionStatus.COMPLETED, 10, 5)

        with ThreadPoolExecutor(partitions) as pool:
            list(pool.map(report, range(partitions)))
        status = versions.job_status(meta, name, 1).regions["dc-0"].status
        assert status is ExecutionStatus.COMPLETED, (round_, status)


def test_leases_run_on_the_databases_clock(meta: MetadataStore) -> None:
    """`database_now` compiles for each database and reads its clock, and a lease written with it
    is live, then, aged past its length by the same clock, not."""
    import time

    from venice_core.controller import instances
    from venice_core.meta.db import database_time

    with meta.session() as session:
        first, second = database_time(session), database_time(session)
    assert abs(first - time.time()) < 5 and first <= second
    instances.register(meta, "dc-0", 0, "127.0.0.1", 7000, "elsewhere:1:x", 1, 5.0)
    assert instances.liveness(meta, "dc-0", 5.0, 30.0) == {(0, True, True)}
    instances.release(meta, "dc-0", 0, "elsewhere:1:x", 5.0)  # the lease ends now, by the database's clock
    assert instances.liveness(meta, "dc-0", 5.0, 30.0) == {(0, False, True)}
