"""Whole rollouts through real Airflow (`airflow standalone`): `venice push` triggers the store's DAG run over the
session's platform; the hooks answer, fail or time out as the store-level configs tell them. Each decision takes its
branch (a ROLLBACK, an ABORT past the maximum wait), and the rollout page shows the result in a browser. Input the
push job refuses, and a push queued behind another, are here too (the three files of this folder run side by side,
one on each test worker, each with an Airflow of its own)."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from scripts.generate_dataset import generate
from tests.support.airflow_runs import (
    HOOKS,
    INTERVAL,
    ConsumedStore,
    assert_vip4_calls,
    asset_events,
    cluster_settings,
    events_from_topic,
    invocations_of,
    metric,
    read_line,
    recorded_calls,
    step_state,
    wait_for_step,
)
from tests.support.browser import rollout_tab, status_without_valid_token
from tests.support.da_vinci import heartbeating_instance
from tests.support.inputs import expected_records, write_rows
from tests.support.jobs import RecordsJob
from tests.support.platform import SCHEMAS, PlatformEnv
from tests.support.reads import assert_serves, wait_for
from tests.support.sandbox import free_ports
from tests.support.topics import InMemoryTopics
from tests.support.webhook import Webhook
from venice_core.client import ReadClient
from venice_core.controller import da_vinci, stores, versions
from venice_core.davinci import DaVinciClient, DuckDBRecordTransformer
from venice_core.deployment import airflow as deployment
from venice_core.hooks.api import HOOK_FUNCTIONS
from venice_core.orchestration.airflow.api import AirflowApi
from venice_core.pubsub.control import read_dictionary
from venice_core.rollout.names import asset_uri, rollout_dag_id

pytestmark = [pytest.mark.spark, pytest.mark.airflow]


def test_a_rollout_proceeds_past_failing_hooks_re_asks_on_wait_and_waits_for_da_vinci_instances(
    airflow_env: PlatformEnv, events_webhook: Webhook, consumed_store: ConsumedStore, tmp_path: Path
) -> None:
    """One DAG run through every step. Policy PROCEED (Venice's contract): a hook that raises in dc-0 and one that times
    out in dc-1 are recorded and counted, and the rollout goes on; in dc-2 the hook answers WAIT twice, and the
    sensor re-asks each interval. A Da Vinci instance registered in dc-1 (heartbeating, as a client does) has dc-1's
    ingestion gate opened, and holds dc-1's Da Vinci swap (and so dc-1's server swap) until it reports that it
    serves the version; the other regions have no instance and do not wait. The push's configs (`venice push
    --conf`) reach the Spark job: its input holds a key twice with different values, which
    `allow.duplicate.key=true` lets through, and a new field, which the store registers as a new value schema. The
    store is ZSTD_WITH_DICT: the run's compression_dictionary step trains the dictionary from the input, serialised
    with that new schema, and hands it to version creation as its XCom, which START_OF_PUSH carries. Then every
    region serves the input. A recording hook saw all 14 lifecycle functions in VIP-4's order, and the
    lifecycle-event hook sent each to a topic and a webhook. pre_store_version_creation answers WAIT twice in dc-0:
    its sensor is asked again after each interval (two, so that `venice push`, which looks every 2 s, always sees it
    waiting: one interval's wait fell between two of its looks on a loaded machine).

    The store is the asset of a downstream DAG (`tests/airflow/dags`): the rollout's end announces the version, and that
    DAG runs once, with the version, the regions and the record count. VIP-4's `/job` reply of the plugin says each
    region's status and when it last changed, to a signed-in client only. A second push, which
    pre_store_version_creation ROLLs BACK in dc-2, takes that sensor's rollback branch: no version is created, every
    region keeps version 1, and nothing is announced (the downstream DAG does not run again)."""
    store = airflow_env.create_user_store(
        "afp", name=consumed_store.name, auto_register_schemas=True, compression="ZSTD_WITH_DICT"
    )
    failing = ("hook_class", f"{HOOKS}.FailWhereConfigured"), ("function", "pre_store_version_swap")
    before = {
        m: metric(airflow_env, m, **dict(failing)) for m in ("venice_hook_failures_total", "venice_hook_timeouts_total")
    }
    stores.update_store(
        airflow_env.meta,
        airflow_env.config,
        store,
        hook_configs={
            "fail.pre_store_version_swap.dc-0": "raise",
            "fail.pre_store_version_swap.dc-1": "timeout",
            "answer.pre_store_version_swap.dc-2": "WAIT*2",
            "answer.pre_store_version_creation.dc-0": "WAIT*2",
        },
    )
    data = generate(tmp_path / "in", 500, files=1)
    (part,) = data.glob("*.parquet")  # a new field: the push registers a new value schema through the hooks
    table = pq.read_table(part)
    pq.write_table(table.append_column("city", pa.array(["Oslo"] * table.num_rows)), part)
    twice = [{"key": "twice", "name": "n", "age": age, "score": 1.0, "city": "Oslo"} for age in (1, 2)]
    pq.write_table(pa.Table.from_pylist(twice, pq.read_schema(part)), data / "part-twice.parquet")
    meta = airflow_env.meta
    with heartbeating_instance(meta, store, "dc-1", "client-a") as client:
        push = airflow_env.venice_background("push", store, "--input", str(data), "--conf", "allow.duplicate.key=true")
        try:
            wait_for_step(airflow_env, store, "dc_1.da_vinci_swap", "up_for_reschedule", push)
            assert da_vinci.gate_open(meta, store, 1, "dc-1") and da_vinci.swap_open(meta, store, 1, "dc-1")
            assert airflow_env.serving(store) == {"dc-0": 1, "dc-1": 0, "dc-2": 0}
            client.serves(1)
            out, err = push.communicate(timeout=600)
        finally:
            if push.poll() is None:
                push.kill()
    assert push.returncode == 0, out + err
    assert "dc_2.post_swap: success" in out and "end_of_push_job: success" in out
    # The follower prints in the order things happened: dc-2's WAITs come after dc-1's swap, before dc-2's.
    lines = out.splitlines()
    waits = [i for i, line in enumerate(lines) if "AnswerFromConfig answered WAIT at pre_store_version_swap" in line]
    assert lines.index("  dc_1.post_swap: success") < waits[0] < lines.index("  dc_2.post_swap: success"), out
    for region in airflow_env.config.region_names:  # and each region's ingestion, to the last record
        assert re.search(rf"^  {region} ingestion: [\d,]+ of [\d,]+ records \(100%\)$", out, re.M), out
    assert airflow_env.serving(store) == {"dc-0": 1, "dc-1": 1, "dc-2": 1}
    assert "  compression_dictionary: success" in out
    api, dag = AirflowApi(airflow_env.config), rollout_dag_id(store)
    run = api.latest_run(dag)
    assert run is not None
    trained: Any = api.xcom(dag, run["dag_run_id"], "compression_dictionary", "return_value")
    trained = json.loads(trained) if isinstance(trained, str) else trained
    source = airflow_env.config.region(airflow_env.config.source_region)
    sent = read_dictionary(source.kafka_bootstrap, source.version_topic(store, 1))
    assert sent and base64.b64decode(trained["dictionary"]) == sent and trained["samples"] == 502, trained
    expected = expected_records(data)
    assert expected.pop("twice")["age"] in (1, 2)  # one of the two, as the input allowed
    assert_serves(airflow_env, store, expected)
    for region in airflow_env.config.region_names:
        assert ReadClient("127.0.0.1", airflow_env.config.server_port(region)).get(store, "twice")["age"] in (1, 2)

    assert "FailWhereConfigured answered PROCEED at pre_store_version_swap in dc-0: RuntimeError: " in out
    assert "FailWhereConfigured answered PROCEED at pre_store_version_swap in dc-1: timed out after 2s" in out
    assert out.count("AnswerFromConfig answered WAIT at pre_store_version_swap in dc-2") == 2
    assert (
        metric(airflow_env, "venice_hook_failures_total", **dict(failing))
        >= before["venice_hook_failures_total"] + 1  # +1 per ask (a retried poke asks again)
    )
    assert (
        metric(airflow_env, "venice_hook_timeouts_total", **dict(failing))
        >= before["venice_hook_timeouts_total"] + 1  # +1 per ask (a retried poke asks again)
    )
    asked = invocations_of(airflow_env, store, "pre_store_version_swap", "dc-2")
    answers = [i.outcome for i in asked if i.hook_class.endswith("AnswerFromConfig")]
    # A poke that Airflow's reschedule race (apache/airflow#71172) fails after it PROCEEDed is retried and asks again.
    assert answers[:3] == ["WAIT", "WAIT", "PROCEED"] and set(answers[3:]) <= {"PROCEED"}, answers
    times = [i.created_at for i in asked if i.hook_class.endswith("AnswerFromConfig")][:3]
    gaps = [later - earlier for earlier, later in zip(times, times[1:], strict=False)]
    assert all(INTERVAL <= gap < INTERVAL + 30 for gap in gaps), gaps  # re-asked after the interval, not before

    creation = invocations_of(airflow_env, store, "pre_store_version_creation", "dc-0")
    creation = [i for i in creation if i.hook_class.endswith("AnswerFromConfig")]
    assert [i.outcome for i in creation][:3] == ["WAIT", "WAIT", "PROCEED"], creation
    gaps = [b.created_at - a.created_at for a, b in zip(creation[:2], creation[1:3], strict=True)]
    assert all(gap >= INTERVAL for gap in gaps), gaps  # a sensor's next poke, not a loop
    assert "  pre_version_creation: up_for_reschedule" in out

    # Every VIP-4 function was called, in the order of VIP-4's table, each with what the seed gives it.
    assert_vip4_calls(recorded_calls(airflow_env, store), version=1, regions=["dc-0", "dc-1", "dc-2"])
    # The lifecycle-event hook sent an event for each to the topic and to the webhook, from the task processes'
    # hook workers, every region's.
    for events in (events_from_topic(airflow_env, store), [e for e in events_webhook.events if e["store"] == store]):
        assert {e["function"] for e in events} == set(HOOK_FUNCTIONS)
        swaps = {e["region"] for e in events if e["function"] == "pre_store_version_swap"}
        assert swaps == {"dc-0", "dc-1", "dc-2"}

    # The store's asset: one event, whose extra the downstream DAG's one run received.
    (received,) = consumed_store.wait_for_runs(1)
    records = sum((versions.get_version(meta, store, 1).lifecycle.record_counts or {}).values())
    assert received == [
        {
            "store": store,
            "version": 1,
            "regions": ["dc-0", "dc-1", "dc-2"],
            "records": records,
            "push_job_id": received[0]["push_job_id"],
            "repush": False,
        }
    ]
    assert len(asset_events(airflow_env, store)) == 1
    # VIP-4's /job reply, behind Airflow's auth.
    job_url = f"{deployment.base_url(airflow_env.config)}/venice/api/job/{store}/1"
    assert status_without_valid_token(job_url) == 401
    job = AirflowApi(airflow_env.config).get(f"/venice/api/job/{store}/1")
    assert job["version_status"] == "ONLINE" and set(job["regions"]) == {"dc-0", "dc-1", "dc-2"}
    assert all(r["status"] == "COMPLETED" and r["updated_at"] > 0 for r in job["regions"].values()), job
    assert {"hook": f"{HOOKS}.AnswerFromConfig", "function": "pre_store_version_swap", "region": "dc-2"}.items() <= (
        next(a for a in job["hook_answers"] if a["function"] == "pre_store_version_swap" and a["region"] == "dc-2")
    ).items()
    cli_job = json.loads(airflow_env.cli("rollout", "status", store, "--json", check=True).stdout)["job"]
    assert cli_job["regions"] == job["regions"]

    # A ROLLBACK at version creation: the whole push stops there, before anything is created or announced.
    stores.update_store(
        meta, airflow_env.config, store, hook_configs={"answer.pre_store_version_creation.dc-2": "ROLLBACK"}
    )
    result = airflow_env.venice("push", store, "--input", str(data), timeout=600)
    assert result.returncode == 3, result.stdout + result.stderr
    assert result.stderr.startswith(
        "error: rollout run failed at pre_version_creation_rollback; no version was created: AnswerFromConfig "
        "answered ROLLBACK at pre_store_version_creation in dc-2"
    ), result.stderr
    status = json.loads(airflow_env.cli("rollout", "status", store, "--json", check=True).stdout)
    states = {s["task"]: s["state"] for s in status["steps"]}
    assert states["pre_version_creation"] == "success" and states["pre_version_creation_rollback"] == "failed"
    assert states["pre_version_creation_abort"] == "skipped"
    assert states["create_version"] == states["spark_push"] == states["announce_version"] == "skipped", states
    assert stores.describe_store(meta, store).largest_used_version == 1
    assert airflow_env.serving(store) == {"dc-0": 1, "dc-1": 1, "dc-2": 1}
    assert len(asset_events(airflow_env, store)) == 1 and len(consumed_store.runs()) == 1


def test_hook_failures_under_wait_policy_wait_then_abort_past_the_maximum(
    airflow_env: PlatformEnv, tmp_path: Path
) -> None:
    """Policy WAIT: a hook that raises twice in dc-0 holds the swap back two intervals, then the rollout goes on;
    one that keeps timing out in dc-1 holds it until the maximum wait, which ends the rollout with an explicit
    ABORT: dc-0 keeps the new version, dc-1 and dc-2 the old one, and the version says why. A real Da Vinci client
    (DuckDB) in dc-1 ingests v2 once dc-1's gate opens, but serves it only once every gate of dc-1's swap has let
    it (VIP-4: its clients, then its servers): after the ABORT at dc-1's pre swap it has never served v2, and drops
    it."""
    store = airflow_env.create_user_store("afw")
    v1 = expected_records(generate(tmp_path / "v1", 50, files=1))
    airflow_env.push(store, RecordsJob(v1))  # v1, directly
    client = DaVinciClient(
        store,
        "dc-1",
        tmp_path / "dvc",
        DuckDBRecordTransformer(tmp_path / "dvc" / "c.duckdb"),
        config=airflow_env.config,
    )
    client.start(timeout=60)
    ready_at, serving_at = _watch(client, 2)
    airflow_env.cli(
        "store",
        "update",
        store,
        "--hook-config",
        "fail.pre_store_version_swap.dc-0=raise*2",
        "--hook-config",
        "fail.pre_store_version_swap.dc-1=timeout",
        check=True,
    )
    settings = {
        "venice.store.lifecycle.hooks.failure.policy": "WAIT",
        "venice.store.lifecycle.hooks.wait.max.seconds": "12",
    }
    try:
        with cluster_settings(airflow_env, **settings):
            result = airflow_env.venice(
                "push", store, "--input", str(generate(tmp_path / "v2", 50, files=1)), timeout=900
            )
        # The client ingested v2 (dc-1's gate opened) and never served it: dc-1's swap never came.
        assert ready_at and serving_at == [], (ready_at, serving_at)
        wait_for("the client to drop v2", lambda: sorted(client.status()["versions"]) == [1], timeout=30)
        first = sorted(v1)[0]
        assert client.serving == 1 and client.get(first) == v1[first]
        assert client.sql(f'SELECT count(*) FROM "{store}"') == [(len(v1),)]
    finally:
        client.close()
    assert result.returncode == 3, result.stdout + result.stderr
    assert (
        "rollout run failed at dc_1.pre_swap_abort; version 2 is PARTIALLY_ONLINE: aborted by a hook at "
        in result.stderr
    )
    assert re.search(
        r"pre_store_version_swap in dc-1 \(still WAIT after \d+s, past the maximum wait of 12s that the cluster config "
        r"sets \(venice.store.lifecycle.hooks.wait.max.seconds\)\)",
        result.stderr,
    )
    assert airflow_env.serving(store) == {"dc-0": 2, "dc-1": 1, "dc-2": 1}
    dc0 = [i for i in invocations_of(airflow_env, store, "pre_store_version_swap", "dc-0") if i.version == 2]
    dc0_answers = [(i.outcome, bool(i.error)) for i in dc0 if i.hook_class.endswith("FailWhereConfigured")]
    # A poke failed by Airflow's reschedule race after it PROCEEDed is retried and asks again.
    assert dc0_answers[:3] == [("WAIT", True), ("WAIT", True), ("PROCEED", False)], dc0_answers
    assert set(dc0_answers[3:]) <= {("PROCEED", False)}, dc0_answers
    dc1 = [i for i in invocations_of(airflow_env, store, "pre_store_version_swap", "dc-1") if i.version == 2]
    failing = [i for i in dc1 if i.hook_class.endswith("FailWhereConfigured")]
    assert failing and all(i.timed_out and i.outcome == "WAIT" for i in failing)
    assert failing[-1].created_at - failing[0].created_at >= 12 - INTERVAL - 4

    # The run's Rollout tab in the Airflow UI, in a real browser; its page refuses a client without a valid token.
    pages = f"{deployment.base_url(airflow_env.config)}/venice/rollout/"
    for page in (pages, f"{pages}{rollout_dag_id(store)}"):
        assert status_without_valid_token(page) == 401 and status_without_valid_token(page, "forged") == 403
    run_id = AirflowApi(airflow_env.config).latest_run(rollout_dag_id(store))["dag_run_id"]
    tab = rollout_tab(airflow_env.config, store, run_id, tmp_path)
    assert tab.serving == {"dc-0": "v2", "dc-1": "v1", "dc-2": "v1"} and tab.version_status == "PARTIALLY_ONLINE"
    assert tab.outcomes["dc-1"].startswith("ABORT at pre_swap\naborted by a hook at pre_store_version_swap in dc-1")
    assert (
        re.search(r"\(still WAIT after \d+s", tab.outcomes["dc-1"])
        and tab.outcomes["dc-0"] == tab.outcomes["dc-2"] == ""
    )
    assert "WAIT" in tab.steps["dc-1"] and "timed out after 2s" in tab.steps["dc-1"] and tab.screenshot.exists()
    started = re.compile(r"\d\d:\d\d:\d\d\s\d+\s[smh]\b")  # a step's start (UTC) and duration: "21:04:05 12 s"
    assert started.search(tab.steps["dc-0"]) and started.search(tab.steps["dc-1"]), tab.steps
    assert "dc-0 v2, dc-1 v1, dc-2 v1" in tab.listed and "failed" in tab.listed  # Browse > Rollouts
    assert asset_uri(airflow_env.config.cluster_name, store) in tab.asset  # the store in Airflow's Assets view


def _watch(client: DaVinciClient, version: int) -> tuple[list[float], list[float]]:
    """When the client first holds `version` ingested, and first serves it, in lists a watching thread fills."""
    ready: list[float] = []
    serving: list[float] = []

    def watch() -> None:
        while client.meta is not None:
            now = time.time()
            if not ready and client.status()["versions"].get(version, {}).get("ready"):
                ready.append(now)
            if not serving and client.serving == version:
                serving.append(now)
            time.sleep(0.05)

    threading.Thread(target=watch, daemon=True).start()
    return ready, serving


def test_rollback_of_a_first_version_takes_its_branch_and_leaves_no_region_serving_it(
    airflow_env: PlatformEnv, tmp_path: Path
) -> None:
    """ROLLBACK at dc-1's post swap of the store's first version: the branch after the sensor takes
    `post_swap_rollback`, which returns dc-0 and dc-1 (they had swapped) to serving no version; dc-2 never swaps,
    and reads say there is no version. (Rolling back to a previous version is the local rollout's test.) The
    store's lifecycle-event webhook is broken: delivery fails and the rollout goes on as the hooks decide."""
    store = airflow_env.create_user_store("af")
    (closed,) = free_ports(1)
    airflow_env.cli(
        "store",
        "update",
        store,
        "--hook-config",
        "answer.post_store_version_swap.dc-1=ROLLBACK",
        "--hook-config",
        f"lifecycle.events.webhook.url=http://127.0.0.1:{closed}/events",
        check=True,
    )
    result = airflow_env.venice("push", store, "--input", str(generate(tmp_path / "v1", 300, files=1)), timeout=900)
    assert result.returncode == 3, result.stdout + result.stderr
    assert "failed at dc_1.post_swap_rollback; version 1 is ROLLED_BACK" in result.stderr
    assert airflow_env.serving(store) == {"dc-0": 0, "dc-1": 0, "dc-2": 0}
    status = json.loads(airflow_env.cli("rollout", "status", store, "--json", check=True).stdout)
    states = {s["task"]: s["state"] for s in status["steps"]}
    assert states["dc_1.post_swap"] == "success" and states["dc_1.post_swap_rollback"] == "failed"
    assert states["dc_1.post_swap_abort"] == "skipped" and states["dc_1.region_done"] == "skipped"
    assert states["dc_0.region_done"] == "success" and states["end_of_push_job"] == "skipped"
    refused = airflow_env.cli("get", store, "user-000000001", "--region", "dc-0")
    assert refused.returncode != 0 and f"store '{store}' has no current version in dc-0" in refused.stderr
    undelivered = [e for e in events_from_topic(airflow_env, store) if e["function"] == "post_store_version_swap"]
    assert {e["region"] for e in undelivered} == {"dc-0", "dc-1"}  # the topic still got them


def test_refused_input_fails_the_push_once_and_the_previous_version_keeps_serving(
    airflow_env: PlatformEnv, tmp_path: Path
) -> None:
    """Input the push job refuses ends the rollout at spark_push on the first try (retrying would not change
    it): one error line that names the problem, the version killed with that reason, the old version serving.
    (The same input accepted with `--conf allow.duplicate.key=true` is part of the all-steps run above.)

    While that run is in flight, a push with `--no-queue` is refused in one line and triggers nothing; a push
    without it says at once that it queues behind the run, and its run starts once that one has ended (where a
    hook, configured meanwhile, stops it at once: a whole second rollout would cost the suite a minute)."""
    store = airflow_env.create_user_store("afb", 1)
    good = generate(tmp_path / "good", 100, files=1)
    airflow_env.push(store, RecordsJob(expected_records(good)))  # v1, directly
    rows = [{"key": k, "name": "n", "age": age, "score": 1.0} for k, age in (("a", 1), ("a", 2), ("b", 3))]
    bad = write_rows(tmp_path / "bad", rows)
    later = generate(tmp_path / "later", 10, files=1, seed=7)
    api, dag = AirflowApi(airflow_env.config), f"venice_push__{store}"
    push = airflow_env.venice_background("push", store, "--input", str(bad))
    queued: subprocess.Popen[str] | None = None
    try:
        run_id = read_line(push, "triggered ").split(" run ", 1)[1].strip()  # "triggered <dag> run <run id>"
        wait_for_step(airflow_env, store, "spark_push", "running", push)
        refused = airflow_env.cli("push", store, "--input", str(later), "--no-queue")
        assert refused.returncode == 1 and refused.stdout == "", refused.stdout + refused.stderr
        assert refused.stderr == (
            f"error: a rollout of '{store}' is in flight (run {run_id}); not queueing behind it (--no-queue)\n"
        )
        assert api.active_runs(dag) == [run_id]  # nothing triggered
        # The run in flight is past start_of_push_job; the next one stops there.
        airflow_env.cli("store", "update", store, "--hook-config", "answer.pre_start_of_push_job=ABORT", check=True)
        queued = airflow_env.venice_background("push", store, "--input", str(later))
        queued_id = read_line(queued, "triggered ").split(" run ", 1)[1].strip()
        assert read_line(queued, "") == f"queued behind run {run_id}; following it when it starts"
        out, err = push.communicate(timeout=900)
        assert push.returncode == 3, out + err
        assert err.startswith(
            "error: rollout run failed at spark_push; version 2 is KILLED: "
            "the push job refused its input: duplicate key with different values in the input"
        )
        assert len(err.splitlines()) == 1
        assert {t["task_id"]: t["try_number"] for t in api.task_instances(dag, run_id)}["spark_push"] == 1
        queued_out, queued_err = queued.communicate(timeout=900)
    finally:
        for process in (push, queued):
            if process is not None and process.poll() is None:
                process.kill()
    assert queued.returncode == 3, queued_out + queued_err
    assert f"run {queued_id} started" in queued_out
    assert queued_err.startswith(
        "error: rollout run failed at start_of_push_job; no version was created: "
        "AnswerFromConfig answered ABORT at pre_start_of_push_job"
    )
    assert airflow_env.serving(store) == {"dc-0": 1, "dc-1": 1, "dc-2": 1}
    assert_serves(airflow_env, store, expected_records(good))


def test_the_da_vinci_gate_holds_a_live_client_off_a_version_and_its_rollback_returns_every_region_and_the_client(
    airflow_env: PlatformEnv, tmp_path: Path
) -> None:
    """VIP-4's Da Vinci ingestion gate through Airflow, with a real DuckDB client in dc-1. While dc-1's gate answers
    WAIT, the client stays off version 2 (no table of it appears) though dc-1's servers have all of it; once the gate
    PROCEEDs, the client ingests it and serves it once the region's Da Vinci swap lets it, before dc-1's servers.
    dc-2's gate then answers ROLLBACK: every region goes back to version 1, and so does the client. A third push,
    whose gate ABORTs in dc-1 at version creation, is killed there: the client stays on version 1 and never sees
    version 3."""
    store = airflow_env.create_user_store("afg")
    meta, config = airflow_env.meta, airflow_env.config
    # The gates WAIT through the whole push: a sensor poked every 2 s for minutes on a loaded machine meets Airflow's
    # reschedule race (apache/airflow#71172) more often than its retries absorb; every 10 s it all but never does.
    slower = {"venice.store.lifecycle.hooks.wait.interval.seconds": "10"}
    v1 = expected_records(generate(tmp_path / "v1", 50, files=1))
    airflow_env.push(store, RecordsJob(v1))  # v1, directly
    gate = "answer.pre_start_of_store_version_ingestion_for_da_vinci"
    stores.update_store(meta, config, store, hook_configs={f"{gate}.dc-1": "WAIT", f"{gate}.dc-2": "WAIT"})
    tables = f"SELECT table_name FROM information_schema.tables WHERE table_name LIKE '{store}_v%' ORDER BY 1"
    first = sorted(v1)[0]
    client = DaVinciClient(
        store, "dc-1", tmp_path / "dvc", DuckDBRecordTransformer(tmp_path / "dvc" / "c.duckdb"), config=config
    )
    client.start(timeout=60)
    try:
        with cluster_settings(airflow_env, **slower):
            push = airflow_env.venice_background(
                "push", store, "--input", str(generate(tmp_path / "v2", 50, files=1, seed=2))
            )
            try:
                wait_for_step(airflow_env, store, "dc_1.ingestion_complete", "success", push)
                # Still waiting: between pokes, or in one (a poke in progress is `running`, one due `queued`).
                gate_state = step_state(airflow_env, store, "dc_1.da_vinci_ingestion_gate")
                assert gate_state in ("up_for_reschedule", "scheduled", "queued", "running"), gate_state
                assert not da_vinci.gate_open(meta, store, 2, "dc-1")
                assert client.sql(tables) == [(f"{store}_v1",)] and client.serving == 1  # held off version 2
                stores.update_store(meta, config, store, remove_hook_configs=[f"{gate}.dc-1"])  # dc-1's gate: PROCEED
                wait_for_step(airflow_env, store, "dc_1.post_swap", "success", push)
                wait_for("the client to swap to version 2 with its region", lambda: client.serving == 2)
                stores.update_store(meta, config, store, hook_configs={f"{gate}.dc-2": "ROLLBACK"})
                out, err = push.communicate(timeout=600)
            finally:
                if push.poll() is None:
                    push.kill()
        assert push.returncode == 3, out + err
        # (A step of dc-2's chain running as the rollback lands stops with it, and is named beside it.)
        assert re.search(
            r"failed at ([\w.]+; )*dc_2\.da_vinci_ingestion_gate_rollback(; [\w.]+)*; version 2 is ROLLED_BACK", err
        ), err
        assert airflow_env.serving(store) == {"dc-0": 1, "dc-1": 1, "dc-2": 1}
        wait_for("the client to go back to version 1 with its region", lambda: client.serving == 1)
        assert client.get(first) == v1[first]

        stores.update_store(
            meta, config, store, hook_configs={f"{gate}.dc-1": "ABORT"}, remove_hook_configs=[f"{gate}.dc-2"]
        )
        result = airflow_env.venice("push", store, "--input", str(generate(tmp_path / "v3", 50, files=1)), timeout=600)
        assert result.returncode == 3, result.stdout + result.stderr
        assert (
            "rollout run failed at create_version; version 3 is KILLED: aborted by a hook at "
            "pre_start_of_store_version_ingestion_for_da_vinci in dc-1" in result.stderr
        ), result.stderr
        assert airflow_env.serving(store) == {"dc-0": 1, "dc-1": 1, "dc-2": 1}
        assert client.serving == 1 and f"{store}_v3" not in {t for (t,) in client.sql(tables)}
        assert client.get(first) == v1[first]
    finally:
        client.close()


MANY_STORES = 200


@pytest.mark.timeout(900)  # the 200 DAGs' parse, then a create, a delete and an update each parsed
def test_hundreds_of_stores_each_have_their_dags_and_follow_creates_updates_and_deletes(
    airflow_env: PlatformEnv,
) -> None:
    """Every store's DAG has a file of its own (`store_dags`): `venice up` writes those of stores made through the
    controller alone, and all their DAGs are in Airflow. While the platform runs, a store created and one deleted
    with the CLI appear and go within seconds, each its own file's parse; `venice store update` returns once
    Airflow serves the changed DAG (its store dag-processor parses on request)."""
    env, api = airflow_env, AirflowApi(airflow_env.config)
    prefix = f"many{uuid.uuid4().hex[:4]}_"
    names = [f"{prefix}{index:03d}" for index in range(MANY_STORES)]
    key, value = (SCHEMAS / "user_key.avsc").read_text(), (SCHEMAS / "user_value_v1.avsc").read_text()
    for name in names:
        stores.create_store(env.meta, env.config, name, key, value, partitions=1)
    try:
        up = env.cli("up", check=True)
        assert "airflow is already running" in up.stdout
        synced = re.search(r"DAG files of (\d+) stores in \S+: (\d+) new, \d+ rewritten, \d+ removed", up.stdout)
        assert synced, up.stdout  # (new: also the stores of the session's other tests, made without this Airflow)
        assert int(synced[1]) >= int(synced[2]) >= MANY_STORES

        def present(name: str) -> int:
            return api.count_dags(rollout_dag_id(name))

        # 200 files parsed by one dag-processor beside the suite: 240-300 s when the machine is saturated, measured.
        wait_for(f"{MANY_STORES} stores' DAGs", lambda: present(prefix) == MANY_STORES, timeout=480, interval=2)
        new, gone = f"{prefix}new", names.pop(7)
        env.cli(
            "store", "create", new, "--key-schema", str(SCHEMAS / "user_key.avsc"),
            "--value-schema", str(SCHEMAS / "user_value_v1.avsc"), check=True,
        )  # fmt: skip
        names.append(new)
        env.cli("store", "delete", gone, check=True)
        wait_for("the new store's DAG, and the deleted one's gone", lambda: present(new) and not present(gone), 120)
        assert present(prefix) == MANY_STORES  # one more, one less
        details = api.get(f"/api/v2/dags/{rollout_dag_id(new)}/details")
        assert (details["bundle_name"], details["relative_fileloc"]) == ("venice-stores", f"{rollout_dag_id(new)}.py")
        # An update that shapes the DAG (a schedule, on a day that is not today or tomorrow: no run here) is served
        # by Airflow when the command returns.
        day = (datetime.now(UTC) + timedelta(days=2)).strftime("%a").lower()
        schedule = ["--push-schedule", "0 3 * * *", "--push-days", day, "--push-input", "/data/{{ ds }}/"]
        env.cli("store", "update", new, *schedule, check=True)
        summary = api.get(f"/api/v2/dags/{rollout_dag_id(new)}/details")["timetable_summary"]
        assert summary.startswith(f"cron 0 3 * * *, within 9-17 h on {day}"), summary
    finally:  # no more stores than before in the session's metadata store (they never pushed: no topic)
        for name in names:
            stores.delete_store(env.meta, env.config, name, topics=InMemoryTopics())
