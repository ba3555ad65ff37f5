from __future__ import annotations

import inspect
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest

from tests.support.clock import ManualClock
from tests.support.hooks import SAMPLE_HOOKS, hook_context, sample_hook_executor, sample_hook_settings
from venice_core.config import HookSettings
from venice_core.errors import ConfigError
from venice_core.hooks import StoreLifecycleHooks
from venice_core.hooks import executor as hooks_executor
from venice_core.hooks.api import HOOK_FUNCTIONS
from venice_core.hooks.executor import combine
from venice_core.hooks.loader import load_hooks


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


def test_a_timed_out_hook_does_not_hold_its_process_open() -> None:
    """An Airflow sensor process must end right after its poke, even while an abandoned hook is still running."""
    program = (
        "from tests.support.hooks import hook_context, sample_hook_executor\n"
        "run, _ = sample_hook_executor('Slow', timeout=0.2, **{'slow.seconds': '120'})\n"
        "print(run.invoke('pre_store_version_swap', hook_context()).outcome)\n"
        "run.close()\n"
    )
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "PROCEED"
    assert time.monotonic() - started < 30  # not the hook's 120 s


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


def test_each_hook_sees_what_the_earlier_hooks_answered() -> None:
    run, recorded = sample_hook_executor("AnswerFromConfig", "Raising", "EchoEarlier", policy="ABORT")
    decision = run.invoke("pre_store_version_swap", hook_context(**{"answer.pre_store_version_swap": "WAIT"}))
    assert [inv.outcome for _, inv in recorded] == ["WAIT", "ABORT", "PROCEED"]
    assert decision.invocations[2].reason == "AnswerFromConfig=WAIT,Raising=ABORT"
    assert recorded[0][0].earlier_outcomes == ()  # the recorder gets the invocation's own context


def test_queue_wait_is_measured_when_threads_are_busy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The only thread is busy until the hook's call has been queued behind it and 5 s have passed on the
    executor's clock: the invocation waited those 5 s in the queue and ran in none."""
    clock = ManualClock()
    monkeypatch.setattr(hooks_executor, "time", clock)
    run, _ = sample_hook_executor("AnswerFromConfig", threads=1)
    release, queued = threading.Event(), threading.Event()
    run._pool.submit(lambda: release.wait(30))  # occupies the only thread
    submit = run._pool.submit

    def submit_and_say(call: Callable[[], Any]) -> Future:
        future = submit(call)
        queued.set()
        return future

    monkeypatch.setattr(run._pool, "submit", submit_and_say)
    with ThreadPoolExecutor(1) as asker:
        asked = asker.submit(run.invoke, "pre_store_version_swap", hook_context())
        assert queued.wait(10), "the hook's call was never queued"
        clock.advance(5)
        release.set()
        (invocation,) = asked.result(timeout=10).invocations
    assert (invocation.queue_wait_seconds, invocation.duration_seconds) == (5, 0)
    run.close()


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
