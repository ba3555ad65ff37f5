"""The names a push's workflow and its orchestrator share, each defined once: the DAG ids (a store's rollout and
scheduled repush, a pipeline's upgrade) and their inverses, a region's task group in the rollout DAG, a DAG run's
push job id and push confs, and the store's asset URI."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from venice_core.controller import repush_config

ROLLOUT_DAG_PREFIX = "venice_push__"  # a store's rollout: pushes and repushes (`venice_plugin.rollout_dag`)
REPUSH_DAG_PREFIX = "venice_repush__"  # a store's scheduled repush (`venice_plugin.repush_dag`)
UPGRADE_DAG_PREFIX = "venice_upgrade__"  # a pipeline's drain and upgrade (`venice_plugin.upgrade_dag`)
# The rollout DAG's `source` param: `files` (a push) or `kafka` (a repush of the store's own version topic).
SOURCE_FILES_PARAM, SOURCE_KAFKA_PARAM = "files", "kafka"
ASSET_SCHEME = "venice"
# The XCom a rollout DAG's step keeps its failure's reason in (the plugin's step wrapper), which `venice rollout
# status` and the push's follower read through Airflow's REST API: the reason is otherwise only in the task's log.
FAILURE_XCOM = "failure"
# What a version's reason says when an operator ended its rollout run by hand in Airflow (marked it failed or
# success, deleted it): the platform writes it, `venice push` following the run says it.
ENDED_IN_AIRFLOW = "in Airflow by an operator"


def ended_in_airflow(run_id: str, what: str) -> str:
    """A version's reason when an operator ended its rollout run in Airflow (`what`: marked failed, deleted...)."""
    return f"rollout run {run_id} was {what} {ENDED_IN_AIRFLOW}"


def rollout_dag_id(store: str) -> str:
    """The store's rollout DAG."""
    return f"{ROLLOUT_DAG_PREFIX}{store}"


def store_of(dag: str) -> str:
    """The store of a rollout DAG (`rollout_dag_id`'s inverse)."""
    return dag.removeprefix(ROLLOUT_DAG_PREFIX)


def repush_dag_id(store: str) -> str:
    """The store's scheduled repush DAG."""
    return f"{REPUSH_DAG_PREFIX}{store}"


def upgrade_dag_id(pipeline: str) -> str:
    """A streaming pipeline's drain and upgrade DAG."""
    return f"{UPGRADE_DAG_PREFIX}{pipeline}"


def pipeline_of(dag: str) -> str:
    """The pipeline of an upgrade DAG (`upgrade_dag_id`'s inverse)."""
    return dag.removeprefix(UPGRADE_DAG_PREFIX)


def region_group(region: str) -> str:
    """The task group of a region in the rollout DAG (`dc-1` -> `dc_1`)."""
    return region.replace("-", "_")


def region_of(task_id: str) -> str | None:
    """The region whose task group holds a rollout DAG's task (`region_group`'s inverse), None for a task of the
    whole push."""
    group, dot, _ = task_id.partition(".")
    return group.replace("_", "-") if dot else None


def asset_uri(cluster: str, store: str) -> str:
    """The store as an Airflow asset, `venice://<cluster>/<store>`: a rollout that ends with every region serving
    its version emits an event of it, which downstream DAGs scheduled on it run after."""
    return f"{ASSET_SCHEME}://{quote(cluster, safe='')}/{quote(store, safe='')}"


def run_confs(run_conf: Mapping[str, Any] | None) -> dict[str, str]:
    """The push confs of a DAG run's conf (its params): its `conf`, with `source.kafka=true` when its `source` is
    `kafka` (the trigger form's repush)."""
    run_conf = run_conf or {}
    confs = {str(k): str(v) for k, v in (run_conf.get("conf") or {}).items()}
    if run_conf.get("source") == SOURCE_KAFKA_PARAM:
        confs[repush_config.SOURCE_KAFKA] = "true"
    return confs


def push_job_id(store: str, run_id: str, run_conf: Mapping[str, Any] | None = None) -> str:
    """The push job id of a DAG run (hook invocations and the version record it): a repush run's starts with
    Venice's `venice_re_push_` or `venice_ttl_re_push_`."""
    prefix = repush_config.job_id_prefix(run_confs(run_conf))
    return f"{prefix}{store}-{re.sub(r'[^A-Za-z0-9_-]', '-', run_id)}"[:128]
