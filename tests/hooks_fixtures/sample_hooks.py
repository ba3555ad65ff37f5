"""Hook classes the tests name in `venice.store.lifecycle.hooks` (loaded by class path, as an operator's would be).

Each call runs in a worker process of its own (`venice_core.hooks.executor`): what a hook must remember across calls,
or tell a test, goes to a file under the cluster-level hook config `state.dir`, never into the instance."""

from __future__ import annotations

import ast
import json
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path

from venice_core.hooks import HookContext, StoreLifecycleEventOutcome, StoreLifecycleHooks
from venice_core.hooks.api import HOOK_FUNCTIONS

# `state.dir` and `slow.seconds` are cluster-level (`venice.store.lifecycle.hooks.configs.*`): no hook here declares
# them as store-level keys.


def _configured(ctx: HookContext, prefix: str, function: str) -> str | None:
    """The store-level config `<prefix>.<function>.<region>`, else `<prefix>.<function>`."""
    configs = ctx.store_hook_configs
    return configs.get(f"{prefix}.{function}.{ctx.region}", configs.get(f"{prefix}.{function}"))


def _times_asked(state_dir: str | None, ctx: HookContext, function: str) -> int:
    """How many times this function was asked for this version and region before, across processes (each
    Airflow task is one), counted in a file under the hook config `state.dir`."""
    if not state_dir:
        return 0
    path = Path(state_dir) / f"{ctx.store}-{ctx.version}-{function}-{ctx.region}"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+") as counter:
        counter.seek(0)
        before = len(counter.read())
        counter.write("x")
    return before


def _per_function(prefix: str, *extra: str):  # noqa: ANN202 - a class decorator
    """Declare the store-level keys `<prefix>.<function>[.<region>]` of each lifecycle function the class answers."""

    def declare(cls: type[StoreLifecycleHooks]) -> type[StoreLifecycleHooks]:
        functions = [function for function in HOOK_FUNCTIONS if function in vars(cls)]
        cls.hook_config_keys = frozenset({*(f"{prefix}.{f}" for f in functions), *extra})
        cls.hook_config_prefixes = tuple(f"{prefix}.{f}." for f in functions)
        return cls

    return declare


def _then(value: str, asked: int) -> tuple[str, bool]:
    """`WAIT*2`: the answer the first 2 times, then the step goes on (`*N` absent: always)."""
    answer, _, times = value.partition("*")
    return answer, not times or asked < int(times)


@_per_function("answer", "reason.pre_schema_registration")
class AnswerFromConfig(StoreLifecycleHooks):
    """Answers with the store-level config `answer.<function>[.<region>]` (e.g. `ABORT`, or `WAIT*2` for WAIT twice
    then PROCEED), else PROCEED."""

    def _answer(self, function: str, ctx: HookContext) -> str:
        value = _configured(ctx, "answer", function)
        if value is None:
            return "PROCEED"
        answer, applies = _then(value, _times_asked(self.configs.get("state.dir"), ctx, function))
        return answer if applies else "PROCEED"

    def post_store_version_swap(self, ctx: HookContext):  # type: ignore[override]
        return self._answer("post_store_version_swap", ctx)

    def pre_store_version_swap(self, ctx: HookContext):  # type: ignore[override]
        return self._answer("pre_store_version_swap", ctx)

    def pre_start_of_push_job(self, ctx: HookContext):  # type: ignore[override]
        return self._answer("pre_start_of_push_job", ctx)

    def pre_store_version_creation(self, ctx: HookContext):  # type: ignore[override]
        return self._answer("pre_store_version_creation", ctx)

    def pre_end_of_push_job(self, ctx: HookContext):  # type: ignore[override]
        return self._answer("pre_end_of_push_job", ctx)

    def pre_start_of_store_version_ingestion_for_da_vinci(self, ctx: HookContext):  # type: ignore[override]
        return self._answer("pre_start_of_store_version_ingestion_for_da_vinci", ctx)

    def post_start_of_store_version_ingestion_for_da_vinci(self, ctx: HookContext):  # type: ignore[override]
        return self._answer("post_start_of_store_version_ingestion_for_da_vinci", ctx)

    def pre_schema_registration(self, ctx: HookContext):  # type: ignore[override]
        answer = self._answer("pre_schema_registration", ctx)
        return (
            (answer, ctx.store_hook_configs.get("reason.pre_schema_registration", ""))
            if answer != "PROCEED"
            else answer
        )


