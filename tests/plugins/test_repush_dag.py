"""The scheduled repush DAG and the rollout DAG's repush Param, without a running Airflow: the stores' DAG files
written and parsed against a metadata store of the test's own (`venice_repush__<store>` only for a store with a
schedule, on the BusinessHoursTimetable with the store's settings), and the check task's decision (skipped while
the current version is fresh, the repush's run conf once it is stale)."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from airflow.sdk.exceptions import AirflowSkipException
from venice_plugin.repush_dag import check_version_age
from venice_plugin.timetables import BusinessHoursTimetable

from tests.support.dag_files import parse_store_dags
from tests.support.topics import InMemoryTopics
from venice_core.controller import repush_config, stores, versions
from venice_core.meta.models import RegionCurrentVersion, Version
from venice_core.schedules.calendar import CalendarUpdate

KEY = '"string"'
VALUE = '{"type":"record","name":"V","fields":[{"name":"a","type":"int"}]}'


def test_a_repush_dag_only_for_stores_with_a_schedule_on_their_working_hours(
    platform: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    config, meta = platform
    plain, kept = f"plain_{uuid.uuid4().hex[:6]}", f"kept_{uuid.uuid4().hex[:6]}"
    for name in (plain, kept):
        stores.create_store(meta, config, name, KEY, VALUE, partitions=1)
    calendar = CalendarUpdate("mon-thu", "8-12", "Europe/Paris", ("2026-12-24", "2026-12-25"))
    stores.update_store(
        meta, config, kept, repush_schedule="30 9 * * *", repush_ttl_seconds="86400", repush_calendar=calendar
    )
    dags = parse_store_dags(monkeypatch, platform, plain, kept)
    assert set(dags) == {f"venice_push__{plain}", f"venice_push__{kept}", f"venice_repush__{kept}"}
    repush = dags[f"venice_repush__{kept}"]
    assert isinstance(repush.timetable, BusinessHoursTimetable)
    assert repush.timetable.serialize() == {
        "days": "mon-thu",
        "hours": "8-12",
        "timezone": "Europe/Paris",
        "holidays": ["2026-12-24", "2026-12-25"],
        "interval_minutes": 60,
        "cron": "30 9 * * *",
    }
    assert repush.get_task("check_version_age").downstream_task_ids == {"trigger_repush"}
    assert repush.get_task("trigger_repush").trigger_dag_id == f"venice_push__{kept}"
    assert not repush.catchup and repush.max_active_runs == 1

    # `daily`: one slot a working day, at opening; the schedule turned off, the DAG is gone.
    stores.update_store(meta, config, kept, repush_schedule="daily")
    daily = parse_store_dags(monkeypatch, platform, kept)[f"venice_repush__{kept}"].timetable.serialize()
    assert daily["interval_minutes"] == 24 * 60 and "cron" not in daily
    stores.update_store(meta, config, kept, repush=False)
    assert set(parse_store_dags(monkeypatch, platform, plain, kept)) == {
        f"venice_push__{plain}",
        f"venice_push__{kept}",
    }


def test_the_rollout_dag_offers_a_repush_in_its_trigger_form(platform: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    config, meta = platform
    store = f"form_{uuid.uuid4().hex[:6]}"
    stores.create_store(meta, config, store, KEY, VALUE, partitions=1)
    dag = parse_store_dags(monkeypatch, platform, store)[f"venice_push__{store}"]
    source = dag.params.get_param("source")
    assert source.value == "files" and source.schema["enum"] == ["files", "kafka"]
    assert dag.params.get_param("conf").value == {}
    from venice_core.rollout.names import push_job_id, run_confs

    assert run_confs({"source": "kafka", "conf": {"kafka.input.fabric": "dc-1"}}) == {
        "kafka.input.fabric": "dc-1",
        "source.kafka": "true",
    }
    assert push_job_id(store, "manual__2026-11-23T10:00:00", {"source": "kafka"}) == (
        f"venice_re_push_{store}-manual__2026-11-23T10-00-00"
    )
    ttl = {"source": "kafka", "conf": {"repush.ttl.enable": "true"}}
    assert push_job_id(store, "r1", ttl) == f"venice_ttl_re_push_{store}-r1"
    assert push_job_id(store, "r1", {"source": "files"}) == push_job_id(store, "r1") == f"{store}-r1"


def test_the_check_skips_a_fresh_version_and_triggers_a_repush_of_a_stale_one(platform: Any) -> None:
    config, meta = platform
    store = f"aged_{uuid.uuid4().hex[:6]}"
    topics = InMemoryTopics()
    stores.create_store(meta, config, store, KEY, VALUE, partitions=1)
    stores.update_store(meta, config, store, repush_schedule="daily", repush_ttl_seconds=3600)
    with pytest.raises(AirflowSkipException, match="serves no version yet"):
        check_version_age(store)
    versions.create_version(meta, config, store, "job-1", topics=topics)
    versions.set_version_status(meta, store, 1, versions.VersionStatus.ONLINE)
    versions.finish_push(meta, store, 1)
    with meta.session() as session:
        for region in config.region_names:
            session.merge(RegionCurrentVersion(store_name=store, region=region, current_version=1, backup_version=0))
    with pytest.raises(AirflowSkipException, match="within the 3600s threshold"):
        check_version_age(store)  # created a moment ago
    decision, _ = repush_config.scheduled_repush(meta, store, now=time.time() + 3601)
    assert decision.due and "past the 3600s threshold" in decision.reason
    with meta.session() as session:
        session.get(Version, (store, 1)).created_at = time.time() - 7200
    # Batch-only: a plain repush (Venice refuses TTL there); hybrid: a TTL repush with the threshold's seconds.
    assert check_version_age(store) == {"source": "kafka", "input": repush_config.REPUSH_INPUT, "conf": {}}
    stores.update_store(meta, config, store, hybrid_rewind_seconds=600, topics=topics)
    assert check_version_age(store)["conf"] == {"repush.ttl.enable": "true", "repush.ttl.seconds": "3600"}
    in_flight = versions.create_version(meta, config, store, "job-2", topics=topics)
    with pytest.raises(AirflowSkipException, match="in flight"):
        check_version_age(store)
    versions.kill_push(meta, store, in_flight.number, "test")
