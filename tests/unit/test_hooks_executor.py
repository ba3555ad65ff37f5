"""The hooks' executor: outcomes combined, the failure policy, and the pool (every hook of a round at once, at most
`threads` at a time, each in a worker process killed at its timeout)."""

from __future__ import annotations

import dataclasses
import inspect
import itertools
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.clock import ManualClock
from tests.support.hooks import SAMPLE_HOOKS, Recorded, hook_context, sample_hook_executor, sample_hook_settings
from tests.support.leftovers import running
from tests.support.reads import wait_for
from venice_core.config import HookSettings
from venice_core.errors import ConfigError
from venice_core.hooks import StoreLifecycleHooks, builtin
from venice_core.hooks.api import HOOK_FUNCTIONS
from venice_core.hooks.executor import HookExecutor, combine
from venice_core.hooks.loader import load_hooks
from venice_core.model.status import ExecutionStatus, JobStatus, RegionJobStatus, VersionStatus


def test_every_vip4_function_has_a_harmless_default() -> None:
    assert len(HOOK_FUNCTIONS) == 14
    hook = StoreLifecycleHooks({})
    for name, kind in HOOK_FUNCTIONS.items():
        result = getattr(hook, name)(hook_context())
        assert result == (None if kind is None else "PROCEED"), name
        assert list(inspect.signature(getattr(hook, name)).parameters) == ["ctx"]


def test_combination_precedence() -> None:
    assert combine(["PROCEED", "WAIT", "ABORT", "ROLLBACK"]) == "ROLLBACK"
    assert combine(["WAIT", "ABORT", "PROCEED"]) == "ABORT"
    assert combine(["PROCEED", "WAIT"]) == "WAIT"
    assert combine(["PROCEED", "PROCEED"]) == "PROCEED"


def test_hooks_combine_in_configured_order_and_are_recorded() -> None:
    run, recorded = sample_hook_executor("AnswerFromConfig", "AnswerFromConfig")
    decision = run.invoke("pre_store_version_swap", hook_context(**{"answer.pre_store_version_swap": "WAIT"}))
    assert decision.outcome == "WAIT"
    assert [inv.outcome for _, inv in recorded] == ["WAIT", "WAIT"]
    assert all(
        inv.region == "dc-1" and inv.duration_seconds >= 0 and inv.queue_wait_seconds >= 0 for _, inv in recorded
    )
    decision = run.invoke("post_store_version_creation", hook_context())
    assert decision.outcome is None  # informational


@pytest.mark.parametrize(
    ("policy", "version_outcome", "event_outcome"),
    [("PROCEED", "PROCEED", "PROCEED"), ("WAIT", "WAIT", "ABORT"), ("ABORT", "ABORT", "ABORT")],
)
def test_a_raising_hook_follows_the_failure_policy(policy: str, version_outcome: str, event_outcome: str) -> None:
    run, recorded = sample_hook_executor("Raising", policy=policy)
    decision = run.invoke("pre_store_version_swap", hook_context())
    assert decision.outcome == version_outcome
    assert "RuntimeError: health service unreachable" in recorded[-1][1].error
    assert run.invoke("pre_start_of_push_job", hook_context()).outcome == event_outcome  # cannot WAIT: fails closed


@pytest.mark.parametrize("policy", ["PROCEED", "WAIT", "ABORT"])
def test_a_slow_hook_times_out_under_each_policy(policy: str) -> None:
    run, recorded = sample_hook_executor("Slow", policy=policy, timeout=0.2, **{"slow.seconds": "1"})
    decision = run.invoke("pre_store_version_swap", hook_context())
    assert decision.outcome == policy
    invocation = recorded[-1][1]
    assert invocation.timed_out and invocation.error == "timed out after 0.2s"
    assert 0.15 < invocation.queue_wait_seconds + invocation.duration_seconds < 0.9


@pytest.mark.parametrize("stuck_in", ["loop", "sleep", "event", "socket"])
def test_a_stuck_hook_is_stopped_at_its_timeout_and_the_next_hook_runs_on_time(stuck_in: str, tmp_path: Path) -> None:
    """One slot: a hook stuck in a Python loop or a blocking call is killed at its timeout (its process is gone),
    and the hook queued behind it then runs: it waited the stuck one's timeout for the slot, its own time is its
    own, and it did not time out (its clock starts when it starts)."""
    run, recorded = sample_hook_executor(
        "Stuck", "AnswerFromConfig", threads=1, timeout=1, **{"stuck.in": stuck_in, "state.dir": str(tmp_path)}
    )
    decision = run.invoke("pre_store_version_swap", hook_context(**{"answer.pre_store_version_swap": "WAIT"}))
    stuck, after = (invocation for _, invocation in recorded)
    assert (stuck.timed_out, stuck.error, stuck.outcome) == (True, "timed out after 1s", "PROCEED")
    assert 1 <= stuck.duration_seconds < 5
    with pytest.raises(ProcessLookupError):  # killed and reaped: the stuck hook runs no more
        os.kill(int((tmp_path / "stuck.pid").read_text()), 0)
    assert (after.outcome, after.error, after.timed_out) == ("WAIT", None, False)
    assert 1 <= after.queue_wait_seconds < 5 and after.duration_seconds < 1
    assert decision.outcome == "WAIT"