class SchemaRegistrations(StoreLifecycleHooks):
    """Remembers the schema-registration calls it gets, (function, store, details), one line each in
    `<state.dir>/schema-registrations` (`calls` reads them back, with their types)."""

    hook_config_keys = frozenset()

    def _remember(self, function: str, ctx: HookContext) -> None:
        with (Path(self.configs["state.dir"]) / "schema-registrations").open("a") as calls:
            calls.write(repr((function, ctx.store, dict(ctx.details))) + "\n")

    @staticmethod
    def calls(state_dir: Path) -> list[tuple[str, str, dict]]:
        path = state_dir / "schema-registrations"
        lines = path.read_text().splitlines() if path.exists() else []
        return [ast.literal_eval(line) for line in lines]

    def pre_schema_registration(self, ctx: HookContext):  # type: ignore[override]
        self._remember("pre_schema_registration", ctx)
        return "PROCEED"

    def post_schema_registration(self, ctx: HookContext) -> None:
        self._remember("post_schema_registration", ctx)


@_per_function("fail")
class FailWhereConfigured(StoreLifecycleHooks):
    """Fails as the store-level config `fail.<function>[.<region>]` says: `raise`, or `timeout` (sleeps
    `slow.seconds`, past the configured timeout); `raise*2` fails the first 2 times, then PROCEEDs."""

    def _fail(self, function: str, ctx: HookContext):
        value = _configured(ctx, "fail", function)
        if value is None:
            return "PROCEED"
        failure, applies = _then(value, _times_asked(self.configs.get("state.dir"), ctx, function))
        if applies and failure == "raise":
            raise RuntimeError(f"{function} cannot decide")
        if applies and failure == "timeout":
            time.sleep(float(self.configs.get("slow.seconds", "4")))
        return "PROCEED"

    def pre_start_of_push_job(self, ctx: HookContext):  # type: ignore[override]
        return self._fail("pre_start_of_push_job", ctx)

    def pre_store_version_swap(self, ctx: HookContext):  # type: ignore[override]
        return self._fail("pre_store_version_swap", ctx)


class Raising(StoreLifecycleHooks):
    hook_config_keys = frozenset()

    def pre_store_version_swap(self, ctx: HookContext):  # type: ignore[override]
        raise RuntimeError("health service unreachable")

    def pre_start_of_push_job(self, ctx: HookContext):  # type: ignore[override]
        raise RuntimeError("cannot decide")

    def validate_hook_config(self, ctx: HookContext):  # type: ignore[override]
        raise RuntimeError("cannot check")


class Slow(StoreLifecycleHooks):
    """Takes `slow.seconds` (default 2) to answer (PROCEED)."""

    hook_config_keys = frozenset()

    def pre_store_version_swap(self, ctx: HookContext):  # type: ignore[override]
        time.sleep(float(self.configs.get("slow.seconds", "2")))
        return "PROCEED"

    def pre_store_version_creation(self, ctx: HookContext):  # type: ignore[override]
        return self.pre_store_version_swap(ctx)

    def post_store_version_creation(self, ctx: HookContext) -> None:
        self.pre_store_version_swap(ctx)


