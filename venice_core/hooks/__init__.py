"""Store lifecycle hooks (VIP-4): the API operators implement, the loader, the executor and its metrics."""

from venice_core.hooks.api import (
    HookContext,
    StoreLifecycleEventOutcome,
    StoreLifecycleHooks,
    StoreVersionLifecycleEventOutcome,
)

__all__ = ["HookContext", "StoreLifecycleEventOutcome", "StoreLifecycleHooks", "StoreVersionLifecycleEventOutcome"]