def _spans(recorded: Recorded) -> list[tuple[float, float]]:
    """Each invocation's (start, end), in seconds from when the round was submitted (one clock), by start."""
    return sorted((inv.queue_wait_seconds, inv.queue_wait_seconds + inv.duration_seconds) for _, inv in recorded)


def test_hooks_of_a_round_run_at_once_up_to_the_threads() -> None:
    """Four slow hooks of one invocation: with four threads they all run at once (each started before any ended);
    with one thread they queue (each starts once the one before ended), and the queue-wait metric shows it. Told
    by the order of starts and ends, not by how long the round took: a loaded machine stretches every span."""
    run, recorded = sample_hook_executor("Slow", "Slow", "Slow", "Slow", threads=4, **{"slow.seconds": "1.5"})
    assert run.invoke("pre_store_version_swap", hook_context()).outcome == "PROCEED"
    spans = _spans(recorded)
    assert len(spans) == 4 and all(end - start >= 1.5 for start, end in spans)
    assert max(start for start, _ in spans) < min(end for _, end in spans)

    run, recorded = sample_hook_executor("Slow", "Slow", "Slow", "Slow", threads=1, **{"slow.seconds": "0.5"})
    run.invoke("pre_store_version_swap", hook_context())
    spans = _spans(recorded)
    assert len(spans) == 4 and all(end - start >= 0.5 for start, end in spans)
    assert all(later_start >= end for (_, end), (later_start, _) in itertools.pairwise(spans))
    assert spans[-1][0] >= 1.5  # the last one waited out three hooks' time for the slot


def test_a_round_asks_every_context_at_once_and_decides_each_alone() -> None:
    """`invoke_all`: one round for every region of a step; each region's hooks combine on their own, and every
    invocation is recorded in the order asked, with its region."""
    run, recorded = sample_hook_executor("Slow", "AnswerFromConfig", threads=4, **{"slow.seconds": "1"})
    configs = {"answer.pre_store_version_swap.dc-1": "ROLLBACK", "answer.pre_store_version_swap.dc-2": "WAIT"}
    contexts = [dataclasses.replace(hook_context(**configs), region=r) for r in ("dc-0", "dc-1", "dc-2")]
    decisions = run.invoke_all("pre_store_version_swap", contexts)
    slow = _spans([(ctx, inv) for ctx, inv in recorded if inv.hook_class.endswith("Slow")])
    assert max(start for start, _ in slow) < min(end for _, end in slow)  # six calls, four threads: the slow at once
    assert [d.outcome for d in decisions] == ["PROCEED", "ROLLBACK", "WAIT"]
    asked = [(inv.region, inv.hook_class.rsplit(".", 1)[-1]) for _, inv in recorded]
    assert asked == [(r, h) for r in ("dc-0", "dc-1", "dc-2") for h in ("Slow", "AnswerFromConfig")]
    assert [ctx.region for ctx, _ in recorded] == [inv.region for _, inv in recorded]


@pytest.mark.parametrize(
    ("how", "error"),
    [
        ("sigkill", "its worker process ended without answering (killed by SIGKILL)"),
        ("os_exit", "its worker process ended without answering (exit status 3)"),
        ("sys_exit", "SystemExit: 3"),
    ],
)
def test_a_hook_that_ends_its_process_is_a_failure_not_a_hang(how: str, error: str) -> None:
    run, recorded = sample_hook_executor("EndsItsProcess", policy="ABORT", timeout=30, **{"ends.how": how})
    started = time.monotonic()
    assert run.invoke("pre_store_version_swap", hook_context()).outcome == "ABORT"
    assert time.monotonic() - started < 5  # not the 30 s timeout
    (invocation,) = (inv for _, inv in recorded)
    assert (invocation.error, invocation.timed_out) == (error, False)


