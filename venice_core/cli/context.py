"""What every command needs: the cluster config and an initialised metadata store (`metadata`, shared with the
Airflow tasks), and `key=value` options."""

from __future__ import annotations

from venice_core.errors import ConfigError
from venice_core.meta.context import metadata

__all__ = ["metadata", "parse_key_values"]


def parse_key_values(pairs: list[str], option: str) -> dict[str, str]:
    """`key=value` options into a dict; a pair without '=' is refused naming the option."""
    result: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{option} expects key=value, got {pair!r}")
        result[key.strip()] = value
    return result
