"""Hybrid store settings in the controller: validation, real-time topics in every region (through an in-memory
topic admin: no broker), the version's snapshot, and a store's deletion taking every topic of it."""

from __future__ import annotations

import uuid

import pytest

from tests.support.topics import InMemoryTopics
from venice_core.controller import stores, versions
from venice_core.errors import ComponentError, ConfigError
from venice_core.meta import MetadataStore
from venice_core.model.hybrid import DEFAULT_OFFSET_LAG_THRESHOLD, HybridSettings

KEY = '"string"'
VALUE = '{"type":"record","name":"V","fields":[{"name":"a","type":"int"}]}'


@pytest.fixture
def topics() -> InMemoryTopics:
    return InMemoryTopics()


@pytest.fixture
def store(meta: MetadataStore, config) -> str:
    name = f"hy_{uuid.uuid4().hex[:8]}"
    stores.create_store(meta, config, name, KEY, VALUE, partitions=3)
    return name


def _rt_topics(config, store: str, partitions: int) -> dict[tuple[str, str], int]:
    return {(r.kafka_bootstrap, r.real_time_topic(store)): partitions for r in config.regions}


def test_becoming_hybrid_creates_the_real_time_topics_and_versions_snapshot_it(
    meta: MetadataStore, config, store: str, topics: InMemoryTopics
) -> None:
    versions.create_version(meta, config, store, "job-1", topics=topics)  # batch-only
    versions.kill_push(meta, store, 1, "test")
    stores.update_store(meta, config, store, hybrid_rewind_seconds=3600, topics=topics)
    info = stores.describe_store(meta, store)
    assert info.settings.hybrid == HybridSettings(3600, DEFAULT_OFFSET_LAG_THRESHOLD)
    rt = _rt_topics(config, store, 3)
    assert {k: v for k, v in topics.partitions.items() if k in rt} == rt
    assert {config.region(r).real_time_topic(store) for r in config.region_names} == {
        f"{r.topic_prefix}{store}_rt" for r in config.regions
    }

    stores.update_store(meta, config, store, hybrid_offset_lag_threshold=50, topics=topics)  # rewind kept
    stores.update_store(meta, config, store, hybrid_rewind_seconds="60", topics=topics)  # threshold kept; text too
    assert stores.store_settings(meta, store).hybrid.to_json() == {"rewind_seconds": 60, "offset_lag_threshold": 50}
    versions.create_version(meta, config, store, "job-2", topics=topics)
    versions.kill_push(meta, store, 2, "test")

    stores.update_store(meta, config, store, hybrid=False, topics=topics)
    assert stores.describe_store(meta, store).settings.hybrid is None
    assert rt.items() <= topics.partitions.items()  # kept: versions created while hybrid still ingest them
    hybrid_of = {v.number: v.hybrid for v in stores.describe_store(meta, store).versions}
    assert hybrid_of == {1: None, 2: HybridSettings(60, 50)}


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"hybrid_rewind_seconds": -1}, "hybrid rewind seconds must be a whole number from 0 to 2147483647, got -1"),
        ({"hybrid_rewind_seconds": "abc"}, "hybrid rewind seconds must be a whole number"),
        ({"hybrid_rewind_seconds": 1.5}, "hybrid rewind seconds must be a whole number"),
        ({"hybrid_rewind_seconds": True}, "hybrid rewind seconds must be a whole number"),
        ({"hybrid_rewind_seconds": ""}, "hybrid rewind seconds must be a whole number"),
        ({"hybrid_rewind_seconds": 2**31}, "hybrid rewind seconds must be a whole number"),
        ({"hybrid_rewind_seconds": 60, "hybrid_offset_lag_threshold": "-5"}, "hybrid offset lag threshold must be"),
        ({"hybrid_offset_lag_threshold": 10}, "is batch-only: an offset lag threshold alone does not make it hybrid"),
        ({"hybrid": True}, "is batch-only: it becomes hybrid with a rewind time"),
        ({"hybrid": False, "hybrid_rewind_seconds": 60}, "turning hybrid off takes no hybrid rewind seconds"),
        ({"hybrid_rewind_seconds": 60, "compression": "LZ4"}, "unknown compression"),
    ],
)
def test_bad_settings_change_nothing(
    meta: MetadataStore, config, store: str, topics: InMemoryTopics, settings: dict, message: str
) -> None:
    before = stores.describe_store(meta, store)
    with pytest.raises(ConfigError, match=message.replace("(", "\\(")):
        stores.update_store(meta, config, store, topics=topics, **settings)
    assert stores.describe_store(meta, store) == before
    assert topics.partitions == {}


def test_a_hybrid_stores_partition_count_is_fixed(meta: MetadataStore, config, store: str, topics) -> None:
    stores.update_store(meta, config, store, hybrid_rewind_seconds=0, partitions=5, topics=topics)  # in one update
    assert topics.partitions == _rt_topics(config, store, 5)
    for change in ({"partitions": 6}, {"partitions": 6, "hybrid": False}):
        with pytest.raises(ConfigError, match=f"the partition count of hybrid store '{store}' cannot change"):
            stores.update_store(meta, config, store, topics=topics, **change)
    assert stores.store_settings(meta, store).partition_count == 5


def test_a_broker_that_cannot_create_the_topics_changes_nothing(meta: MetadataStore, config, store: str) -> None:
    class Unreachable(InMemoryTopics):
        def create_topic(
            self, bootstrap: str, topic: str, partitions: int, replication_factor: int = 1, min_insync_replicas: int = 1
        ) -> None:
            raise ComponentError(f"Kafka broker at {bootstrap} is unreachable")

    with pytest.raises(ComponentError, match="unreachable"):
        stores.update_store(meta, config, store, hybrid_rewind_seconds=60, topics=Unreachable())
    assert stores.store_settings(meta, store).hybrid is None


def test_delete_store_deletes_every_topic_of_it(meta: MetadataStore, config, store: str, topics) -> None:
    other = f"hy_{uuid.uuid4().hex[:8]}"
    stores.create_store(meta, config, other, KEY, VALUE)
    for name in (store, other):
        stores.update_store(meta, config, name, hybrid_rewind_seconds=60, topics=topics)
        versions.create_version(meta, config, name, "job-1", topics=topics)
        versions.kill_push(meta, name, 1, "test")
        versions.create_version(meta, config, name, "job-2", topics=topics)
    stores.update_store(meta, config, store, hybrid=False, topics=topics)
    stores.delete_store(meta, config, store, topics=topics)
    assert store not in stores.list_stores(meta)
    assert not {t for t in topics.names() if store in t}
    assert len({t for t in topics.names() if other in t}) == 3 * len(config.regions)  # v1, v2, rt


def test_a_broker_that_cannot_delete_the_topics_leaves_the_store(meta: MetadataStore, config, store: str) -> None:
    class Unreachable(InMemoryTopics):
        def delete_topics(self, bootstrap: str, topics: list[str]) -> None:
            raise ComponentError(f"cannot delete topic {topics[0]}: timed out")

    with pytest.raises(ComponentError, match="cannot delete topic"):
        stores.delete_store(meta, config, store, topics=Unreachable())
    assert store in stores.list_stores(meta)  # to delete again once the broker answers
