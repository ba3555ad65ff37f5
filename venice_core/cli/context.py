"""What every command needs: the cluster config and an initialised metadata store (`metadata`, shared with the
Airflow tasks), and `key=value` options."""

from __future__ import annotations

import os

import typer

from venice_core.config import ENV_KAFKA_CLIENT, ENV_PROFILE, PROFILES, load_config, profile_path
from venice_core.errors import ConfigError, VeniceError
from venice_core.meta.context import metadata
from venice_core.security import principals

__all__ = ["ProfileOption", "metadata", "parse_key_values", "use_kafka_principal", "use_profile"]


def use_profile(name: str | None) -> None:
    """Run this command (and every process it starts) on a profile's config (`config.PROFILES`)."""
    if name is not None:
        profile_path(name)  # an unknown one is refused here, naming the profiles
        os.environ[ENV_PROFILE] = name


def use_kafka_principal(principal: str = principals.ADMIN, replace: bool = False) -> None:
    """This command's Kafka clients act as `principal` on a secured platform (an operator's command as the platform's
    admin), unless the process was started as another (`replace`: whatever it was started as). The path of the
    credentials file goes into this process's environment, never the secret; a config that cannot be read is left
    for the command to report."""
    if os.environ.get(ENV_KAFKA_CLIENT) and not replace:
        return
    try:
        config = load_config()
    except VeniceError:
        return
    if config.security.enabled:
        os.environ[ENV_KAFKA_CLIENT] = str(principals.client_path(config, principal))


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
