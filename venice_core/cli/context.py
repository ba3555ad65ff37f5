"""What every command needs: the cluster config and an initialised metadata store."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from venice_core.config import ClusterConfig, load_config
from venice_core.errors import ConfigError
from venice_core.meta import MetadataStore


@contextmanager
def metadata() -> Iterator[tuple[ClusterConfig, MetadataStore]]:
    config = load_config()
    meta = MetadataStore(config.metadata_db_url)
    try:
        meta.check_migrated()
        yield config, meta
    finally:
        meta.dispose()


def parse_key_values(pairs: list[str], option: str) -> dict[str, str]:
    """`key=value` options into a dict; a pair without '=' is refused naming the option."""
    result: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{option} expects key=value, got {pair!r}")
        result[key.strip()] = value
    return result
