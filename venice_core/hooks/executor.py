"""Run a lifecycle function on every configured hook and combine their answers.

- A round (`invoke_all`) asks every hook in every context of a step (each region the step asks, each configured
  hook class) at once, at most `venice.store.lifecycle.hooks.threads` at a time: a call waits in the queue only
  for a free slot, which is what the queue-wait metric measures.
- Each call runs in a worker process of its own (`hooks.worker`), forked from the caller: it sees the caller's
  hook instance as it is when the call starts, and what it changes there ends with it. Its clock starts when it
  starts; past `venice.store.lifecycle.hooks.timeout.seconds` it is killed (a hook stuck in a loop or in a blocking
  call too) and its slot goes to the next call. No thread and no process of a round outlives it, so an Airflow
  task process ends right after its poke (one that outlives its poke races the scheduler's next poke of the same
  task, which then fails it: apache/airflow#71172).
- Combined outcome: any ROLLBACK wins, then ABORT, then WAIT, else PROCEED.
- A hook that raises, times out, ends its worker without answering or returns something that is not its outcome
  type counts as a failure, and its outcome follows `venice.store.lifecycle.hooks.failure.policy`: PROCEED
  (Venice's contract, the default), WAIT or ABORT. Functions that cannot WAIT (PROCEED/ABORT only) take ABORT under
  the WAIT policy: fail closed. An outcome the function may not return (WAIT or ROLLBACK from a PROCEED/ABORT-only
  function) is such a failure too, kept apart as `invalid_outcome` on the invocation (and in its own metric), never
  taken as the answer.
- Every invocation of a round is handed to the recorder (which persists it) when the round ends, in the order
  asked, with its queue wait, duration and whether it timed out.
"""

from __future__ import annotations

import math
import select
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import partial
from typing import Any

from venice_core.config import HookSettings
from venice_core.hooks import worker
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


def _normalise(result: Any, kind: type[StrEnum], function: str) -> tuple[Outcome, str]:
    outcome, reason = result if isinstance(result, tuple) and len(result) == 2 else (result, "")
    try:
        return Outcome(kind(outcome).value), str(reason or "")
    except ValueError:
        if outcome in Outcome.__members__.values():
            raise InvalidOutcome(function, Outcome(outcome), kind) from None
        raise TypeError(f"returned {outcome!r}, not a {kind.__name__}") from None


def _answer(hook: StoreLifecycleHooks, function: LifecycleFunction, ctx: HookContext) -> worker.Answer:
    """What a worker runs: the hook's call, its result checked where it was made (whatever it is, only strings
    travel back)."""
    kind = HOOK_FUNCTIONS[function]
    result = getattr(hook, function)(ctx)
    if kind is None:
        return {}
    try:
        outcome, reason = _normalise(result, kind, function)
    except InvalidOutcome as exc:
        return {"invalid": exc.outcome.value, "error": str(exc)}
    return {"outcome": outcome.value, "reason": reason}


