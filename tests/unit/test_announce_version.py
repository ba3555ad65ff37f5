"""The rollout's last step, `announce_version`: what the store's consumers are told (the DAG: its Airflow asset
event's extra), only once every region of the store serves the version, for a push and a repush alike (both are
runs of the store's rollout DAG, whose last task emits it)."""

from __future__ import annotations

import uuid

from tests.support.topics import InMemoryTopics
from venice_core.config import ClusterConfig
from venice_core.controller import stores, versions
from venice_core.controller.hook_decisions import HookDecisions
from venice_core.meta import MetadataStore
from venice_core.model.status import ExecutionStatus
from venice_core.rollout.steps import CreatedVersion, PushRequest, StepInputs, step

KEY = '"string"'
VALUE = '{"type":"record","name":"V","fields":[{"name":"a","type":"int"}]}'


def test_a_version_is_announced_once_every_region_serves_it_and_says_whether_a_repush_made_it(
    config: ClusterConfig, meta: MetadataStore
) -> None:
    store = f"ann_{uuid.uuid4().hex[:8]}"
    stores.create_store(meta, config, store, KEY, VALUE, partitions=2)
    versions.create_version(meta, config, store, "job-1", topics=InMemoryTopics())
    versions.record_push_counts(meta, store, 1, {"0": 3, "1": 4})
    for region in config.region_names:
        for partition in (0, 1):
            versions.report_partition(meta, store, 1, region, partition, ExecutionStatus.COMPLETED, 10, 5)
    rollout = HookDecisions(config, meta, store, "job-1", {}, progress=lambda _line: None, version=1)
    created = CreatedVersion(1, 2, list(config.region_names), "job-1")
    announce = step("announce_version")
    repush = StepInputs(rollout, PushRequest(store, "", confs={"source.kafka": "true"}), created)

    versions.swap_region(meta, store, "dc-0", 1)
    assert announce.run(repush) is None  # dc-1 and dc-2 do not serve it: nothing announced
    for region in ("dc-1", "dc-2"):
        versions.swap_region(meta, store, region, 1)
    expected = {"store": store, "version": 1, "regions": ["dc-0", "dc-1", "dc-2"], "records": 7}
    assert announce.run(repush) == {**expected, "push_job_id": "job-1", "repush": True}
    push = StepInputs(rollout, PushRequest(store, "/data/users"), created)
    assert announce.run(push) == {**expected, "push_job_id": "job-1", "repush": False}
