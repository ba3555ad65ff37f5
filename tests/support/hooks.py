"""A `HookExecutor` over the sample hooks of `tests/hooks_fixtures`, recording every invocation, and the context
the executor tests ask with. Importable from a child process, for tests whose subject is the process itself."""

from __future__ import annotations

from venice_core.config import HookSettings
from venice_core.hooks import HookContext
from venice_core.hooks.executor import HookExecutor, HookInvocation
from venice_core.hooks.loader import load_hooks

SAMPLE_HOOKS = "tests.hooks_fixtures.sample_hooks"

Recorded = list[tuple[HookContext, HookInvocation]]


def sample_hook_settings(
    *classes: str, policy: str = "PROCEED", timeout: float = 5, threads: int = 2, **configs: str
) -> HookSettings:
    """Settings naming the given classes of the sample hooks, in order, with cluster-level `configs`."""
    return HookSettings(tuple(f"{SAMPLE_HOOKS}.{c}" for c in classes), threads, timeout, 60, policy, configs)


def sample_hook_executor(
    *classes: str, policy: str = "PROCEED", timeout: float = 5, threads: int = 2, **configs: str
) -> tuple[HookExecutor, Recorded]:
    """An executor over the given sample hook classes (settings as `sample_hook_settings`), and the list its
    recorder appends each (context, invocation) to."""
    recorded: Recorded = []
    hook_settings = sample_hook_settings(*classes, policy=policy, timeout=timeout, threads=threads, **configs)
    executor = HookExecutor(
        hook_settings, load_hooks(hook_settings), recorder=lambda ctx, inv: recorded.append((ctx, inv))
    )
    return executor, recorded


def hook_context(**store_hook_configs: str) -> HookContext:
    """Version 3 of store `users` in dc-1, with the given store-level hook configs."""
    return HookContext(cluster="c", store="users", store_hook_configs=store_hook_configs, version=3, region="dc-1")
