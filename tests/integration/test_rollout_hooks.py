"""A push rolled out region by region with lifecycle hooks (`venice push --local`'s steps, in this process), against
the real broker and region servers. The versions are written with the protocol writer: these tests are about the
rollout, not the Spark job.

The hooks are configured in a properties file of their own over the same platform (same data dir and ports),
as an operator would configure them; the store-level configs tell the test hook what to answer where."""

from __future__ import annotations

import dataclasses
import getpass
import json
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.support.clock import ManualClock
from tests.support.jobs import RecordsJob
from tests.support.platform import PlatformEnv
from tests.support.reads import wait_for
from tests.support.topics import read_partition
from tests.support.webhook import Webhook
from venice_core.client import ReadClient
from venice_core.config import HookSettings
from venice_core.controller import stores, versions
from venice_core.errors import NoCurrentVersion, RolloutStopped
from venice_core.hooks import HookContext, builtin
from venice_core.hooks.api import HOOK_FUNCTIONS
from venice_core.hooks.events import LifecycleEvents
from venice_core.hooks.executor import HookExecutor
from venice_core.hooks.records import invocations, metrics_text
from venice_core.pubsub import admin

HOOKS = "tests.hooks_fixtures.sample_hooks"
EVENTS = "venice_core.hooks.events.LifecycleEvents"


def _hooked(platform_env: PlatformEnv, tmp_path: Path, hooks: str, **settings: str) -> PlatformEnv:
    lines = {
        "venice.store.lifecycle.hooks": hooks,
        "venice.store.lifecycle.hooks.wait.interval.seconds": "1",
        **settings,
    }
    return platform_env.with_settings(tmp_path / "hooked.properties", **lines)


def _records(count: int, seed: int) -> dict[str, dict]:
    return {f"user-{i:05d}": {"name": f"n{i + seed}", "age": (i + seed) % 90, "score": i / 2} for i in range(count)}


def _version_status(env: PlatformEnv, store: str, number: int) -> str:
    version = stores.describe_store(env.meta, store).version(number)
    assert version is not None
    return version.status


def test_abort_at_the_second_regions_pre_swap(platform_env: PlatformEnv, tmp_path: Path) -> None:
    env = _hooked(platform_env, tmp_path, f"{HOOKS}.AnswerFromConfig")
    store = env.create_user_store("roll", 1)
    env.push(store, RecordsJob(_records(300, seed=0)))
    stores.update_store(env.meta, env.config, store, hook_configs={"answer.pre_store_version_swap.dc-1": "ABORT"})
    second = _records(300, seed=1)
    with pytest.raises(RolloutStopped) as stopped:
        env.push(store, RecordsJob(second))
    assert str(stopped.value) == (
        "aborted by a lifecycle hook at pre_store_version_swap in dc-1; the new version serves in dc-0"
    )
    assert stopped.value.exit_code == 3
    assert env.serving(store) == {"dc-0": 2, "dc-1": 1, "dc-2": 1}
    assert _version_status(env, store, 2) == "PARTIALLY_ONLINE"
    client = ReadClient("127.0.0.1", env.config.server_port("dc-0"))
    assert client.get(store, "user-00007") == second["user-00007"]
    # The aborted push is over: the next one may start.
    stores.update_store(env.meta, env.config, store, remove_hook_configs=["answer.pre_store_version_swap.dc-1"])
    env.push(store, RecordsJob(second))
    assert set(env.serving(store).values()) == {3}


def test_wait_twice_then_proceed_waits_the_interval(platform_env: PlatformEnv, tmp_path: Path) -> None:
    env = _hooked(
        platform_env,
        tmp_path,
        f"{HOOKS}.WaitTwiceBeforeEachSwap",
        **{
            "venice.store.lifecycle.hooks.wait.interval.seconds": "2",
            "venice.store.lifecycle.hooks.configs.state.dir": str(tmp_path / "state"),
        },
    )
    store = env.create_user_store("wait", 1)
    said: list[str] = []
    started = time.monotonic()
    env.push(store, RecordsJob(_records(100, seed=0)), progress=said.append)
    assert sum("hooks answered WAIT at pre_store_version_swap" in line for line in said) == 6  # twice per region
    assert time.monotonic() - started >= 3 * 2 * 2  # two intervals of 2 s per region
    assert set(env.serving(store).values()) == {1}
    assert (
        f'venice_hook_outcomes_total{{function="pre_store_version_swap",hook_class="{HOOKS}.'
        f'WaitTwiceBeforeEachSwap",outcome="WAIT"}}'
    ) in metrics_text(env.meta)