class Stuck(StoreLifecycleHooks):
    """Never answers pre_store_version_swap or validate_hook_config: stuck where the cluster-level config `stuck.in`
    says, a Python `loop`, `sleep`, an `event` nobody sets or a `socket` read nothing arrives on. First it writes
    the id of the process it runs in to `<state.dir>/stuck.pid`."""

    hook_config_keys = frozenset()

    def validate_hook_config(self, ctx: HookContext):  # type: ignore[override]
        return self.pre_store_version_swap(ctx)

    def pre_store_version_swap(self, ctx: HookContext):  # type: ignore[override]
        (Path(self.configs["state.dir"]) / "stuck.pid").write_text(str(os.getpid()))
        where = self.configs["stuck.in"]
        if where == "loop":
            while True:
                pass
        elif where == "sleep":
            time.sleep(3600)
        elif where == "event":
            threading.Event().wait()
        elif where == "socket":
            quiet, _other = socket.socketpair()
            quiet.recv(1)
        raise AssertionError(f"stuck.in {where!r} is not a way to be stuck")


class EndsItsProcess(StoreLifecycleHooks):
    """Ends the process it runs in at pre_store_version_swap, as the cluster-level config `ends.how` says:
    `sigkill`, `os_exit` (status 3) or `sys_exit` (status 3)."""

    hook_config_keys = frozenset()

    def pre_store_version_swap(self, ctx: HookContext):  # type: ignore[override]
        how = self.configs["ends.how"]
        if how == "sigkill":
            os.kill(os.getpid(), signal.SIGKILL)
        elif how == "os_exit":
            os._exit(3)
        elif how == "sys_exit":
            sys.exit(3)
        return "PROCEED"


class BadReturn(StoreLifecycleHooks):
    hook_config_keys = frozenset()

    def pre_store_version_swap(self, ctx: HookContext):  # type: ignore[override]
        return "MAYBE"


class StrictConfig(StoreLifecycleHooks):
    """Accepts only store-level keys it knows, with integer values."""

    hook_config_keys = frozenset({"min.delay.seconds"})

    def validate_hook_config(self, ctx: HookContext):  # type: ignore[override]
        for key, value in ctx.store_hook_configs.items():
            if key != "min.delay.seconds":
                return StoreLifecycleEventOutcome.ABORT, f"unknown key '{key}'"
            if not value.isdigit():
                return StoreLifecycleEventOutcome.ABORT, f"min.delay.seconds must be an integer, got {value!r}"
        return StoreLifecycleEventOutcome.PROCEED


class NotAHook:
    pass


class WaitTwiceBeforeEachSwap(StoreLifecycleHooks):
    """WAIT twice per region at pre_store_version_swap, then PROCEED (counted under `state.dir`)."""

    hook_config_keys = frozenset()

    def pre_store_version_swap(self, ctx: HookContext):  # type: ignore[override]
        asked = _times_asked(self.configs["state.dir"], ctx, "pre_store_version_swap")
        return "WAIT" if asked < 2 else "PROCEED"


class RecordEveryCall(StoreLifecycleHooks):
    """Answers PROCEED to all 14 functions and appends what each was given, as a JSON line, to
    `<state.dir>/calls-<store>.jsonl` (Airflow runs every step in a process of its own). It records every
    store-level config it is given, so it declares no keys: while it is configured, any key is accepted."""

    def _record(self, function: str, ctx: HookContext) -> None:
        state_dir = self.configs.get("state.dir")
        if not state_dir:
            return
        status = ctx.job_status
        call = {
            "function": function,
            "store": ctx.store,
            "version": ctx.version,
            "region": ctx.region,
            "job_status": None
            if status is None
            else {"version": status.version, "status": status.version_status.value, "regions": sorted(status.regions)},
            "details": sorted(ctx.details),
            "configs": dict(ctx.store_hook_configs),
        }
        path = Path(state_dir) / f"calls-{ctx.store}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as calls:  # one short append per call: whole lines across processes
            calls.write(json.dumps(call) + "\n")


def _recording(function: str, kind: type | None):  # noqa: ANN202 - a hook method
    def method(self: RecordEveryCall, ctx: HookContext):  # type: ignore[no-untyped-def]
        self._record(function, ctx)
        return None if kind is None else kind("PROCEED")

    method.__name__ = function
    return method


for _function, _kind in HOOK_FUNCTIONS.items():
    setattr(RecordEveryCall, _function, _recording(_function, _kind))
