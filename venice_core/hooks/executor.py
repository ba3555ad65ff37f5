"""Run a lifecycle function on every configured hook and combine their answers.

- Hooks run on the configured thread pool (`venice.store.lifecycle.hooks.threads`), one at a time per invocation,
  in configured order (Venice's contract), each within `venice.store.lifecycle.hooks.timeout.seconds` (queue time
  included). Python cannot interrupt a thread: a hook that times out is abandoned, not stopped.
- Combined outcome: any ROLLBACK wins, then ABORT, then WAIT, else PROCEED.
- A hook that raises, times out or returns something that is not its outcome type counts as a failure, and its
  outcome follows `venice.store.lifecycle.hooks.failure.policy`: PROCEED (Venice's contract, the default), WAIT
  or ABORT. Functions that cannot WAIT (PROCEED/ABORT only) take ABORT under the WAIT policy: fail closed.
- Every invocation is handed to the recorder (which persists it), with queue wait and duration.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from venice_core.config import HookSettings
from venice_core.hooks.api import (
    HOOK_FUNCTIONS,
    HookContext,
    StoreLifecycleEventOutcome,
    StoreLifecycleHooks,
    StoreVersionLifecycleEventOutcome,
)

PRECEDENCE = ("ROLLBACK", "ABORT", "WAIT", "PROCEED")


@dataclass(frozen=True)
class HookInvocation:
    hook_class: str
    function: str
    region: str | None
    outcome: str | None  # None for informational functions
    reason: str
    queue_wait_seconds: float
    duration_seconds: float
    error: str | None = None
    timed_out: bool = False


@dataclass(frozen=True)
class HookDecision:
    outcome: str | None
    invocations: tuple[HookInvocation, ...]

    @property
    def reason(self) -> str:
        """Why the decision is what it is: the reasons and errors of the hooks that answered it."""
        parts = [
            f"{i.hook_class.rsplit('.', 1)[-1]}: {i.error or i.reason}"
            for i in self.invocations
            if i.outcome == self.outcome and (i.error or i.reason)
        ]
        return "; ".join(parts)


Recorder = Callable[[HookContext, HookInvocation], None]


def combine(outcomes: list[str]) -> str:
    for candidate in PRECEDENCE:
        if candidate in outcomes:
            return candidate
    return "PROCEED"


class HookExecutor:
    def __init__(
        self,
        settings: HookSettings,
        hooks: list[tuple[str, StoreLifecycleHooks]],
        recorder: Recorder | None = None,
    ) -> None:
        self.settings = settings
        self.hooks = hooks
        self.recorder = recorder
        self._pool = ThreadPoolExecutor(max_workers=settings.threads, thread_name_prefix="venice-hook")

    def _policy_outcome(self, kind: type[StrEnum] | None) -> str | None:
        if kind is None:
            return None
        policy = self.settings.failure_policy
        if policy == "WAIT" and kind is StoreLifecycleEventOutcome:
            return "ABORT"
        return policy

    @staticmethod
    def _normalise(result: Any, kind: type[StrEnum]) -> tuple[str, str]:
        outcome, reason = result if isinstance(result, tuple) and len(result) == 2 else (result, "")
        try:
            return kind(outcome).value, str(reason or "")
        except ValueError:
            raise TypeError(f"returned {outcome!r}, not a {kind.__name__}") from None

    def _call_one(self, path: str, hook: StoreLifecycleHooks, function: str, ctx: HookContext) -> HookInvocation:
        kind = HOOK_FUNCTIONS[function]
        submitted = time.monotonic()
        started: list[float] = []

        def call() -> Any:
            started.append(time.monotonic())
            return getattr(hook, function)(ctx)

        future = self._pool.submit(call)
        error, timed_out, outcome, reason = None, False, None, ""
        try:
            result = future.result(timeout=self.settings.timeout_seconds)
            if kind is not None:
                outcome, reason = self._normalise(result, kind)
        except FutureTimeout:
            timed_out = True
            error = f"timed out after {self.settings.timeout_seconds:g}s"
        except Exception as exc:  # noqa: BLE001 - a hook's failure is recorded, then the policy decides
            error = f"{type(exc).__name__}: {exc}"
        finished = time.monotonic()
        if error is not None:
            outcome = self._policy_outcome(kind)
            reason = f"failure policy {self.settings.failure_policy}"
        begin = started[0] if started else finished
        return HookInvocation(
            hook_class=path,
            function=function,
            region=ctx.region,
            outcome=outcome,
            reason=reason,
            queue_wait_seconds=begin - submitted,
            duration_seconds=finished - begin,
            error=error,
            timed_out=timed_out,
        )

    def invoke(self, function: str, ctx: HookContext) -> HookDecision:
        if function not in HOOK_FUNCTIONS:
            raise ValueError(f"unknown lifecycle function {function!r}")
        invocations = []
        for path, hook in self.hooks:
            invocation = self._call_one(path, hook, function, ctx)
            invocations.append(invocation)
            if self.recorder is not None:
                self.recorder(ctx, invocation)
        kind = HOOK_FUNCTIONS[function]
        if kind is None:
            return HookDecision(None, tuple(invocations))
        outcome = combine([i.outcome for i in invocations if i.outcome])
        if kind is StoreLifecycleEventOutcome and outcome not in ("PROCEED", "ABORT"):
            outcome = "ABORT"
        return HookDecision(outcome, tuple(invocations))

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


__all__ = ["HookDecision", "HookExecutor", "HookInvocation", "StoreVersionLifecycleEventOutcome", "combine"]
