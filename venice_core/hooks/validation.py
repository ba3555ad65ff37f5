"""Store-level hook configs are checked by every configured hook's validate_hook_config before they are saved."""

from __future__ import annotations

from collections.abc import Mapping

from venice_core.config import ClusterConfig
from venice_core.errors import VeniceError
from venice_core.hooks.api import HookContext
from venice_core.hooks.executor import HookExecutor
from venice_core.hooks.loader import load_hooks


class InvalidHookConfig(VeniceError):
    http_status = 400


def validate_store_hook_configs(config: ClusterConfig, store: str, configs: Mapping[str, str]) -> None:
    hooks = load_hooks(config.hooks)
    if not hooks:
        return
    executor = HookExecutor(config.hooks, hooks)
    try:
        ctx = HookContext(cluster=config.cluster_name, store=store, store_hook_configs=dict(configs))
        decision = executor.invoke("validate_hook_config", ctx)
    finally:
        executor.close()
    if decision.outcome != "PROCEED":
        raise InvalidHookConfig(
            f"store-level hook config of '{store}' refused: {decision.reason or 'a hook refused it'}"
        )
