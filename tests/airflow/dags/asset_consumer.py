"""A downstream DAG of the Airflow tests (the config's `airflow.user.dags.folder`), as a team's model-training DAG
would be: scheduled on a store's asset, it runs after each rollout that announces a version serving everywhere.
The tests name the store (`VENICE_TEST_CONSUMED_STORE`) and read what each run received from a file
(`VENICE_TEST_CONSUMED_LOG`: one JSON line per run, the extras of the asset events that triggered it)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pendulum
from airflow.sdk import DAG, Asset, task

from venice_core.config import load_config
from venice_core.rollout.names import asset_uri

CONSUMER_DAG = "train_on_venice_store"
STORE = os.environ.get("VENICE_TEST_CONSUMED_STORE")

if STORE:
    with DAG(
        CONSUMER_DAG,
        schedule=[Asset(asset_uri(load_config().cluster_name, STORE))],
        start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
        catchup=False,
        tags=["test"],
    ):

        @task
        def train(**context: Any) -> None:
            extras = [event.extra for event in context["triggering_asset_events"].values() for event in event]
            with Path(os.environ["VENICE_TEST_CONSUMED_LOG"]).open("a") as log:
                log.write(json.dumps(extras) + "\n")

        train()
