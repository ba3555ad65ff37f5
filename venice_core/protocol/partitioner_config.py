"""Which partitioner a store names (Venice's `partitioner.class` and `partitioner.params`) and a version pins, and
loading it: only a class in `venice.partitioner.classes` (or the default), never one a store's data names alone.

A store's setting is checked at `venice store create/update` (`load_partitioner`: allowed, importable, its params
accepted). A version pins what the store had when it was created, so its writers and readers agree however the store
changes; a reader loads the version's partitioner with its own config's list, so a class taken off the list since
fails that reader's reads with one clear error (`VersionPartitioner`), while ingestion, which needs no partitioner,
goes on."""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from venice_core.config.keys import PARTITIONER_CLASSES
from venice_core.errors import ConfigError
from venice_core.protocol.partitioner import (
    DEFAULT_PARTITIONER,
    DEFAULT_PARTITIONER_CLASS,
    PartitionerClass,
    VenicePartitioner,
)
from venice_core.protocol.serde import AvroSchemaJson
from venice_core.utils.class_paths import import_class


class PartitionerNotAllowed(ConfigError):
    """A partitioner class outside `venice.partitioner.classes`: refused at `store create/update`, and by a reader of
    a version that pinned it before the list changed."""


@dataclass(frozen=True)
class PartitionerConfig:
    """A partitioner class path and its params: data, as a store's settings and a version's details hold it."""

    class_path: str = DEFAULT_PARTITIONER_CLASS
    params: Mapping[str, str] = field(default_factory=dict)

    @property
    def is_default(self) -> bool:
        return self.class_path == DEFAULT_PARTITIONER_CLASS and not self.params

    def to_json(self) -> dict[str, Any]:
        return {"class": self.class_path, "params": dict(self.params)}

    @classmethod
    def of(cls, data: Mapping[str, Any] | None) -> PartitionerConfig:
        """From `to_json`'s form; None (a store or version from before partitioners could be chosen): the default."""
        if not data:
            return cls()
        return cls(str(data["class"]), {str(k): str(v) for k, v in (data.get("params") or {}).items()})

    def describe(self) -> str:
        """The class's name and its params, for people."""
        params = ", ".join(f"{k}={v}" for k, v in sorted(self.params.items()))
        return self.class_path.rpartition(".")[2] + (f" ({params})" if params else "")


def _load_class(class_path: str) -> PartitionerClass:
    cls = import_class(class_path, "partitioner")
    if not (isinstance(cls, type) and callable(getattr(cls, "partition", None))):
        raise ConfigError(
            f"'{class_path}' is not a partitioner class: it has no partition(serialized_key, partition_count)"
        )
    return cast(PartitionerClass, cls)  # checked as far as Python can: a class with a `partition`


def load_partitioner(
    config: PartitionerConfig, key_schema: AvroSchemaJson, allowed: Collection[str], what: str = ""
) -> VenicePartitioner:
    """The partitioner `config` names, built from its params and the key schema (its decoded JSON). Refused, with one
    ConfigError (its message after `what: `, where the caller names the store or version it loads for): a class
    neither the default nor in `allowed` (PartitionerNotAllowed, before anything is imported), one that cannot be
    loaded, params the class refuses."""
    try:
        return _load(config, key_schema, allowed)
    except ConfigError as exc:
        if not what:
            raise
        raise type(exc)(f"{what}: {exc}") from None


def _load(config: PartitionerConfig, key_schema: AvroSchemaJson, allowed: Collection[str]) -> VenicePartitioner:
    if config.class_path == DEFAULT_PARTITIONER_CLASS and not config.params:
        return DEFAULT_PARTITIONER
    if config.class_path != DEFAULT_PARTITIONER_CLASS and config.class_path not in allowed:
        listed = ", ".join(allowed) or "none besides the default"
        raise PartitionerNotAllowed(
            f"partitioner class '{config.class_path}' is not in {PARTITIONER_CLASSES} (allowed: {listed})"
        )
    cls = _load_class(config.class_path)
    try:
        return cls(dict(config.params), key_schema)
    except ConfigError:
        raise
    except Exception as exc:  # noqa: BLE001 - a class of a user's own: whatever it raises is its refusal
        raise ConfigError(
            f"partitioner '{config.class_path}' refused its params {dict(config.params)}: {exc}"
        ) from None


class VersionPartitioner:
    """A version's partitioner as a reader holds it: loaded with the reader's allowed list at its first use, so that a
    class no longer allowed fails the reads (each with one clear error naming the version) and nothing else. `loaded`
    on a request's hot path, `partition` for one key."""

    def __init__(self, config: PartitionerConfig, key_schema: str, allowed: Collection[str], what: str) -> None:
        self.config = config
        self._key_schema = key_schema  # the JSON text, decoded only for a partitioner other than the default
        self._allowed = tuple(allowed)
        self._what = what
        self._loaded: VenicePartitioner | None = DEFAULT_PARTITIONER if config.is_default else None

    def loaded(self) -> VenicePartitioner:
        loaded = self._loaded
        if loaded is None:
            loaded = self._loaded = load_partitioner(
                self.config, json.loads(self._key_schema), self._allowed, self._what
            )
        return loaded

    def partition(self, serialized_key: bytes, partition_count: int) -> int:
        return self.loaded().partition(serialized_key, partition_count)
