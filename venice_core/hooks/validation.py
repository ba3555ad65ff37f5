"""Store-level hook configs are checked before they are saved: each key set must be one that a configured hook
reads (`StoreLifecycleHooks.hook_config_keys`) or one the framework reads itself (`wait_limit.FRAMEWORK_KEYS`, each
checked here), then every configured hook's validate_hook_config sees them all, recorded like every other invocation
(VIP-4's metrics count it per class and function)."""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping

from venice_core.config import ClusterConfig
from venice_core.config.keys import HOOKS
from venice_core.errors import VeniceError
from venice_core.hooks.api import HookContext, StoreLifecycleHooks
from venice_core.hooks.executor import HookExecutor, Outcome
from venice_core.hooks.loader import load_hooks
from venice_core.hooks.records import recorder
from venice_core.hooks.wait_limit import FRAMEWORK_KEYS, parse_seconds
from venice_core.meta import MetadataStore


class InvalidHookConfig(VeniceError):
    http_status = 400


def validate_store_hook_configs(
    config: ClusterConfig,
    meta: MetadataStore,
    store: str,
    configs: Mapping[str, str],
    changed: Collection[str] | None = None,
) -> list[str]:
    """Refuse (InvalidHookConfig) a key of `changed` (the keys this update sets; default all) that no configured
    hook reads, then configs a hook's validate_hook_config refuses. Keys already saved are not checked again, so a
    store whose keys predate a change of the hook list can still be updated. Returns the warnings: with no hook
    configured, nothing reads or checks the keys set."""
    keys = list(configs if changed is None else changed)
    for key in FRAMEWORK_KEYS.intersection(keys) & configs.keys():
        try:
            parse_seconds(configs[key])
        except ValueError as exc:
            raise InvalidHookConfig(f"store-level hook config of '{store}' refused: {exc}") from None
    keys = [key for key in keys if key not in FRAMEWORK_KEYS]
    hooks = load_hooks(config.hooks)
    if not hooks:
        if not keys:
            return []
        quoted = ", ".join(f"'{key}'" for key in keys)
        return [f"no lifecycle hook is configured ({HOOKS}): nothing reads hook config {quoted} of '{store}'"]
    warnings = check_keys(store, [hook for _, hook in hooks], keys)
    executor = HookExecutor(config.hooks, hooks, recorder(meta))
    ctx = HookContext(cluster=config.cluster_name, store=store, store_hook_configs=dict(configs))
    decision = executor.invoke("validate_hook_config", ctx)
    if decision.outcome is not Outcome.PROCEED:
        raise InvalidHookConfig(
            f"store-level hook config of '{store}' refused: {decision.reason or 'a hook refused it'}"
        )
    return warnings


def check_keys(store: str, hooks: list[StoreLifecycleHooks], keys: Collection[str]) -> list[str]:
    """InvalidHookConfig naming the first key no hook reads, the hooks, and the nearest key any of them knows. A
    key only a hook that declares no keys may read is kept, with a warning (such a hook cannot say what it reads)."""
    warnings = []
    declared = [hook for hook in hooks if hook.hook_config_keys is not None]
    for key in keys:
        if any(hook.reads_hook_config(key) for hook in declared):
            continue
        undeclared = [type(hook).__name__ for hook in hooks if hook.hook_config_keys is None]
        if undeclared:
            warnings.append(
                f"hook config '{key}' of '{store}' is read by none of the hooks that declare their keys; kept "
                f"for {', '.join(undeclared)}, which declare none (hook_config_keys)"
            )
            continue
        names = ", ".join(type(hook).__name__ for hook in hooks)
        known = {k for hook in hooks for k in hook.hook_config_keys or ()}
        known |= {f"{prefix}*" for hook in hooks for prefix in hook.hook_config_prefixes}
        near = difflib.get_close_matches(key, sorted(known), n=1)
        hint = f"; did you mean '{near[0]}'?" if near else f"; they read: {', '.join(sorted(known)) or 'no key'}"
        raise InvalidHookConfig(
            f"store-level hook config of '{store}' refused: unknown key '{key}': none of the configured hooks "
            f"({names}) reads it{hint}"
        )
    return warnings
