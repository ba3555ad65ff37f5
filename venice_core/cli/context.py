"""What every command needs: the cluster config and an initialised metadata store (`metadata`, shared with the
Airflow tasks), and `key=value` options."""

from __future__ import annotations

import os

import typer

from venice_core.config import ENV_PROFILE, PROFILES, profile_path
from venice_core.errors import ConfigError
from venice_core.meta.context import metadata

__all__ = ["ProfileOption", "metadata", "parse_key_values", "use_profile"]


def use_profile(name: str | None) -> None:
    """Run this command (and every process it starts) on a profile's config (`config.PROFILES`)."""
    if name is not None:
        profile_path(name)  # an unknown one is refused here, naming the profiles
        os.environ[ENV_PROFILE] = name


ProfileOption = typer.Option(
    None,
    "--profile",
    help=f"The platform to run on: {', '.join(PROFILES)} (its config in deploy/; default: $VENICE_PROFILE, else "
    "$VENICE_CONFIG or the embedded platform).",
)


def parse_key_values(pairs: list[str], option: str) -> dict[str, str]:
    """`key=value` options into a dict; a pair without '=' is refused naming the option."""
    result: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{option} expects key=value, got {pair!r}")
        result[key.strip()] = value
    return result
