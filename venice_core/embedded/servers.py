"""The region servers of the embedded platform: one `venice server --region R` process per region."""

from __future__ import annotations

import http.client
import sys

from venice_core.config import ClusterConfig, process_env
from venice_core.embedded.process import ManagedProcess

START_TIMEOUT_SECONDS = 60.0


def process(config: ClusterConfig, region: str) -> ManagedProcess:
    return ManagedProcess(f"server-{region}", config.run_dir)


def _host(config: ClusterConfig) -> str:
    return "127.0.0.1" if config.server_host == "0.0.0.0" else config.server_host


def is_healthy(config: ClusterConfig, region: str) -> bool:
    try:
        conn = http.client.HTTPConnection(_host(config), config.server_port(region), timeout=2)
        conn.request("GET", "/health")
        return conn.getresponse().status == 200
    except OSError:
        return False


def start(config: ClusterConfig, region: str) -> str:
    proc = process(config, region)
    pid = proc.pid()
    if pid is not None:
        return f"region server {region} is already running (pid {pid})"
    proc.start([sys.executable, "-m", "venice_core.cli.main", "server", "--region", region], env=process_env(config))
    proc.wait_until_healthy(f"region server {region}", lambda: is_healthy(config, region), START_TIMEOUT_SECONDS, 0.3)
    return f"region server {region} started (pid {proc.pid()}) on {_host(config)}:{config.server_port(region)}"


def stop(config: ClusterConfig, region: str) -> bool:
    return process(config, region).stop(timeout=60.0)