def test_a_stuck_hook_leaves_nothing_running_when_its_caller_ends(tmp_path: Path) -> None:
    """An Airflow sensor process must end right after its poke, leaving no process or thread behind (one that
    outlives its poke races the scheduler's next poke: apache/airflow#71172)."""
    configs = {"stuck.in": "sleep", "state.dir": str(tmp_path)}
    program = (
        "import threading\n"
        "from tests.support.hooks import hook_context, sample_hook_executor\n"
        f"run, _ = sample_hook_executor('Stuck', timeout=0.5, **{configs!r})\n"
        "print(run.invoke('pre_store_version_swap', hook_context()).outcome, threading.active_count())\n"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.split() == ["PROCEED", "1"]  # only the main thread
    with pytest.raises(ProcessLookupError):
        os.kill(int((tmp_path / "stuck.pid").read_text()), 0)


def test_a_worker_dies_with_its_caller(tmp_path: Path) -> None:
    """A caller SIGKILLed mid-call (an Airflow task killed from the UI or past its timeout) leaves no hook worker
    running: the worker gets the parent-death signal."""
    configs = {"stuck.in": "sleep", "state.dir": str(tmp_path)}
    program = (
        "from tests.support.hooks import hook_context, sample_hook_executor\n"
        f"run, _ = sample_hook_executor('Stuck', timeout=600, **{configs!r})\n"
        "run.invoke('pre_store_version_swap', hook_context())\n"
    )
    caller = subprocess.Popen([sys.executable, "-c", program])
    try:
        pid_file = tmp_path / "stuck.pid"
        stuck = int(wait_for("the stuck hook to start", lambda: pid_file.exists() and pid_file.read_text(), 60, 0.05))
        caller.kill()
        caller.wait(10)
        wait_for("the worker to die with its caller", lambda: not running(stuck), 10, 0.05)
    finally:
        caller.kill()
        caller.wait(10)


def test_a_hook_in_a_worker_sees_the_hand_moved_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker is forked when its call starts: a hook reads the clock the test moved, as it is then."""
    clock = ManualClock()
    monkeypatch.setattr(builtin, "time", clock)
    settings = HookSettings(
        ("venice_core.hooks.builtin.MinDelayBetweenRegions",),
        1,
        5,
        60,
        "ABORT",
        {"min.delay.between.regions.seconds": "60"},
    )
    run = HookExecutor(settings, load_hooks(settings))
    swapped = RegionJobStatus(ExecutionStatus.COMPLETED, clock.now, serving=True, current_since=clock.now)
    waiting = RegionJobStatus(ExecutionStatus.COMPLETED, clock.now)
    status = JobStatus("users", 3, VersionStatus.STARTED, ExecutionStatus.COMPLETED, {"dc-0": swapped, "dc-1": waiting})
    ctx = dataclasses.replace(hook_context(), job_status=status)
    assert run.invoke("pre_store_version_swap", ctx).outcome == "WAIT"
    clock.advance(61)
    assert run.invoke("pre_store_version_swap", ctx).outcome == "PROCEED"


def test_a_bad_return_value_is_a_failure() -> None:
    run, recorded = sample_hook_executor("BadReturn", "AnswerFromConfig", policy="ABORT")
    assert run.invoke("pre_store_version_swap", hook_context()).outcome == "ABORT"
    assert "returned 'MAYBE', not a StoreVersionLifecycleEventOutcome" in recorded[0][1].error


@pytest.mark.parametrize(("policy", "outcome"), [("PROCEED", "PROCEED"), ("WAIT", "ABORT"), ("ABORT", "ABORT")])
@pytest.mark.parametrize("returned", ["WAIT", "ROLLBACK"])
def test_an_outcome_the_function_may_not_return_is_a_hook_error(policy: str, outcome: str, returned: str) -> None:
    """pre_start_of_push_job may answer PROCEED or ABORT only: WAIT or ROLLBACK is not its answer but a failure,
    decided by the failure policy (fail closed under WAIT) and kept apart as the invocation's invalid outcome."""
    run, recorded = sample_hook_executor("AnswerFromConfig", policy=policy)
    decision = run.invoke("pre_start_of_push_job", hook_context(**{"answer.pre_start_of_push_job": returned}))
    assert decision.outcome == outcome
    invocation = recorded[-1][1]
    assert invocation.invalid_outcome == returned and invocation.outcome == outcome
    expected = f"returned {returned}, which pre_start_of_push_job may not return (PROCEED or ABORT only)"
    assert invocation.error == expected
    # The same answer from a function that may return it is its answer.
    assert (
        run.invoke("pre_store_version_swap", hook_context(**{"answer.pre_store_version_swap": returned})).outcome
        == returned
    )
    assert recorded[-1][1].invalid_outcome is None and recorded[-1][1].error is None


def test_validate_hook_config_gives_the_hooks_reason() -> None:
    run, _ = sample_hook_executor("StrictConfig")
    assert run.invoke("validate_hook_config", hook_context(**{"min.delay.seconds": "60"})).outcome == "PROCEED"
    decision = run.invoke("validate_hook_config", hook_context(**{"min.delay.seconds": "soon"}))
    assert decision.outcome == "ABORT" and "must be an integer, got 'soon'" in decision.reason


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("NoDots", "not a module.Class path"),
        ("no_such_module.Hook", "cannot load hook class"),
        (f"{SAMPLE_HOOKS}.Missing", "cannot load hook class"),
        (f"{SAMPLE_HOOKS}.NotAHook", "not a subclass of StoreLifecycleHooks"),
    ],
)
def test_only_valid_configured_classes_load(path: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_hooks(HookSettings((path,), 1, 1, 60, "PROCEED", {}))


def test_hook_configs_are_clipped_and_passed_to_constructors() -> None:
    hooks = load_hooks(sample_hook_settings("Slow", **{"slow.seconds": "7"}))
    assert hooks[0][1].configs == {"slow.seconds": "7"}
