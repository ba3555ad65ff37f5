"""Load the hook classes named in `venice.store.lifecycle.hooks`, and only those."""

from __future__ import annotations

from venice_core.config import HookSettings
from venice_core.config.keys import HOOKS
from venice_core.errors import ConfigError
from venice_core.hooks.api import StoreLifecycleHooks
from venice_core.utils.class_paths import import_class


def load_class(class_path: str) -> type[StoreLifecycleHooks]:
    try:
        cls = import_class(class_path, "hook")
    except ConfigError as exc:
        raise ConfigError(f"{HOOKS}: {exc}") from None
    if not (isinstance(cls, type) and issubclass(cls, StoreLifecycleHooks)):
        raise ConfigError(f"{HOOKS}: '{class_path}' is not a subclass of StoreLifecycleHooks")
    return cls


def load_hooks(settings: HookSettings) -> list[tuple[str, StoreLifecycleHooks]]:
    """(class path, instance) in configured order; each gets the clipped `...hooks.configs.*` values."""
    return [(path, load_class(path)(settings.configs)) for path in settings.class_paths]