@dataclass(frozen=True)
class _Call:
    index: int  # its place in the round, the order it is recorded in
    hook_class: str
    hook: StoreLifecycleHooks
    ctx: HookContext


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
        self._slots = threading.BoundedSemaphore(settings.threads)  # shared by the rounds of every caller

    def _policy_outcome(self, kind: type[StrEnum] | None) -> Outcome | None:
        if kind is None:
            return None
        policy = Outcome(self.settings.failure_policy)
        if policy is Outcome.WAIT and kind is StoreLifecycleEventOutcome:
            return Outcome.ABORT
        return policy

    def invoke(self, name: str, ctx: HookContext) -> HookDecision:
        """Every hook asked in one context."""
        (decision,) = self.invoke_all(name, [ctx])
        return decision

    def invoke_all(self, name: str, contexts: Sequence[HookContext]) -> list[HookDecision]:
        """One round: every hook asked in every context at once (at most `threads` at a time); each context's
        decision, in order."""
        try:
            function = LifecycleFunction(name)
        except ValueError:
            raise ValueError(f"unknown lifecycle function {name!r}") from None
        asked = [(ctx, path, hook) for ctx in contexts for path, hook in self.hooks]
        calls = [_Call(index, path, hook, ctx) for index, (ctx, path, hook) in enumerate(asked)]
        invocations = self._round(function, calls)
        if self.recorder is not None:
            for call, invocation in zip(calls, invocations, strict=True):
                self.recorder(call.ctx, invocation)
        each = len(self.hooks)
        return [self._decide(function, tuple(invocations[c * each : (c + 1) * each])) for c in range(len(contexts))]

    def _decide(self, function: LifecycleFunction, invocations: tuple[HookInvocation, ...]) -> HookDecision:
        kind = HOOK_FUNCTIONS[function]
        if kind is None:
            return HookDecision(None, invocations)
        outcome = combine([i.outcome for i in invocations if i.outcome])
        if kind is StoreLifecycleEventOutcome and outcome not in (Outcome.PROCEED, Outcome.ABORT):
            outcome = Outcome.ABORT
        return HookDecision(outcome, invocations)

    def _round(self, function: LifecycleFunction, calls: list[_Call]) -> list[HookInvocation]:
        """Run the calls, each in a worker as a slot frees up, each killed at its timeout; the invocations in the
        calls' order. A worker's slot frees when it answers; every worker is reaped before this returns, whatever
        happens (a signal raising here too)."""
        timeout = self.settings.timeout_seconds
        queued = deque(calls)
        running: dict[int, tuple[_Call, worker.Worker]] = {}
        ended: list[worker.Worker] = []  # killed, to be reaped
        done: dict[int, HookInvocation] = {}
        poller = select.poll()
        submitted = time.monotonic()

        def finish(pipe: int, failure: str | None = None, timed_out: bool = False) -> None:
            finished = time.monotonic()
            call, work = running.pop(pipe)
            poller.unregister(pipe)
            answer = None if timed_out else work.answer()
            work.kill()
            self._slots.release()
            if answer is None and failure is None:  # it ended on its own: how, is the error
                failure = f"its worker process ended without answering ({work.reap()})"
            else:
                ended.append(work)
            timing = (work.started - submitted, finished - work.started)
            done[call.index] = self._invocation(call, function, answer or {}, timing, failure, timed_out)

        try:
            while queued or running:
                while queued and self._slots.acquire(blocking=not running):
                    call = queued.popleft()
                    try:
                        work = worker.start(partial(_answer, call.hook, function, call.ctx))
                    except BaseException:
                        self._slots.release()
                        raise
                    running[work.pipe] = (call, work)
                    poller.register(work.pipe, select.POLLIN)
                first_deadline = min(work.started for _, work in running.values()) + timeout
                for pipe, _event in poller.poll(math.ceil(max(0.0, first_deadline - time.monotonic()) * 1000)):
                    if running[pipe][1].read():
                        finish(pipe)
                now = time.monotonic()
                for pipe in [p for p, (_, work) in running.items() if now >= work.started + timeout]:
                    if running[pipe][1].read():  # it answered since the poll
                        finish(pipe)
                    else:
                        finish(pipe, f"timed out after {timeout:g}s", timed_out=True)
        finally:
            for _call, work in running.values():
                work.kill()
                ended.append(work)
                self._slots.release()
            for work in ended:
                work.reap()
        return [done[call.index] for call in calls]

    def _invocation(
        self,
        call: _Call,
        function: LifecycleFunction,
        answer: worker.Answer,
        timing: tuple[float, float],
        failure: str | None,
        timed_out: bool,
    ) -> HookInvocation:
        kind = HOOK_FUNCTIONS[function]
        error = failure or answer.get("error")
        invalid = answer.get("invalid")
        if error is not None:
            outcome, reason = self._policy_outcome(kind), f"failure policy {self.settings.failure_policy}"
        else:
            outcome, reason = (Outcome(answer["outcome"]) if kind is not None else None), answer.get("reason", "")
        return HookInvocation(
            hook_class=call.hook_class,
            function=function,
            region=call.ctx.region,
            outcome=outcome,
            reason=reason,
            queue_wait_seconds=timing[0],
            duration_seconds=timing[1],
            error=error,
            timed_out=timed_out,
            invalid_outcome=Outcome(invalid) if invalid else None,
        )


__all__ = [
    "HookDecision",
    "HookExecutor",
    "HookInvocation",
    "InvalidOutcome",
    "Outcome",
    "StoreVersionLifecycleEventOutcome",
    "combine",
]
