"""What the tests of rollouts through real Airflow share: the cluster settings they run under (every run recorded
by a hook and sent as lifecycle events), and ways to watch, crash and read a run."""

from __future__ import annotations

import json
import os
import re
import subprocess
import urllib.parse
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import KafkaException
from sqlalchemy import select

from tests.support.platform import PlatformEnv
from tests.support.reads import wait_for
from tests.support.topics import read_partition
from venice_core.deployment import airflow as deployment
from venice_core.embedded import airflow
from venice_core.errors import ComponentError
from venice_core.hooks.api import HOOK_FUNCTIONS, StoreVersionLifecycleEventOutcome
from venice_core.hooks.records import metrics_text
from venice_core.meta import MetadataStore
from venice_core.meta.models import HookInvocationRecord
from venice_core.orchestration.airflow.api import AirflowApi
from venice_core.pubsub import admin
from venice_core.rollout.names import FAILURE_XCOM, asset_uri, rollout_dag_id

REPO = Path(__file__).parents[2]
USER_DAGS = REPO / "tests" / "airflow" / "dags"  # the config's airflow.user.dags.folder in the Airflow tests
CONSUMER_DAG = "train_on_venice_store"  # tests/airflow/dags/asset_consumer.py
HOOKS = "tests.hooks_fixtures.sample_hooks"
INTERVAL = 2.0
EVENTS = "venice.store.lifecycle.hooks.configs.lifecycle.events"
EVENTS_TOPIC = "venice-lifecycle-events"
# Every test's runs are recorded (RecordEveryCall) and sent as lifecycle events to a topic and a webhook.
CLUSTER_SETTINGS = {
    "venice.store.lifecycle.hooks": f"{HOOKS}.AnswerFromConfig,{HOOKS}.FailWhereConfigured,"
    f"venice_core.hooks.builtin.ManualApproval,{HOOKS}.RecordEveryCall,venice_core.hooks.events.LifecycleEvents",
    "venice.store.lifecycle.hooks.wait.interval.seconds": str(INTERVAL),
    "venice.store.lifecycle.hooks.timeout.seconds": "2",
    "venice.store.lifecycle.hooks.configs.slow.seconds": "4",
    "venice.store.lifecycle.hooks.configs.manual.approval.regions": "",  # stores opt in
    "rollout.step.retry.delay.seconds": "2",
}


def write_settings(env: PlatformEnv, base: str, overrides: dict[str, str]) -> None:
    settings = {**CLUSTER_SETTINGS, "venice.store.lifecycle.hooks.configs.state.dir": str(env.home / "hook-state")}
    settings.update(overrides)
    env.properties.write_text(base + "".join(f"{k}={v}\n" for k, v in settings.items()))


@contextmanager
def cluster_settings(env: PlatformEnv, **overrides: str) -> Iterator[None]:
    """Change the cluster config for one test: Airflow's tasks read it afresh, as after an operator's edit."""
    base = env.properties.read_text().split("venice.store.lifecycle.hooks=")[0]
    write_settings(env, base, overrides)
    try:
        yield
    finally:
        write_settings(env, base, {})


def metric(env: PlatformEnv, name: str, **labels: str) -> float:
    """One counter of `venice metrics` (0 when absent)."""
    text = metrics_text(env.meta)
    wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    match = re.search(rf"^{name}{{{re.escape(wanted)}}} (\S+)$", text, re.M)
    return float(match.group(1)) if match else 0.0


def invocations_of(env: PlatformEnv, store: str, function: str, region: str) -> list[HookInvocationRecord]:
    meta = MetadataStore(env.config.metadata_db_url)
    try:
        with meta.session() as session:
            r = HookInvocationRecord
            query = select(r).where(r.store_name == store, r.function == function, r.region == region)
            return list(session.scalars(query.order_by(r.id)))
    finally:
        meta.dispose()


VERSION_FUNCTIONS = [f for f in HOOK_FUNCTIONS if HOOK_FUNCTIONS[f] is StoreVersionLifecycleEventOutcome]
REGION_FUNCTIONS = [f for f in HOOK_FUNCTIONS if "version" in f and "end_of_push" not in f]
BEFORE_VERSION = ["validate_hook_config", "pre_start_of_push_job", "post_start_of_push_job"] + [
    "pre_schema_registration",
    "post_schema_registration",
]


