"""The class a `module.Class` path names, imported: for the paths an allow-list of the cluster config names (hook
classes, partitioner classes), never for a path that only a store's data names."""

from __future__ import annotations

import importlib

from venice_core.errors import ConfigError


def import_class(class_path: str, kind: str) -> object:
    """The object `class_path` names; ConfigError for a path that is not `module.Class` or names nothing loadable
    (`kind`: what the class is, for the message). The caller checks what it is."""
    module_name, _, class_name = class_path.rpartition(".")
    if not module_name:
        raise ConfigError(f"'{class_path}' is not a module.Class path")
    try:
        return getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"cannot load {kind} class '{class_path}': {exc}") from None
