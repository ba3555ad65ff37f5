"""Cluster configuration: one `key=value` properties file over built-in defaults, single keys overridden from the
environment (`VENICE__<KEY>`), as one typed, frozen `ClusterConfig`.

- `keys`: every key declared once (name, kind, default, where it lands, description, environment override);
- `kinds`: how a key's text becomes its typed value, or one error naming the key and where it was set;
- `model`: the typed config, grouped by what each setting configures (kafka, spark, airflow, server, hooks, ...);
- `build`: the config from the declarations (a loop), the defaults that depend on other keys, the cross-key checks;
- `choice`: which file is in effect (`$VENICE_CONFIG`, a profile, the data dir's), and what the processes the
  platform starts inherit of that choice;
- `reference`: the configuration reference, rendered from the declarations."""

from __future__ import annotations

from collections.abc import Mapping

from venice_core.config.build import (
    Setting,
    build_config,
    embedded_postgres_url,
    kafka_node_name,
    libpq_environment,
    postgres_client_files,
)
from venice_core.config.choice import (
    CONFIG_FILE_NAME,
    ENV_CONFIG,
    ENV_DATA_DIR,
    ENV_KAFKA_CLIENT,
    ENV_PROFILE,
    PROFILES,
    PROFILES_DIR,
    config_path,
    load_config,
    parse_properties,
    process_env,
    profile_path,
)
from venice_core.config.hosts import ENV_HOST, GATEWAY, LOOPBACK, HostsSettings, server_host
from venice_core.config.keys import DEFAULTS, ENV_PREFIX, HOOKS_CONFIGS_PREFIX, KEYS, Key
from venice_core.config.kinds import parse_bool
from venice_core.config.model import (
    AirflowSettings,
    ClientSettings,
    ClusterConfig,
    EmbeddedServerConfig,
    FailurePolicy,
    HookSettings,
    KafkaSettings,
    RegionConfig,
    RolloutSettings,
    SecuritySettings,
    ServerLimits,
    ServerSettings,
    SparkSettings,
)
from venice_core.config.reference import reference_markdown


def conf_flag(confs: Mapping[str, object], key: str) -> bool:
    """A boolean conf of a push or a repush: false when it is not set, else `parse_bool`'s."""
    return key in confs and parse_bool(confs[key], key)


__all__ = [
    "ENV_HOST",
    "ENV_KAFKA_CLIENT",
    "GATEWAY",
    "LOOPBACK",
    "HostsSettings",
    "kafka_node_name",
    "server_host",
    "FailurePolicy",
    "CONFIG_FILE_NAME",
    "DEFAULTS",
    "ENV_CONFIG",
    "ENV_DATA_DIR",
    "ENV_PREFIX",
    "ENV_PROFILE",
    "HOOKS_CONFIGS_PREFIX",
    "KEYS",
    "PROFILES",
    "PROFILES_DIR",
    "AirflowSettings",
    "ClientSettings",
    "ClusterConfig",
    "EmbeddedServerConfig",
    "HookSettings",
    "KafkaSettings",
    "Key",
    "RegionConfig",
    "RolloutSettings",
    "SecuritySettings",
    "ServerLimits",
    "ServerSettings",
    "Setting",
    "SparkSettings",
    "build_config",
    "conf_flag",
    "config_path",
    "embedded_postgres_url",
    "libpq_environment",
    "postgres_client_files",
    "load_config",
    "parse_bool",
    "parse_properties",
    "process_env",
    "profile_path",
    "reference_markdown",
]
