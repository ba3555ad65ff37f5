"""The cluster profile (deploy/cluster.properties) in a sandbox: its own data dir and free loopback ports, every
other setting as the profile has it."""

from __future__ import annotations

import os
from pathlib import Path

from tests.support.platform import PlatformEnv
from tests.support.sandbox import REGION_PORT_ROOM, free_ports
from venice_core.config import CONFIG_FILE_NAME, ENV_CONFIG, ENV_PROFILE, parse_properties, profile_path

# The profile's ports, each moved to a block of free ones (a key's port and the ones after it: the brokers, the
# region servers, Airflow's log servers, the Spark workers' UIs).
PORT_KEYS = (
    "kafka.embedded.port",
    "kafka.embedded.controller.port",
    "server.port.base",
    "airflow.port",
    "spark.standalone.ui.port",
    "postgres.embedded.port",
    "redis.embedded.port",
)


def write_cluster_config(home: Path, extra: dict[str, str] | None = None) -> Path:
    """`<home>/venice.properties`: the cluster profile on free ports in `home`, with `extra` settings over it."""
    profile = profile_path("cluster")
    assert profile is not None
    settings = {key: s.value for key, s in parse_properties(profile.read_text(), str(profile)).items()}
    ports = free_ports(len(PORT_KEYS) + 1, block=REGION_PORT_ROOM)
    settings.update({key: str(port) for key, port in zip(PORT_KEYS, ports, strict=False)})
    settings["spark.master"] = f"spark://127.0.0.1:{ports[-1]}"
    settings["data.dir"] = str(home)
    settings.update(extra or {})
    home.mkdir(parents=True, exist_ok=True)
    path = home / CONFIG_FILE_NAME
    path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    return path


def make_cluster_env(home: Path, extra: dict[str, str] | None = None) -> PlatformEnv:
    properties = write_cluster_config(home, extra)
    env = {**os.environ, ENV_CONFIG: str(properties)}
    env.pop("VENICE_HOME", None)
    env.pop(ENV_PROFILE, None)
    return PlatformEnv(home=home, properties=properties, env=env)
