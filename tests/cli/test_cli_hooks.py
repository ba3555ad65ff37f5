"""Store-level hook configs are refused with the hook's reason; hook invocations are persisted and counted by
`venice metrics`. The hook class is loaded by its module path (the CLI runs in this process, which imports `tests`)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.platform import metadata_env
from venice_core.hooks import HookContext
from venice_core.hooks.executor import HookExecutor
from venice_core.hooks.loader import load_hooks
from venice_core.hooks.records import recorder

REPO = Path(__file__).parents[2]
SCHEMAS = REPO / "examples" / "schemas"
HOOKS = "tests.hooks_fixtures.sample_hooks"


def test_invalid_store_level_hook_config_is_refused_with_the_reason(tmp_path: Path) -> None:
    env, meta = metadata_env(tmp_path, f"{HOOKS}.StrictConfig")
    env.cli("store", "update", "users", "--hook-config", "min.delay.seconds=60", check=True)
    result = env.cli("store", "update", "users", "--hook-config", "min.delay.seconds=soon")
    assert result.returncode != 0
    assert result.stderr.strip() == (
        "error: store-level hook config of 'users' refused: StrictConfig: min.delay.seconds must be an integer, "
        "got 'soon'"
    )
    result = env.cli("store", "update", "users", "--hook-config", "rm -rf=/")
    assert "unknown key 'rm -rf'" in result.stderr
    info = json.loads(env.cli("store", "show", "users", "--json", check=True).stdout)
    assert info["hook_configs"] == {"min.delay.seconds": "60"}
    meta.dispose()


def test_store_update_validation_is_counted_per_hook_class(tmp_path: Path) -> None:
    """`venice store update --hook-config` asks every hook's validate_hook_config: each call is persisted and counted
    by `venice metrics` per hook class, with its outcome, failures and timeouts, like every other function's."""
    env, meta = metadata_env(
        tmp_path,
        f"{HOOKS}.StrictConfig,{HOOKS}.Raising,{HOOKS}.Stuck",
        **{
            "venice.store.lifecycle.hooks.timeout.seconds": "0.5",
            "venice.store.lifecycle.hooks.configs.stuck.in": "loop",
            "venice.store.lifecycle.hooks.configs.state.dir": str(tmp_path),
        },
    )
    env.cli("store", "update", "users", "--hook-config", "min.delay.seconds=60", check=True)
    refused = env.cli("store", "update", "users", "--hook-config", "min.delay.seconds=soon")
    assert refused.returncode == 1 and "StrictConfig: min.delay.seconds must be an integer" in refused.stderr

    text = env.cli("metrics", check=True).stdout
    strict, raising, stuck = (
        f'function="validate_hook_config",hook_class="{HOOKS}.{name}"' for name in ("StrictConfig", "Raising", "Stuck")
    )
    assert f"venice_hook_invocations_total{{{strict}}} 2" in text
    assert f'venice_hook_outcomes_total{{{strict},outcome="PROCEED"}} 1' in text
    assert f'venice_hook_outcomes_total{{{strict},outcome="ABORT"}} 1' in text
    assert f"venice_hook_failures_total{{{raising}}} 2" in text
    assert f'venice_hook_outcomes_total{{{raising},outcome="PROCEED"}} 2' in text  # the default failure policy
    assert f"venice_hook_timeouts_total{{{stuck}}} 2" in text  # stopped, under the default failure policy
    assert f"venice_hook_queue_wait_seconds_count{{{stuck}}} 2" in text
    meta.dispose()


def test_unloadable_hook_class_is_one_clear_error(tmp_path: Path) -> None:
    env, meta = metadata_env(tmp_path, "no_such_module.Hooks")
    result = env.cli("store", "update", "users", "--hook-config", "a=b")
    assert result.returncode != 0
    assert result.stderr.strip().startswith(
        "error: venice.store.lifecycle.hooks: cannot load hook class 'no_such_module.Hooks'"
    )
    meta.dispose()


