"""Version lifecycle in the controller over a real metadata store; topics through an in-memory admin (one test
creates and deletes them on the session's real broker)."""

from __future__ import annotations

import time
import uuid

import pytest
from sqlalchemy import update

from tests.support.clock import ManualClock
from tests.support.platform import PlatformEnv
from tests.support.reads import wait_for
from tests.support.topics import InMemoryTopics
from venice_core.controller import stores, versions
from venice_core.controller.store_description import RegionVersions
from venice_core.errors import VeniceError
from venice_core.meta import MetadataStore
from venice_core.meta.models import RegionCurrentVersion
from venice_core.model.status import ExecutionStatus, VersionStatus
from venice_core.pubsub import admin

KEY = '"string"'
VALUE = '{"type":"record","name":"V","fields":[{"name":"a","type":"int"}]}'


@pytest.fixture
def topics() -> InMemoryTopics:
    return InMemoryTopics()


def _store(meta: MetadataStore, config, partitions: int = 2) -> str:
    name = f"ctl_{uuid.uuid4().hex[:8]}"
    stores.create_store(meta, config, name, KEY, VALUE, partitions=partitions)
    return name


def _complete(meta: MetadataStore, config, store: str, number: int, partitions: int = 2) -> None:
    for region in config.region_names:
        for p in range(partitions):
            versions.report_partition(meta, store, number, region, p, ExecutionStatus.COMPLETED, 10, 5)


def test_create_version_makes_topics_and_refuses_a_second_push(config, meta, topics: InMemoryTopics) -> None:
    store = _store(meta, config)
    version = versions.create_version(meta, config, store, "job-1", topics=topics)
    assert version.number == 1 and version.status == VersionStatus.STARTED
    assert topics.partitions == {(r.kafka_bootstrap, r.version_topic(store, 1)): 2 for r in config.regions}
    with pytest.raises(versions.PushInProgress, match="already in progress \\(version 1\\)"):
        versions.create_version(meta, config, store, "job-2", topics=topics)
    versions.kill_push(meta, store, 1, "test")
    assert versions.create_version(meta, config, store, "job-3", topics=topics).number == 2


def test_a_version_in_some_regions_has_topics_there_and_in_the_source(config, meta, topics: InMemoryTopics) -> None:
    store = _store(meta, config)
    versions.create_version(meta, config, store, "job", regions=["dc-2"], topics=topics)
    assert topics.names() == {config.region(r).version_topic(store, 1) for r in ("dc-0", "dc-2")}


def test_topic_creation_failure_marks_the_version_error(config, meta, topics: InMemoryTopics) -> None:
    store = _store(meta, config)
    region = config.region("dc-1")
    topics.create_topic(region.kafka_bootstrap, region.version_topic(store, 1), 5)  # left over, wrong partitions
    with pytest.raises(VeniceError, match="exists with 5 partitions"):
        versions.create_version(meta, config, store, "job", topics=topics)
    assert versions.get_version(meta, store, 1).status == VersionStatus.ERROR


@pytest.mark.kafka
def test_topics_are_created_and_deleted_on_the_real_broker(platform_env: PlatformEnv, meta) -> None:
    config = platform_env.config
    store = _store(meta, config)
    versions.create_version(meta, config, store, "job-1")
    for region in config.regions:
        assert admin.end_offsets(region.kafka_bootstrap, region.version_topic(store, 1), 2) == [0, 0]
    versions.kill_push(meta, store, 1, "test")
    assert versions.retire_old_versions(meta, config, store) == [1]
    for region in config.regions:
        # The broker acknowledges a deletion once its controller has recorded it; its metadata drops the topic a
        # moment later (seconds, on a loaded machine): wait for that, as anything listing topics would see it.
        topic, client = region.version_topic(store, 1), admin.admin_client(region.kafka_bootstrap)
        wait_for(f"{topic} to be gone", lambda t=topic, c=client: t not in c.list_topics(timeout=10).topics, timeout=60)


