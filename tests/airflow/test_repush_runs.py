"""A repush through real Airflow: `venice repush STORE` triggers the store's rollout DAG with `source=kafka`, the
DAG's Spark step runs the repush job, which reads the store's own version topic, and the rollout goes region by
region with the hooks, as for any push."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scripts.generate_dataset import generate
from tests.integration.test_push_e2e import _expected
from tests.support.jobs import RecordsJob
from tests.support.platform import PlatformEnv
from venice_core.client import ReadClient
from venice_core.controller import versions
from venice_core.pubsub import admin

pytestmark = [pytest.mark.spark, pytest.mark.airflow]


def test_a_repush_through_airflow_aborted_at_the_second_region_behaves_like_a_push(
    airflow_env: PlatformEnv, tmp_path: Path
) -> None:
    """Version 1 written directly (200 records, 2 partitions); `venice repush` through the DAG, with a hook that
    ABORTs dc-1's swap: exit 3 and one error line naming the abort, dc-0 serves the repushed version 2, dc-1 and
    dc-2 still version 1. Version 2's push job id is Venice's repush id, its source dc-0's version topic of version
    1, pinned with each partition's end offset, and what dc-0 serves is the source's data."""
    env = airflow_env
    store = env.create_user_store("afrp", 2)
    expected = _expected(generate(tmp_path / "v1", 200, files=1))
    env.push(store, RecordsJob(expected))  # v1, directly
    env.cli("store", "update", store, "--hook-config", "answer.pre_store_version_swap.dc-1=ABORT", check=True)

    result = env.venice("repush", store, "--conf", "kafka.input.max.records.per.mapper=150", timeout=900)
    assert result.returncode == 3, result.stdout + result.stderr
    errors = result.stderr.strip().splitlines()
    assert len(errors) == 1 and errors[0].startswith("error: rollout run failed at dc_1.pre_swap_abort; "), errors
    assert "version 2 is PARTIALLY_ONLINE: aborted by a hook at pre_store_version_swap in dc-1" in errors[0]
    assert f"repushing '{store}' (now from version 1 in dc-0" in result.stdout
    assert env.serving(store) == {"dc-0": 2, "dc-1": 1, "dc-2": 1}

    v2 = versions.get_version(env.meta, store, 2)
    assert v2.push_job_id.startswith(f"venice_re_push_{store}-manual__"), v2.push_job_id
    source = env.config.region("dc-0")
    confs = v2.lifecycle.job_confs
    assert confs["source.kafka"] == "true" and confs["kafka.input.topic"] == source.version_topic(store, 1)
    ends = admin.end_offsets(source.kafka_bootstrap, source.version_topic(store, 1), 2)
    assert json.loads(confs["kafka.input.end.offsets"]) == {"0": ends[0], "1": ends[1]}  # v1's topic is final
    client = ReadClient("127.0.0.1", env.config.server_port("dc-0"))
    keys = sorted(expected)
    assert client.batch_get(store, keys) == expected  # version 2, rebuilt from version 1's topic
