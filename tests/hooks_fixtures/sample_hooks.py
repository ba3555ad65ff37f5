"""Hook classes the tests name in `venice.store.lifecycle.hooks` (loaded by class path, as an operator's would be)."""

from __future__ import annotations

import time

from venice_core.hooks import HookContext, StoreLifecycleEventOutcome, StoreLifecycleHooks


class AnswerFromConfig(StoreLifecycleHooks):
    """Answers with the store-level config `answer.<function>.<region>`, else `answer.<function>`, else PROCEED."""

    def _answer(self, function: str, ctx: HookContext) -> str:
        configs = ctx.store_hook_configs
        return configs.get(f"answer.{function}.{ctx.region}", configs.get(f"answer.{function}", "PROCEED"))

    def post_store_version_swap(self, ctx: HookContext):  # type: ignore[override]
        return self._answer("post_store_version_swap", ctx)

    def pre_store_version_swap(self, ctx: HookContext):  # type: ignore[override]
        return self._answer("pre_store_version_swap", ctx)

    def pre_start_of_push_job(self, ctx: HookContext):  # type: ignore[override]
        return self._answer("pre_start_of_push_job", ctx)


class Raising(StoreLifecycleHooks):
    def pre_store_version_swap(self, ctx: HookContext):  # type: ignore[override]
        raise RuntimeError("health service unreachable")

    def pre_start_of_push_job(self, ctx: HookContext):  # type: ignore[override]
        raise RuntimeError("cannot decide")


class Slow(StoreLifecycleHooks):
    def pre_store_version_swap(self, ctx: HookContext):  # type: ignore[override]
        time.sleep(float(self.configs.get("slow.seconds", "2")))
        return "PROCEED"


class BadReturn(StoreLifecycleHooks):
    def pre_store_version_swap(self, ctx: HookContext):  # type: ignore[override]
        return "MAYBE"


class StrictConfig(StoreLifecycleHooks):
    """Accepts only store-level keys it knows, with integer values."""

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
    """WAIT twice per region at pre_store_version_swap, then PROCEED; remembers when it was asked."""

    asked: dict[str, list[float]] = {}

    def pre_store_version_swap(self, ctx: HookContext):  # type: ignore[override]
        calls = self.asked.setdefault(f"{ctx.store}/{ctx.region}", [])
        calls.append(time.monotonic())
        return "WAIT" if len(calls) <= 2 else "PROCEED"
