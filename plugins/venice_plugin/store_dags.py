"""A store's DAGs, each built by its generated DAG file (`venice_core.orchestration.airflow.store_dags`) from the
JSON the file holds: the rollout DAG (`venice_push__<store>`, triggered by `venice push`, `venice repush` or from
the UI, and run on the store's working hours when it sets `--push-schedule`) and the scheduled repush DAG
(`venice_repush__<store>`, for a store that sets `--repush-schedule`). A parse reads nothing else of the store; a
task process parses its DAG's file too, to run one task, and builds that one DAG."""

from __future__ import annotations

import json
from typing import Any

from airflow.sdk import DAG

from venice_core.config import load_config
from venice_core.push_schedule import PushSchedule
from venice_core.repush_schedule import RepushSchedule
from venice_plugin.platform_config import use_platform_config


def rollout_dag(spec: str) -> DAG:
    """The rollout DAG of the store `spec` describes (`store`, `rollout_order`, `push`: its schedule or null)."""
    from venice_plugin.rollout import build_rollout_dag  # imported already where the plugin is loaded

    settings: dict[str, Any] = json.loads(spec)
    use_platform_config()  # the platform's config for `airflow` run with AIRFLOW_HOME alone
    config = load_config()
    return build_rollout_dag(settings["store"], settings["rollout_order"], config, PushSchedule.of(settings["push"]))


def repush_dag(spec: str) -> DAG:
    """The scheduled repush DAG of the store `spec` describes (`store`, `repush`: its schedule)."""
    from venice_plugin.repush_dag import build_repush_dag  # only where a store has a schedule: a costly import

    settings: dict[str, Any] = json.loads(spec)
    schedule = RepushSchedule.of(settings["repush"])
    if schedule is None:
        raise ValueError(f"no repush schedule in {spec}")
    return build_repush_dag(settings["store"], schedule)
