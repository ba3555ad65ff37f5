"""A throwaway embedded platform's config: its own data dir and free loopback ports, for the tests and the benchmarks
(bench/ imports it from here)."""

from __future__ import annotations

import os
import random
import socket
from pathlib import Path

from venice_core.config import CONFIG_FILE_NAME, parse_properties, profile_path

# Below Linux's ephemeral range (32768-60999): a port picked there can be taken by any outgoing connection's
# local end between the pick and the server's bind, and a region server needs base + i free for every region.
PORT_RANGE = (20000, 32000)
REGION_PORT_ROOM = 12
# Set by the test suite for each of its parallel workers ("LOW-HIGH"): workers pick from disjoint slices of
# PORT_RANGE, so two never pick one free port at the same moment and collide at the bind.
ENV_PORT_RANGE = "VENICE_SANDBOX_PORT_RANGE"


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def port_range() -> tuple[int, int]:
    """Where this process picks ports: PORT_RANGE, or the slice of it `ENV_PORT_RANGE` gives."""
    text = os.environ.get(ENV_PORT_RANGE)
    if not text:
        return PORT_RANGE
    low, _, high = text.partition("-")
    return int(low), int(high)


def free_ports(count: int, block: int = 1) -> list[int]:
    """`count` free loopback ports outside the ephemeral range, each the start of `block` consecutive free ports."""
    low, high = port_range()
    chosen: list[int] = []
    while len(chosen) < count:
        start = random.randrange(low, high - block)
        span = range(start, start + block)
        if any(p in range(c, c + block) for c in chosen for p in span):
            continue
        if all(_bindable(p) for p in span):
            chosen.append(start)
    return chosen


def write_sandbox_config(home: Path, extra: dict[str, str] | None = None) -> Path:
    """Write `<home>/venice.properties` with free ports for Kafka and the region servers; returns its path."""
    home.mkdir(parents=True, exist_ok=True)
    kafka_port, controller_port, server_base, airflow_port = free_ports(4, block=REGION_PORT_ROOM)
    settings = {
        "data.dir": str(home),
        "kafka.embedded.port": str(kafka_port),
        "kafka.embedded.controller.port": str(controller_port),
        # instance n of region i listens on base + n * regions + i: room for a few regions and instances
        "server.port.base": str(server_base),
        # Airflow is started only by what needs it (it is the heaviest component on two cores).
        "airflow.enabled": "false",
        "airflow.port": str(airflow_port),
        **(extra or {}),
    }
    path = home / CONFIG_FILE_NAME
    path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    return path


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