def test_region_status_aggregates_partitions_with_change_times(
    config, meta, topics: InMemoryTopics, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = ManualClock()
    monkeypatch.setattr(versions, "time", clock)  # the controller's clock: a change time is one the test set
    store = _store(meta, config)
    versions.create_version(meta, config, store, "job", topics=topics)
    versions.report_partition(meta, store, 1, "dc-0", 0, ExecutionStatus.COMPLETED, 9, 3)
    status = versions.job_status(meta, store, 1)
    assert status.regions["dc-0"].status is ExecutionStatus.PROGRESS  # one of two partitions done
    changed_at = status.regions["dc-0"].updated_at
    assert changed_at == clock.now
    clock.advance(60)
    versions.report_partition(meta, store, 1, "dc-0", 0, ExecutionStatus.COMPLETED, 9, 3)  # no change
    assert versions.job_status(meta, store, 1).regions["dc-0"].updated_at == changed_at
    clock.advance(60)
    versions.report_partition(meta, store, 1, "dc-0", 1, ExecutionStatus.COMPLETED, 9, 3)
    status = versions.job_status(meta, store, 1)
    assert status.regions["dc-0"].status is ExecutionStatus.COMPLETED
    assert status.regions["dc-0"].updated_at == changed_at + 120
    assert status.overall is ExecutionStatus.PROGRESS  # dc-1, dc-2 not yet
    versions.report_partition(meta, store, 1, "dc-1", 0, ExecutionStatus.ERROR, 2, 1, "boom")
    status = versions.job_status(meta, store, 1)
    assert status.overall is ExecutionStatus.ERROR and status.regions["dc-1"].details == "boom"


def test_swap_backup_rollback_and_retire(config, meta, topics: InMemoryTopics) -> None:
    store = _store(meta, config)
    for number in (1, 2, 3):
        versions.create_version(meta, config, store, f"job-{number}", topics=topics)
        with pytest.raises(VeniceError, match="not fully ingested"):
            versions.swap_region(meta, store, "dc-0", number)
        _complete(meta, config, store, number)
        versions.set_version_status(meta, store, number, VersionStatus.PUSHED)
        versions.swap_region(meta, store, "dc-0", number)
        assert versions.get_version(meta, store, number).status == VersionStatus.PARTIALLY_ONLINE
        for region in ("dc-1", "dc-2"):
            versions.swap_region(meta, store, region, number)
        assert versions.get_version(meta, store, number).status == VersionStatus.ONLINE
        versions.retire_old_versions(meta, config, store, topics=topics)
    info = stores.describe_store(meta, store)
    assert topics.names() == {r.version_topic(store, n) for r in config.regions for n in (2, 3)}
    assert info.regions["dc-1"] == RegionVersions(current=3, backup=2)
    assert [v.number for v in info.versions] == [2, 3]  # current + one backup preserved
    assert versions.current_versions(meta, "dc-1")[store] == 3

    assert versions.rollback_region(meta, store, "dc-1") == 2
    assert versions.current_versions(meta, "dc-1")[store] == 2
    assert versions.get_version(meta, store, 3).status == VersionStatus.PARTIALLY_ONLINE
    for region in ("dc-0", "dc-2"):
        versions.rollback_region(meta, store, region)
    assert versions.get_version(meta, store, 3).status == VersionStatus.ROLLED_BACK
    with pytest.raises(VeniceError, match="no backup version"):
        versions.rollback_region(meta, store, "dc-0")


def _swapped_everywhere(meta: MetadataStore, config, store: str, number: int, topics: InMemoryTopics) -> None:
    versions.create_version(meta, config, store, f"job-{number}", topics=topics)
    _complete(meta, config, store, number)
    for region in config.region_names:
        versions.swap_region(meta, store, region, number)
    versions.finish_push(meta, store, number)


def test_rolling_back_a_first_version_leaves_the_region_serving_none(config, meta, topics: InMemoryTopics) -> None:
    store = _store(meta, config)
    _swapped_everywhere(meta, config, store, 1, topics)
    with pytest.raises(versions.NoBackupVersion, match="no backup version in dc-0"):
        versions.rollback_region(meta, store, "dc-0")  # an operator's rollback needs a backup
    assert versions.rollback_region(meta, store, "dc-0", to_no_version=True) == 0
    assert store not in versions.current_versions(meta, "dc-0")
    assert versions.regions_serving(meta, store, 1) == ["dc-1", "dc-2"]
    assert versions.get_version(meta, store, 1).status == VersionStatus.PARTIALLY_ONLINE
    for region in ("dc-1", "dc-2"):
        versions.rollback_region(meta, store, region, to_no_version=True)
    assert versions.get_version(meta, store, 1).status == VersionStatus.ROLLED_BACK
    assert versions.regions_serving(meta, store, 1) == []


def test_manual_rollback_of_named_regions_or_all(config, meta, topics: InMemoryTopics) -> None:
    store = _store(meta, config)
    for number in (1, 2):
        _swapped_everywhere(meta, config, store, number, topics)
    assert versions.rollback_store(meta, store, ["dc-1"]) == {"dc-1": (2, 1)}
    assert stores.describe_store(meta, store).regions["dc-1"] == RegionVersions(current=1, backup=0)
    assert versions.get_version(meta, store, 2).status == VersionStatus.PARTIALLY_ONLINE
    # dc-1 has no backup left: the whole rollback is refused, and dc-0 is not rolled back either.
    with pytest.raises(versions.NoBackupVersion) as refused:
        versions.rollback_store(meta, store)
    assert str(refused.value) == f"cannot roll back '{store}': no backup version in dc-1; nothing was changed"
    assert stores.describe_store(meta, store).regions["dc-0"] == RegionVersions(current=2, backup=1)
    with pytest.raises(VeniceError, match=r"has no region 'dc-9' \(regions: dc-0, dc-1, dc-2\)"):
        versions.rollback_store(meta, store, ["dc-0", "dc-9"])
    assert versions.rollback_store(meta, store, ["dc-0", "dc-2"]) == {"dc-0": (2, 1), "dc-2": (2, 1)}
    assert versions.get_version(meta, store, 2).status == VersionStatus.ROLLED_BACK
    assert stores.describe_store(meta, store).serving() == dict.fromkeys(config.region_names, 1)


def test_job_status_carries_each_regions_swap_time(config, meta, topics: InMemoryTopics) -> None:
    store = _store(meta, config)
    versions.create_version(meta, config, store, "job", topics=topics)
    _complete(meta, config, store, 1)
    before = time.time()
    versions.swap_region(meta, store, "dc-0", 1)
    status = versions.job_status(meta, store, 1)
    assert status.regions["dc-0"].serving and before <= status.regions["dc-0"].current_since <= time.time()
    assert not status.regions["dc-1"].serving and status.regions["dc-1"].current_since is None


def test_a_rerun_step_finds_the_version_its_push_created(config, meta, topics: InMemoryTopics) -> None:
    store = _store(meta, config)
    created = versions.create_version(meta, config, store, "job-1", topics=topics)
    assert versions.version_of_push(meta, store, "job-1").number == created.number
    assert versions.version_of_push(meta, store, "job-2") is None  # another push's step creates its own (refused)
    versions.kill_push(meta, store, created.number, "test")
    assert versions.version_of_push(meta, store, "job-1") is None  # a finished push is not resumed


def test_a_superseded_version_is_never_swapped_in_again(config, meta, topics: InMemoryTopics) -> None:
    """Version 2's push is still in flight (its run held, say) while an operator moved the region to version 3 by
    other means: a swap to version 2 there is refused for good, naming the version that serves; a region still on an
    older version takes it."""
    store = _store(meta, config)
    versions.create_version(meta, config, store, "job-1", topics=topics)
    _complete(meta, config, store, 1)
    for region in config.region_names:
        versions.swap_region(meta, store, region, 1)
    versions.finish_push(meta, store, 1)
    versions.create_version(meta, config, store, "job-2", topics=topics)
    _complete(meta, config, store, 2)
    with meta.session() as session:  # dc-0 already serves a newer version
        session.execute(
            update(RegionCurrentVersion)
            .where(RegionCurrentVersion.store_name == store, RegionCurrentVersion.region == "dc-0")
            .values(current_version=3, backup_version=1)
        )
    with pytest.raises(versions.PushStopped) as refused:
        versions.swap_region(meta, store, "dc-0", 2)
    assert str(refused.value) == (
        f"version 2 of '{store}' is older than version 3, which dc-0 serves: it was superseded, and is never swapped "
        "in again"
    )
    assert refused.value.retryable is False
    versions.swap_region(meta, store, "dc-1", 2)
    assert stores.describe_store(meta, store).serving() == {"dc-0": 3, "dc-1": 2, "dc-2": 1}
