"""Run a lifecycle function on every configured hook and combine their answers.

- Hooks run on the configured thread pool (`venice.store.lifecycle.hooks.threads`), one at a time per invocation,
  in configured order (Venice's contract), each within `venice.store.lifecycle.hooks.timeout.seconds` (queue time
  included). Python cannot interrupt a thread: a hook that times out is abandoned, not stopped. The pool's threads
  are daemons, so an abandoned hook never holds its process open at exit (an Airflow sensor process that outlives
  its poke races the scheduler's next poke of the same task, which then fails it: apache/airflow#71172).
- Combined outcome: any ROLLBACK wins, then ABORT, then WAIT, else PROCEED.
- A hook that raises, times out or returns something that is not its outcome type counts as a failure, and its
  outcome follows `venice.store.lifecycle.hooks.failure.policy`: PROCEED (Venice's contract, the default), WAIT
  or ABORT. Functions that cannot WAIT (PROCEED/ABORT only) take ABORT under the WAIT policy: fail closed.
  An outcome the function may not return (WAIT or ROLLBACK from a PROCEED/ABORT-only function) is such a failure
  too, kept apart as `invalid_outcome` on the invocation (and in its own metric), never taken as the answer.
- Each hook sees what the hooks before it answered in this invocation (`HookContext.earlier_outcomes`).
- Every invocation is handed to the recorder (which persists it), with queue wait and duration.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from enum import StrEnum
from queue import SimpleQueue
from typing import Any

from venice_core.config import HookSettings
from venice_core.hooks.api import (
    HOOK_FUNCTIONS,
    HookContext,
    LifecycleFunction,
    StoreLifecycleEventOutcome,
    StoreLifecycleHooks,
    StoreVersionLifecycleEventOutcome,
)

# Any function's outcome (a PROCEED/ABORT function's are among them).
Outcome = StoreVersionLifecycleEventOutcome
PRECEDENCE = (Outcome.ROLLBACK, Outcome.ABORT, Outcome.WAIT, Outcome.PROCEED)


class InvalidOutcome(TypeError):
    """A hook returned a lifecycle outcome its function may not return."""

    def __init__(self, function: str, outcome: Outcome, kind: type[StrEnum]) -> None:
        allowed = " or ".join(kind)
        super().__init__(f"returned {outcome}, which {function} may not return ({allowed} only)")
        self.outcome = outcome


@dataclass(frozen=True)
class HookInvocation:
    hook_class: str
    function: str
    region: str | None
    outcome: Outcome | None  # None for informational functions
    reason: str
    queue_wait_seconds: float
    duration_seconds: float
    error: str | None = None
    timed_out: bool = False
    invalid_outcome: Outcome | None = None  # an outcome the function may not return (WAIT or ROLLBACK), if it did


@dataclass(frozen=True)
class HookDecision:
    outcome: Outcome | None
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


def combine(outcomes: list[Outcome]) -> Outcome:
    for candidate in PRECEDENCE:
        if candidate in outcomes:
            return candidate
    return Outcome.PROCEED


class DaemonPool:
    """A fixed pool of daemon threads. Unlike ThreadPoolExecutor, whose threads the interpreter joins at exit, it
    lets a process end while an abandoned (timed-out) call is still running."""

    def __init__(self, workers: int, name: str) -> None:
        self._work: SimpleQueue[tuple[Future[Any], Callable[[], Any]] | None] = SimpleQueue()
        self._threads = [threading.Thread(target=self._serve, name=f"{name}-{i}", daemon=True) for i in range(workers)]
        for thread in self._threads:
            thread.start()

    def _serve(self) -> None:
        while (item := self._work.get()) is not None:
            future, call = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(call())
            except BaseException as exc:  # noqa: BLE001 - handed to the caller through the future
                future.set_exception(exc)

    def submit(self, call: Callable[[], Any]) -> Future[Any]:
        future: Future[Any] = Future()
        self._work.put((future, call))
        return future

    def shutdown(self) -> None:
        """Stop the idle threads; a call still running finishes on its own (or dies with the process)."""
        for _ in self._threads:
            self._work.put(None)


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
        self._pool = DaemonPool(settings.threads, "venice-hook")

    def _policy_outcome(self, kind: type[StrEnum] | None) -> Outcome | None:
        if kind is None:
            return None
        policy = Outcome(self.settings.failure_policy)
        if policy is Outcome.WAIT and kind is StoreLifecycleEventOutcome:
            return Outcome.ABORT
        return policy

    @staticmethod
    def _normalise(result: Any, kind: type[StrEnum], function: str) -> tuple[Outcome, str]:
        outcome, reason = result if isinstance(result, tuple) and len(result) == 2 else (result, "")
        try:
            return Outcome(kind(outcome).value), str(reason or "")
        except ValueError:
            if outcome in Outcome.__members__.values():
                raise InvalidOutcome(function, Outcome(outcome), kind) from None
            raise TypeError(f"returned {outcome!r}, not a {kind.__name__}") from None

    def _call_one(
        self, path: str, hook: StoreLifecycleHooks, function: LifecycleFunction, ctx: HookContext
    ) -> HookInvocation:
        kind = HOOK_FUNCTIONS[function]
        submitted = time.monotonic()
        started: list[float] = []

        def call() -> Any:
            started.append(time.monotonic())
            return getattr(hook, function)(ctx)

        future = self._pool.submit(call)
        error: str | None = None
        timed_out, invalid, outcome, reason = False, None, None, ""
        try:
            result = future.result(timeout=self.settings.timeout_seconds)
            if kind is not None:
                outcome, reason = self._normalise(result, kind, function)
        except InvalidOutcome as exc:
            invalid, error = exc.outcome, str(exc)
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
            invalid_outcome=invalid,
        )

    def invoke(self, name: str, ctx: HookContext) -> HookDecision:
        try:
            function = LifecycleFunction(name)
        except ValueError:
            raise ValueError(f"unknown lifecycle function {name!r}") from None
        invocations: list[HookInvocation] = []
        for path, hook in self.hooks:
            earlier = tuple((i.hook_class, i.outcome) for i in invocations)
            invocation = self._call_one(path, hook, function, dataclasses.replace(ctx, earlier_outcomes=earlier))
            invocations.append(invocation)
            if self.recorder is not None:
                self.recorder(ctx, invocation)
        kind = HOOK_FUNCTIONS[function]
        if kind is None:
            return HookDecision(None, tuple(invocations))
        outcome = combine([i.outcome for i in invocations if i.outcome])
        if kind is StoreLifecycleEventOutcome and outcome not in (Outcome.PROCEED, Outcome.ABORT):
            outcome = Outcome.ABORT
        return HookDecision(outcome, tuple(invocations))

    def close(self) -> None:
        self._pool.shutdown()


__all__ = [
    "HookDecision",
    "HookExecutor",
    "HookInvocation",
    "InvalidOutcome",
    "Outcome",
    "StoreVersionLifecycleEventOutcome",
    "combine",
]