def recorded_calls(env: PlatformEnv, store: str) -> list[dict]:
    path = env.home / "hook-state" / f"calls-{store}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def assert_vip4_calls(calls: list[dict], version: int, regions: list[str]) -> None:
    """All 14 functions, first called in the order of VIP-4's table (and, within each region, its functions in
    that order), each with the arguments of the seed: a version from version creation on, a region for the
    per-region ones, the job status for those that may WAIT or ROLLBACK, the schemas for schema registration."""
    assert list(dict.fromkeys(c["function"] for c in calls)) == list(HOOK_FUNCTIONS)
    for region in regions:
        in_region = [c["function"] for c in calls if c["region"] == region]
        assert list(dict.fromkeys(in_region)) == REGION_FUNCTIONS, region
    for call in calls:
        function = call["function"]
        assert call["region"] in (regions if function in REGION_FUNCTIONS else [None]), call
        assert call["version"] == (None if function in BEFORE_VERSION else version), call
        if function in VERSION_FUNCTIONS:
            status = call["job_status"]
            assert status["version"] == version and status["regions"] == sorted(regions), call
            created = function != "pre_store_version_creation"
            assert (status["status"] != "NOT_CREATED") is created, call
        if function.endswith("schema_registration"):
            assert {"new_schema", "existing_schemas"} <= set(call["details"]), call


def events_from_topic(env: PlatformEnv, store: str) -> list[dict]:
    bootstrap = env.config.region(env.config.source_region).kafka_bootstrap
    return [
        e for e in (json.loads(value) for _key, value in read_partition(bootstrap, EVENTS_TOPIC)) if e["store"] == store
    ]


def read_line(process: subprocess.Popen[str], prefix: str) -> str:
    """The next line of a running command's output that starts with `prefix` (without its newline)."""
    assert process.stdout is not None
    for line in process.stdout:
        if line.startswith(prefix):
            return line.rstrip("\n")
    raise AssertionError(f"the command ended without a line starting {prefix!r}: {process.communicate()}")


def kill_spark_push(store: str, push: subprocess.Popen[str], times: int) -> tuple[str, str]:
    """SIGKILL the store's Spark push JVM as soon as it appears, on `times` tries; then follow the push out."""
    pattern = f"SparkSubmit.*--name venice-push-{store}"

    def killed() -> bool:
        if subprocess.run(["pkill", "-KILL", "-f", pattern]).returncode == 0:
            return True
        assert push.poll() is None, push.communicate()
        return False

    def gone() -> bool:
        return subprocess.run(["pgrep", "-f", pattern], capture_output=True).returncode != 0

    try:
        for attempt in range(1, times + 1):
            wait_for(f"Spark push try {attempt} of {store} to start", killed, timeout=600, interval=0.5)
            wait_for(f"killed Spark push try {attempt} to be gone", gone, timeout=60, interval=0.2)  # before the next
        return push.communicate(timeout=900)
    finally:
        if push.poll() is None:
            push.kill()


def wait_for_step(env: PlatformEnv, store: str, task_id: str, state: str, push: subprocess.Popen[str]) -> None:
    """Until the step is in `state` in the store's latest run; a push that ended before is a failure, with why."""

    def reached() -> bool:
        if step_state(env, store, task_id) == state:
            return True
        assert push.poll() is None, (push.communicate(), failed_attempts(env, store))
        return False

    wait_for(f"{task_id} to become {state}", reached, timeout=600, interval=1)


def failed_attempts(env: PlatformEnv, store: str, lines: int = 25) -> str:
    """The end of each failed task attempt's log in the store's runs: what a failure on CI needs to be understood."""
    logs = deployment.home(env.config) / "logs" / f"dag_id={rollout_dag_id(store)}"
    found = []
    for log in sorted(logs.glob("run_id=*/task_id=*/attempt=*.log")):
        events = []
        for line in log.read_text(errors="replace").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            events.append(f"{record.get('timestamp', '')} {record.get('level', '')} {record.get('event', '')}")
        if any(" error " in e or " critical " in e for e in events):
            found.append(f"{log.parent.name}/{log.name}:\n" + "\n".join(events[-lines:]))
    return "\n".join(found) or "no failed attempt in the task logs"


def wait_for_data_in_version_topic(
    env: PlatformEnv, store: str, number: int, partitions: int, push: subprocess.Popen[str]
) -> None:
    """Until the source version topic holds more than START_OF_PUSH's segment (3 messages a partition)."""
    source = env.config.region(env.config.source_region)
    topic = source.version_topic(store, number)

    def written() -> bool:
        try:
            ends = admin.end_offsets(source.kafka_bootstrap, topic, partitions)
        except KafkaException:  # the version (its topic) not created yet
            ends = []
        if sum(ends) > 3 * partitions:
            return True
        assert push.poll() is None, push.communicate()
        return False

    wait_for("the push job writing", written, timeout=600, interval=0.1)


def crash_and_restart_airflow(env: PlatformEnv) -> None:
    """SIGKILL all of Airflow, as a crash would (API server, scheduler, dag-processor, running tasks), and start it
    again."""
    airflow.kill(env.config)
    airflow.start(env.config)


def step_state(env: PlatformEnv, store: str, task_id: str) -> str | None:
    """A step's state in the store's latest run, read in-process: a `venice rollout status` process a second
    would cost a CPU-second each while a test waits (the CLI's own tests cover that command)."""
    try:
        api = _signed_in(env)
        run = api.latest_run(rollout_dag_id(store))
        return None if run is None else api.task_state(rollout_dag_id(store), run["dag_run_id"], task_id)
    except ComponentError:  # Airflow restarting
        _SIGNED_IN.pop(deployment.base_url(env.config), None)
        return None


