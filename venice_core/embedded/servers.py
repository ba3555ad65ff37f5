"""The region servers of the embedded platform: `venice server --region R --instance N`, one process per configured
instance of each region (`region.<r>.instances`, default 1)."""

from __future__ import annotations

import http.client
import json
import sys
from typing import Any

from venice_core.config import ClusterConfig, process_env
from venice_core.embedded.process import ManagedProcess

START_TIMEOUT_SECONDS = 60.0


def name(region: str, instance: int = 0) -> str:
    """`server-<region>` for instance 0 (the single-instance name), `server-<region>.<n>` for the others."""
    return f"server-{region}" if instance == 0 else f"server-{region}.{instance}"


def process(config: ClusterConfig, region: str, instance: int = 0) -> ManagedProcess:
    return ManagedProcess(name(region, config.check_instance(region, instance)), config.run_dir)


def health(config: ClusterConfig, region: str, instance: int = 0) -> dict[str, Any] | None:
    """The instance's `/health` document, None if it does not answer."""
    try:
        conn = http.client.HTTPConnection(config.client_host, config.server_port(region, instance), timeout=2)
        conn.request("GET", "/health")
        response = conn.getresponse()
        return json.loads(response.read()) if response.status == 200 else None
    except (OSError, ValueError):
        return None


def is_healthy(config: ClusterConfig, region: str, instance: int = 0) -> bool:
    return health(config, region, instance) is not None


def start(config: ClusterConfig, region: str, instance: int = 0) -> str:
    proc = process(config, region, instance)
    what = f"region server {region}" + (f" instance {instance}" if config.region(region).instances > 1 else "")
    pid = proc.pid()
    if pid is not None:
        return f"{what} is already running (pid {pid})"
    command = [sys.executable, "-m", "venice_core.cli.main", "server", "--region", region, "--instance", str(instance)]
    proc.start(command, env=process_env(config))
    proc.wait_until_healthy(what, lambda: is_healthy(config, region, instance), START_TIMEOUT_SECONDS, 0.3)
    return f"{what} started (pid {proc.pid()}) on {config.client_host}:{config.server_port(region, instance)}"


def stop(config: ClusterConfig, region: str, instance: int = 0) -> bool:
    return process(config, region, instance).stop(timeout=60.0)