def test_invocations_are_persisted_and_counted_by_venice_metrics(tmp_path: Path) -> None:
    env, meta = metadata_env(
        tmp_path,
        f"{HOOKS}.AnswerFromConfig,{HOOKS}.Raising",
        **{"venice.store.lifecycle.hooks.failure.policy": "ABORT"},
    )
    config = env.config
    run = HookExecutor(config.hooks, load_hooks(config.hooks), recorder(meta, "job-1"))
    ctx = HookContext(
        cluster="c",
        store="users",
        version=1,
        region="dc-0",
        store_hook_configs={"answer.pre_store_version_swap": "WAIT"},
    )
    assert run.invoke("pre_store_version_swap", ctx).outcome == "ABORT"  # Raising -> ABORT beats WAIT
    assert run.invoke("pre_store_version_swap", ctx).outcome == "ABORT"

    text = env.cli("metrics", check=True).stdout
    answer = f'function="pre_store_version_swap",hook_class="{HOOKS}.AnswerFromConfig"'
    raising = f'function="pre_store_version_swap",hook_class="{HOOKS}.Raising"'
    assert f"venice_hook_invocations_total{{{answer}}} 2" in text
    assert f'venice_hook_outcomes_total{{{answer},outcome="WAIT"}} 2' in text
    assert f'venice_hook_outcomes_total{{{raising},outcome="ABORT"}} 2' in text
    assert f"venice_hook_failures_total{{{raising}}} 2" in text
    assert f"venice_hook_queue_wait_seconds_count{{{raising}}} 2" in text
    meta.dispose()


def test_an_invalid_outcome_is_recorded_and_counted_apart(tmp_path: Path) -> None:
    """WAIT from pre_start_of_push_job (PROCEED/ABORT only) is a failure under the policy: the invocation records
    what the hook returned, and `venice metrics` counts it as an invalid outcome, not as a failure or a WAIT."""
    from sqlalchemy import select

    from venice_core.meta.models import HookInvocationRecord

    env, meta = metadata_env(tmp_path, f"{HOOKS}.AnswerFromConfig")
    run = HookExecutor(env.config.hooks, load_hooks(env.config.hooks), recorder(meta, "job-1"))
    ctx = HookContext(cluster="c", store="users", store_hook_configs={"answer.pre_start_of_push_job": "WAIT"})
    assert run.invoke("pre_start_of_push_job", ctx).outcome == "PROCEED"  # the default failure policy
    with meta.session() as session:
        (row,) = session.scalars(select(HookInvocationRecord))
        assert (row.outcome, row.invalid_outcome) == ("PROCEED", "WAIT")

    text = env.cli("metrics", check=True).stdout
    labels = f'function="pre_start_of_push_job",hook_class="{HOOKS}.AnswerFromConfig"'
    assert f"venice_hook_invalid_outcomes_total{{{labels}}} 1" in text
    assert f"venice_hook_failures_total{{{labels}}}" not in text
    assert f'venice_hook_outcomes_total{{{labels},outcome="WAIT"}}' not in text
    meta.dispose()


def test_rollout_approve_records_a_decision_the_manual_approval_hook_reads(tmp_path: Path) -> None:
    """Without Airflow, `venice rollout approve` records the decision on the version in flight; the hook's
    answer follows it. Bad input is one clear error."""
    from venice_core.controller.hook_decisions import HookDecisions
    from venice_core.meta.models import Version

    env, meta = metadata_env(tmp_path, "venice_core.hooks.builtin.ManualApproval")
    refused = env.cli("rollout", "approve", "users", "--region", "dc-1")
    assert refused.returncode == 1 and refused.stderr == "error: store 'users' has no push in flight to approve\n"
    with meta.session() as session:  # a push in flight (its topics are not needed here)
        session.add(Version(store_name="users", number=1, status="STARTED", partition_count=1, compression="NO_OP"))
    unknown = env.cli("rollout", "approve", "users", "--region", "dc-9")
    assert unknown.returncode == 1 and "has no region 'dc-9' (regions: dc-0, dc-1, dc-2)" in unknown.stderr

    rollout = HookDecisions(env.config, meta, "users", "push-1", {"manual.approval.regions": "dc-1"}, version=1)
    assert rollout.ask_once("pre_store_version_swap", "dc-0") == "PROCEED"  # not a region that needs it
    assert rollout.ask_once("pre_store_version_swap", "dc-1") == "WAIT"
    result = env.cli("rollout", "approve", "users", "--region", "dc-1", "--reject", check=True)
    assert result.stdout == "rejected the swap of 'users' version 1 in dc-1\n"
    assert rollout.ask_once("pre_store_version_swap", "dc-1") == "ABORT"
    assert rollout.last_reason == "ManualApproval: rejected by venice CLI"
    env.cli("rollout", "approve", "users", "--region", "dc-1", check=True)  # a change of mind
    assert rollout.ask_once("pre_store_version_swap", "dc-1") == "PROCEED"
    meta.dispose()