_SIGNED_IN: dict[str, AirflowApi] = {}


def _signed_in(env: PlatformEnv) -> AirflowApi:
    """One signed-in client per Airflow for the polls of a test: signing in at each poll (every second while a test
    waits) cost the API server a request and a token each time."""
    url = deployment.base_url(env.config)
    if url not in _SIGNED_IN:
        _SIGNED_IN[url] = AirflowApi(env.config)
    return _SIGNED_IN[url]


@dataclass(frozen=True)
class ConsumedStore:
    """The store the tests' downstream DAG (`tests/airflow/dags/asset_consumer.py`) is scheduled on, by its asset,
    and what each of that DAG's runs received (the extras of the asset events that triggered it)."""

    name: str
    log: Path

    @classmethod
    def named(cls, folder: Path) -> ConsumedStore:
        return cls(f"consumed_{uuid.uuid4().hex[:8]}", folder / "runs.jsonl")

    @contextmanager
    def in_environment(self) -> Iterator[None]:
        """Its name and log in this process's environment, which the Airflow started meanwhile inherits."""
        names = {"VENICE_TEST_CONSUMED_STORE": self.name, "VENICE_TEST_CONSUMED_LOG": str(self.log)}
        os.environ.update(names)
        try:
            yield
        finally:
            for name in names:
                os.environ.pop(name, None)

    def runs(self) -> list[list[dict]]:
        return [json.loads(line) for line in self.log.read_text().splitlines()] if self.log.exists() else []

    def wait_for_runs(self, count: int, timeout: float = 180) -> list[list[dict]]:
        """Until the downstream DAG has run at least `count` times (count > 0): what each run received."""

        def at_least_count() -> list[list[dict]] | None:
            runs = self.runs()
            return runs if len(runs) >= count else None

        return wait_for(f"{count} runs of the downstream DAG", at_least_count, timeout=timeout, interval=1)


def asset_events(env: PlatformEnv, store: str) -> list[dict]:
    """The events of the store's asset, as Airflow's REST API lists them (the Assets view's)."""
    api = AirflowApi(env.config)
    uri = asset_uri(env.config.cluster_name, store)
    (asset,) = [
        a for a in api.get(f"/api/v2/assets?uri_pattern={urllib.parse.quote(uri)}")["assets"] if a["uri"] == uri
    ]
    return api.get(f"/api/v2/assets/events?asset_id={asset['id']}&limit=100")["asset_events"]


class Operator:
    """What an operator does to a store's rollout runs through Airflow's REST API (the UI makes the same calls)."""

    def __init__(self, env: PlatformEnv, store: str) -> None:
        self.api, self.dag = _signed_in(env), rollout_dag_id(store)

    def _run(self, run_id: str) -> str:
        return f"/api/v2/dags/{self.dag}/dagRuns/{urllib.parse.quote(run_id)}"

    def mark(self, run_id: str, state: str) -> None:
        self.api.call("PATCH", self._run(run_id), {"state": state})

    def clear_run(self, run_id: str) -> None:
        self.api.call("POST", f"{self._run(run_id)}/clear", {"dry_run": False})

    def clear_task(self, run_id: str, task_id: str) -> None:
        body = {"dry_run": False, "dag_run_id": run_id, "task_ids": [task_id], "only_failed": False}
        self.api.call("POST", f"/api/v2/dags/{self.dag}/clearTaskInstances", body)

    def delete(self, run_id: str) -> None:
        self.api.call("DELETE", self._run(run_id))

    def pause(self, paused: bool) -> None:
        self.api.call("PATCH", f"/api/v2/dags/{self.dag}", {"is_paused": paused})

    def trigger(self, conf: dict) -> str:
        """A run triggered as the UI's form does, with `conf` as its params; its run id."""
        return str(
            self.api.call("POST", f"/api/v2/dags/{self.dag}/dagRuns", {"logical_date": None, "conf": conf})[
                "dag_run_id"
            ]
        )

    def runs(self) -> list[str]:
        return [r["dag_run_id"] for r in self.api.get(f"/api/v2/dags/{self.dag}/dagRuns?limit=100")["dag_runs"]]

    def ended(self, run_id: str, timeout: float = 300) -> str:
        """Until the run has ended: its state."""
        return str(
            wait_for(
                f"run {run_id} to end",
                lambda: (state := self.api.run_state(self.dag, run_id)) in ("success", "failed") and state,
                timeout=timeout,
                interval=1,
            )
        )

    def task_state(self, run_id: str, task_id: str) -> str:
        return self.api.task_state(self.dag, run_id, task_id) or "none"

    def failure(self, run_id: str, task_id: str) -> object | None:
        return self.api.xcom(self.dag, run_id, task_id, FAILURE_XCOM)