def test_a_swap_window_asked_on_friday_evening_swaps_on_monday_morning(
    platform_env: PlatformEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """VIP-4's WAIT is "re-run this step later", for as long as it is answered: a weekday swap window first asked on
    a Friday at 18:00 holds the first region's swap over the weekend (63 hours, past any day-long limit) and swaps
    it on Monday at 09:00, then the others at once. The clock is moved by hand, one wait interval per ask."""
    env = _hooked(
        platform_env,
        tmp_path,
        "venice_core.hooks.builtin.SwapWindow",
        **{"venice.store.lifecycle.hooks.wait.interval.seconds": "600"},
    )
    store = env.create_user_store("window", 1)
    stores.update_store(
        env.meta, env.config, store, hook_configs={"swap.window.days": "mon-fri", "swap.window.hours": "9-17"}
    )
    clock = ManualClock(datetime(2026, 11, 27, 18, 0, tzinfo=UTC).timestamp())  # a Friday
    monkeypatch.setattr(builtin, "time", clock)
    swapped: dict[str, datetime] = {}

    def sleep(seconds: float) -> None:
        clock.advance(seconds)
        time.sleep(0.002)  # the region servers' ingestion runs on the real clock

    def progress(line: str) -> None:
        if line.startswith("swapped "):
            swapped[line.split()[1]] = datetime.fromtimestamp(clock.now, UTC)

    env.push(store, RecordsJob(_records(50, seed=0)), progress=progress, sleep=sleep)
    monday_nine = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
    assert set(swapped) == {"dc-0", "dc-1", "dc-2"}
    assert all(monday_nine <= at < monday_nine + timedelta(minutes=10) for at in swapped.values()), swapped
    assert set(env.serving(store).values()) == {1}


@pytest.mark.parametrize("rollback", [False, True], ids=["abort", "rollback"])
def test_an_operator_aborts_a_rollout_held_at_a_wait_from_another_process(
    platform_env: PlatformEnv, tmp_path: Path, rollback: bool
) -> None:
    """`venice rollout abort STORE [--rollback]` while a push in another process waits at dc-1's pre swap: the stop
    applies at once as a hook's ABORT (dc-0 keeps version 2) or ROLLBACK (dc-0 back to version 1) would, the push
    ends at its next check with the operator's reason, and the store takes the next push."""
    env = _hooked(platform_env, tmp_path, f"{HOOKS}.AnswerFromConfig")
    store = env.create_user_store("opstop", 1)
    env.push(store, RecordsJob(_records(40, seed=0)))
    stores.update_store(env.meta, env.config, store, hook_configs={"answer.pre_store_version_swap.dc-1": "WAIT"})
    ended: list[BaseException] = []

    def push() -> None:
        try:
            env.push(store, RecordsJob(_records(40, seed=1)))
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            ended.append(exc)

    pushing = threading.Thread(target=push)
    pushing.start()
    try:
        wait_for("dc-0 to swap to version 2", lambda: env.serving(store)["dc-0"] == 2, timeout=60)
        result = env.cli("rollout", "abort", store, *(["--rollback"] if rollback else []))
    finally:
        pushing.join(timeout=60)
    assert result.returncode == 0, result.stderr
    user = getpass.getuser()
    if rollback:
        assert result.stdout.splitlines()[-1] == (
            f"rolled back by an operator ({user}: `venice rollout abort --rollback`); every region serves the "
            "previous version; version 2 is ROLLED_BACK"
        )
        assert env.serving(store) == {"dc-0": 1, "dc-1": 1, "dc-2": 1}
    else:
        assert result.stdout.splitlines()[-1] == (
            f"aborted by an operator ({user}: `venice rollout abort`); the new version serves in dc-0; version 2 is "
            "PARTIALLY_ONLINE"
        )
        assert env.serving(store) == {"dc-0": 2, "dc-1": 1, "dc-2": 1}
    (stopped,) = ended
    assert isinstance(stopped, RolloutStopped) and "by an operator" in str(stopped), stopped
    stores.update_store(env.meta, env.config, store, remove_hook_configs=["answer.pre_store_version_swap.dc-1"])
    assert env.push(store, RecordsJob(_records(40, seed=2))) == 3  # the store was released
    assert env.cli("rollout", "abort", store).stderr == f"error: store '{store}' has no rollout in flight\n"


def test_rollback_of_a_first_version_leaves_no_region_serving_it(platform_env: PlatformEnv, tmp_path: Path) -> None:
    """ROLLBACK at the second region's post swap, on the store's first version: the regions that swapped have no
    previous version to go back to, so they serve none, and reads say so. The next push goes out normally; a
    ROLLBACK of the one after it returns the swapped regions to it."""
    env = _hooked(platform_env, tmp_path, f"{HOOKS}.AnswerFromConfig")
    store = env.create_user_store("first", 1)
    stores.update_store(env.meta, env.config, store, hook_configs={"answer.post_store_version_swap.dc-1": "ROLLBACK"})
    said: list[str] = []
    with pytest.raises(RolloutStopped) as stopped:
        env.push(store, RecordsJob(_records(100, seed=0)), progress=said.append)
    assert str(stopped.value) == (
        "rolled back by a lifecycle hook at post_store_version_swap in dc-1; every region serves the version it "
        "served before; dc-1, dc-0 serve no version (there was none before)"
    )
    assert "rolled dc-0 back to no version (none before)" in said
    assert env.serving(store) == {"dc-0": 0, "dc-1": 0, "dc-2": 0}
    assert _version_status(env, store, 1) == "ROLLED_BACK"
    for region in ("dc-0", "dc-1", "dc-2"):  # each region server stops serving it (it syncs every second)
        client = ReadClient("127.0.0.1", env.config.server_port(region))

        def serves_no_version(client: ReadClient = client, region: str = region) -> bool:
            try:
                client.get(store, "user-00007")
            except NoCurrentVersion as exc:
                assert str(exc) == f"store '{store}' has no current version in {region}"
                return True
            return False

        wait_for(f"{region} to stop serving the rolled-back version", serves_no_version, timeout=15, interval=0.2)
        client.close()
    stores.update_store(env.meta, env.config, store, remove_hook_configs=["answer.post_store_version_swap.dc-1"])
    second = _records(100, seed=1)
    assert env.push(store, RecordsJob(second)) == 2
    assert env.serving(store) == {"dc-0": 2, "dc-1": 2, "dc-2": 2}
    client = ReadClient("127.0.0.1", env.config.server_port("dc-1"))
    assert client.get(store, "user-00007") == second["user-00007"]
    client.close()
    # With a previous version, a ROLLBACK returns each swapped region to it.
    stores.update_store(env.meta, env.config, store, hook_configs={"answer.post_store_version_swap.dc-1": "ROLLBACK"})
    with pytest.raises(RolloutStopped, match="every region serves the previous version"):
        env.push(store, RecordsJob(_records(100, seed=2)))
    assert env.serving(store) == {"dc-0": 2, "dc-1": 2, "dc-2": 2}
    assert _version_status(env, store, 3) == "ROLLED_BACK"


def test_lifecycle_events_reach_a_topic_and_a_webhook(platform_env: PlatformEnv, tmp_path: Path) -> None:
    """The built-in event hook, configured cluster-wide beside another hook: every lifecycle function the rollout
    calls sends its event to a real Kafka topic and to a webhook, in the order of the steps (the regions a step asks
    at once send theirs in any order), each from the worker process its call ran in."""
    bootstrap = platform_env.config.region("dc-0").kafka_bootstrap
    topic = f"lifecycle-events-{uuid.uuid4().hex[:8]}"
    admin.create_topic(bootstrap, topic, 1)
    webhook = Webhook()
    prefix = "venice.store.lifecycle.hooks.configs.lifecycle.events"
    try:
        env = _hooked(
            platform_env,
            tmp_path,
            f"{HOOKS}.AnswerFromConfig,venice_core.hooks.events.LifecycleEvents",
            **{
                f"{prefix}.topic": topic,
                f"{prefix}.kafka.bootstrap.servers": bootstrap,
                f"{prefix}.webhook.url": webhook.url,
            },
        )
        store = env.create_user_store("events", 1)
        started = time.time()
        assert env.push(store, RecordsJob(_records(50, seed=0))) == 1
    finally:
        webhook.close()
    from_topic = [json.loads(value) for _key, value in read_partition(bootstrap, topic)]
    # What the hook was asked, in order, from the persisted invocations of this push.
    asked = [
        (r.function, r.region)
        for r in invocations(env.meta, versions.get_version(env.meta, store, 1).push_job_id)
        if r.hook_class.endswith(".LifecycleEvents")
    ]
    assert _rounds([(e["function"], e["region"]) for e in from_topic]) == _rounds(asked)
    assert _rounds([(e["function"], e["region"]) for e in webhook.events]) == _rounds(asked)
    schema_functions = {"pre_schema_registration", "post_schema_registration"}  # this push registers no schema
    assert {function for function, _ in asked} >= set(HOOK_FUNCTIONS) - schema_functions
    for region in ("dc-0", "dc-1", "dc-2"):
        assert ("pre_store_version_swap", region) in asked and ("post_store_version_swap", region) in asked
    for event in from_topic:
        assert event["store"] == store and event["cluster"] == env.config.cluster_name
        assert started <= event["time"] <= time.time()
    created = [e["version"] for e in from_topic if e["function"] not in _BEFORE_CREATION]
    assert set(created) == {1}
    assert all(e["version"] is None for e in from_topic if e["function"] in _BEFORE_CREATION)


def _rounds(asked: list[tuple[str, str | None]]) -> list[tuple[str, list[str | None]]]:
    """(function, regions) runs of the same function: a step's round asks its regions at once."""
    rounds: list[tuple[str, list[str | None]]] = []
    for function, region in asked:
        if not rounds or rounds[-1][0] != function:
            rounds.append((function, []))
        rounds[-1][1].append(region)
    return [(function, sorted(regions, key=str)) for function, regions in rounds]


def test_a_worker_makes_its_own_kafka_producer(platform_env: PlatformEnv) -> None:
    """librdkafka is not fork-safe: the event hook that has produced in this process (its producer's threads live
    here only) still delivers from the worker process each call runs in, with a producer of the worker's own."""
    bootstrap = platform_env.config.region("dc-0").kafka_bootstrap
    topic = f"lifecycle-events-{uuid.uuid4().hex[:8]}"
    admin.create_topic(bootstrap, topic, 1)
    configs = {"lifecycle.events.topic": topic, "lifecycle.events.kafka.bootstrap.servers": bootstrap}
    hook = LifecycleEvents(configs)
    ctx = HookContext(cluster="c", store="users", version=1, region="dc-0")
    assert hook.post_store_version_swap(ctx) == "PROCEED"  # delivered by a producer of this process
    settings = HookSettings((EVENTS,), 1, 30, 60, "PROCEED", configs)
    (decision,) = HookExecutor(settings, [(EVENTS, hook)]).invoke_all(
        "post_store_version_swap", [dataclasses.replace(ctx, region="dc-1")]
    )
    (invocation,) = decision.invocations
    assert (invocation.outcome, invocation.reason, invocation.error) == ("PROCEED", "", None)  # delivered
    assert [json.loads(value)["region"] for _key, value in read_partition(bootstrap, topic)] == ["dc-0", "dc-1"]


_BEFORE_CREATION = {  # pre_store_version_creation already names the version about to be created
    "validate_hook_config",
    "pre_start_of_push_job",
    "post_start_of_push_job",
}


def test_a_region_left_out_at_creation_and_an_abort_at_the_end(platform_env: PlatformEnv, tmp_path: Path) -> None:
    """pre_store_version_creation's ABORT in dc-1 leaves dc-1 out of the version (no topic, no swap) while the
    others roll out; an ABORT at pre_end_of_push_job, with every region serving the version, ends the push there:
    the version stays ONLINE and says why, and the next push may start."""
    env = _hooked(platform_env, tmp_path, f"{HOOKS}.AnswerFromConfig")
    store = env.create_user_store("left", 1)
    stores.update_store(env.meta, env.config, store, hook_configs={"answer.pre_store_version_creation.dc-1": "ABORT"})
    assert env.push(store, RecordsJob(_records(50, seed=0))) == 1
    assert env.serving(store) == {"dc-0": 1, "dc-1": 0, "dc-2": 1}
    assert _version_status(env, store, 1) == "ONLINE"
    stores.update_store(
        env.meta,
        env.config,
        store,
        hook_configs={"answer.pre_end_of_push_job": "ABORT"},
        remove_hook_configs=["answer.pre_store_version_creation.dc-1"],
    )
    with pytest.raises(
        RolloutStopped, match="aborted by a lifecycle hook at pre_end_of_push_job; the new version serves"
    ):
        env.push(store, RecordsJob(_records(50, seed=1)))
    assert env.serving(store) == {"dc-0": 2, "dc-1": 2, "dc-2": 2}
    version = stores.describe_store(env.meta, store).versions[-1]
    assert (version.status, version.reason) == ("ONLINE", "aborted by a hook at pre_end_of_push_job")
    stores.update_store(env.meta, env.config, store, remove_hook_configs=["answer.pre_end_of_push_job"])
    assert env.push(store, RecordsJob(_records(50, seed=2))) == 3


def test_version_creation_waits_then_a_rollback_there_stops_the_push_in_every_region(
    platform_env: PlatformEnv, tmp_path: Path
) -> None:
    """pre_store_version_creation answering WAIT in one region is asked again (every region waits for it, nothing is
    created meanwhile), then the version goes to every region. A ROLLBACK there from one region is VIP-4's "back to
    the version the store had before the push, in all regions": the push stops, no version is created, and every
    region keeps serving the one before."""
    env = _hooked(
        platform_env,
        tmp_path,
        f"{HOOKS}.AnswerFromConfig",
        **{"venice.store.lifecycle.hooks.configs.state.dir": str(tmp_path / "state")},
    )
    store = env.create_user_store("crb", 1)
    stores.update_store(env.meta, env.config, store, hook_configs={"answer.pre_store_version_creation.dc-2": "WAIT*2"})
    assert env.push(store, RecordsJob(_records(50, seed=0))) == 1
    asked = invocations(env.meta, stores.describe_store(env.meta, store).versions[0].push_job_id)
    creation = [(r.region, r.outcome) for r in asked if r.function == "pre_store_version_creation"]
    assert creation.count(("dc-2", "WAIT")) == 2 and creation[-1] == ("dc-2", "PROCEED"), creation
    assert creation.count(("dc-0", "PROCEED")) == creation.count(("dc-1", "PROCEED")) == 1, creation  # not re-asked
    assert env.serving(store) == {"dc-0": 1, "dc-1": 1, "dc-2": 1}

    stores.update_store(
        env.meta,
        env.config,
        store,
        hook_configs={"answer.pre_store_version_creation.dc-1": "ROLLBACK"},
        remove_hook_configs=["answer.pre_store_version_creation.dc-2"],
    )
    with pytest.raises(RolloutStopped) as stopped:
        env.push(store, RecordsJob(_records(50, seed=1)))
    assert str(stopped.value) == (
        "rolled back by a lifecycle hook at pre_store_version_creation (dc-1); no version was created; every region "
        "keeps the version it served"
    )
    info = stores.describe_store(env.meta, store)
    assert [v.number for v in info.versions] == [1] and info.largest_used_version == 1
    assert env.serving(store) == {"dc-0": 1, "dc-1": 1, "dc-2": 1}
