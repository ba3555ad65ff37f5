"""Version lifecycle in the controller against the real broker (topics) and the metadata store."""

from __future__ import annotations

import time
import uuid

import pytest

from tests.support.platform import PlatformEnv
from venice_core.controller import stores, versions
from venice_core.controller.status import ExecutionStatus, VersionStatus
from venice_core.errors import VeniceError
from venice_core.meta import MetadataStore
from venice_core.pubsub import admin

KEY = '"string"'
VALUE = '{"type":"record","name":"V","fields":[{"name":"a","type":"int"}]}'


@pytest.fixture
def meta(tmp_path):
    """A metadata store of the test's own: the session's region servers (which watch the platform's store and
    report on every version they host) must not race the statuses this test sets."""
    store = MetadataStore(f"sqlite:///{tmp_path / 'meta.db'}")
    store.migrate()
    yield store
    store.dispose()


def _store(meta: MetadataStore, config, partitions: int = 2) -> str:
    name = f"ctl_{uuid.uuid4().hex[:8]}"
    stores.create_store(meta, config, name, KEY, VALUE, partitions=partitions)
    return name


def _complete(meta: MetadataStore, config, store: str, number: int, partitions: int = 2) -> None:
    for region in config.region_names:
        for p in range(partitions):
            versions.report_partition(meta, store, number, region, p, ExecutionStatus.COMPLETED, 10, 5)


def test_create_version_makes_topics_and_refuses_a_second_push(platform_env: PlatformEnv, meta) -> None:
    config = platform_env.config
    store = _store(meta, config)
    version = versions.create_version(meta, config, store, "job-1")
    assert version.number == 1 and version.status == VersionStatus.STARTED
    for region in config.regions:
        topic = region.version_topic(store, 1)
        assert admin.end_offsets(region.kafka_bootstrap, topic, 2) == [0, 0]
    with pytest.raises(versions.PushInProgress, match="already in progress \\(version 1\\)"):
        versions.create_version(meta, config, store, "job-2")
    versions.kill_push(meta, store, 1, "test")
    assert versions.create_version(meta, config, store, "job-3").number == 2


def test_region_status_aggregates_partitions_with_change_times(platform_env: PlatformEnv, meta) -> None:
    config = platform_env.config
    store = _store(meta, config)
    versions.create_version(meta, config, store, "job")
    versions.report_partition(meta, store, 1, "dc-0", 0, ExecutionStatus.COMPLETED, 9, 3)
    status = versions.job_status(meta, store, 1)
    assert status.regions["dc-0"].status is ExecutionStatus.PROGRESS  # one of two partitions done
    changed_at = status.regions["dc-0"].updated_at
    time.sleep(0.05)
    versions.report_partition(meta, store, 1, "dc-0", 0, ExecutionStatus.COMPLETED, 9, 3)  # no change
    assert versions.job_status(meta, store, 1).regions["dc-0"].updated_at == changed_at
    versions.report_partition(meta, store, 1, "dc-0", 1, ExecutionStatus.COMPLETED, 9, 3)
    status = versions.job_status(meta, store, 1)
    assert status.regions["dc-0"].status is ExecutionStatus.COMPLETED
    assert status.regions["dc-0"].updated_at > changed_at
    assert status.overall is ExecutionStatus.PROGRESS  # dc-1, dc-2 not yet
    versions.report_partition(meta, store, 1, "dc-1", 0, ExecutionStatus.ERROR, 2, 1, "boom")
    status = versions.job_status(meta, store, 1)
    assert status.overall is ExecutionStatus.ERROR and status.regions["dc-1"].details == "boom"


def test_swap_backup_rollback_and_retire(platform_env: PlatformEnv, meta) -> None:
    config = platform_env.config
    store = _store(meta, config)
    for number in (1, 2, 3):
        versions.create_version(meta, config, store, f"job-{number}")
        with pytest.raises(VeniceError, match="not fully ingested"):
            versions.swap_region(meta, store, "dc-0", number)
        _complete(meta, config, store, number)
        versions.mark_pushed(meta, store, number)
        versions.swap_region(meta, store, "dc-0", number)
        assert versions.get_version(meta, store, number).status == VersionStatus.PARTIALLY_ONLINE
        for region in ("dc-1", "dc-2"):
            versions.swap_region(meta, store, region, number)
        assert versions.get_version(meta, store, number).status == VersionStatus.ONLINE
        versions.retire_old_versions(meta, config, store)
    info = stores.describe_store(meta, store)
    assert info["regions"]["dc-1"] == {"current": 3, "backup": 2}
    assert [v["number"] for v in info["versions"]] == [2, 3]  # current + one backup preserved
    assert versions.current_versions(meta, "dc-1")[store] == 3

    assert versions.rollback_region(meta, store, "dc-1") == 2
    assert versions.current_versions(meta, "dc-1")[store] == 2
    assert versions.get_version(meta, store, 3).status == VersionStatus.PARTIALLY_ONLINE
    for region in ("dc-0", "dc-2"):
        versions.rollback_region(meta, store, region)
    assert versions.get_version(meta, store, 3).status == VersionStatus.ROLLED_BACK
    with pytest.raises(VeniceError, match="no backup version"):
        versions.rollback_region(meta, store, "dc-0")


def test_job_status_carries_each_regions_swap_time(platform_env: PlatformEnv, meta) -> None:
    config = platform_env.config
    store = _store(meta, config)
    versions.create_version(meta, config, store, "job")
    _complete(meta, config, store, 1)
    before = time.time()
    versions.swap_region(meta, store, "dc-0", 1)
    status = versions.job_status(meta, store, 1)
    assert status.regions["dc-0"].serving and before <= status.regions["dc-0"].current_since <= time.time()
    assert not status.regions["dc-1"].serving and status.regions["dc-1"].current_since is None


def test_a_rerun_step_finds_the_version_its_push_created(platform_env: PlatformEnv, meta) -> None:
    config = platform_env.config
    store = _store(meta, config)
    created = versions.create_version(meta, config, store, "job-1")
    assert versions.version_of_push(meta, store, "job-1").number == created.number
    assert versions.version_of_push(meta, store, "job-2") is None  # another push's step creates its own (refused)
    versions.kill_push(meta, store, created.number, "test")
    assert versions.version_of_push(meta, store, "job-1") is None  # a finished push is not resumed
