"""A throwaway embedded platform: its own data dir and free loopback ports, for tests and benchmarks."""

from __future__ import annotations

import socket
from pathlib import Path

from venice_core.config import CONFIG_FILE_NAME


def free_ports(count: int) -> list[int]:
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for sock in sockets:
            sock.close()


def write_sandbox_config(home: Path, extra: dict[str, str] | None = None) -> Path:
    """Write `<home>/venice.properties` with free ports for Kafka and the region servers; returns its path."""
    home.mkdir(parents=True, exist_ok=True)
    kafka_port, controller_port, server_base, airflow_port = free_ports(4)
    settings = {
        "data.dir": str(home),
        "kafka.embedded.port": str(kafka_port),
        "kafka.embedded.controller.port": str(controller_port),
        # region i listens on base + i: leave room for a handful of regions
        "server.port.base": str(server_base),
        # Airflow is started only by what needs it (it is the heaviest component on two cores).
        "airflow.enabled": "false",
        "airflow.port": str(airflow_port),
        **(extra or {}),
    }
    path = home / CONFIG_FILE_NAME
    path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    return path
