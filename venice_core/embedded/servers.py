"""The region servers of the embedded platform: `venice server --region R --instance N`, one process per configured
instance of each region (`region.<r>.instances`, default 1)."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from venice_core.client import serving
from venice_core.config import ClusterConfig, process_env, server_host
from venice_core.embedded.process import ManagedProcess, host_of
from venice_core.security import principals, tls

START_TIMEOUT_SECONDS = 60.0


def name(region: str, instance: int = 0) -> str:
    """`server-<region>` for instance 0 (the single-instance name), `server-<region>.<n>` for the others."""
    return server_host(region, instance)


def process(config: ClusterConfig, region: str, instance: int = 0) -> ManagedProcess:
    return ManagedProcess(name(region, config.check_instance(region, instance)), config.run_dir)


def health(config: ClusterConfig, region: str, instance: int = 0) -> dict[str, Any] | None:
    """The instance's `/health` document, None if it does not answer."""
    host, port = config.instance_host(region, instance), config.server_port(region, instance)
    return serving.health(host, port, timeout=2, tls=tls.client_context(config))


def is_healthy(config: ClusterConfig, region: str, instance: int = 0) -> bool:
    return health(config, region, instance) is not None


def answered_by(config: ClusterConfig, region: str, instance: int, pid: int | None) -> bool:
    """The instance's port answers `/health` from process `pid` (not from another process on that port: one
    started by hand, or a stale instance)."""
    answer = health(config, region, instance)
    return answer is not None and pid is not None and answer.get("pid") == pid


def label(config: ClusterConfig, region: str, instance: int = 0) -> str:
    """How messages name an instance: `region server dc-1`, or `... instance 2` where the region has several."""
    return f"region server {region}" + (f" instance {instance}" if config.region(region).instances > 1 else "")


def start(config: ClusterConfig, region: str, instance: int = 0, extra_env: Mapping[str, str] | None = None) -> str:
    """Start the instance unless it runs; `extra_env` is added to its environment (a test's skewed clock)."""
    proc = process(config, region, instance)
    what = label(config, region, instance)
    pid = proc.pid()
    if pid is not None:
        return f"{what} is already running (pid {pid})"
    command = [sys.executable, "-m", "venice_core.cli.main", "server", "--region", region, "--instance", str(instance)]
    env = {**process_env(config), **principals.client_env(config, principals.region(region)), **(extra_env or {})}
    proc.start(command, env=env, host=host_of(config, proc.name))
    started = proc.pid()
    proc.wait_until_healthy(what, lambda: answered_by(config, region, instance, started), START_TIMEOUT_SECONDS, 0.3)
    where = f"{config.instance_host(region, instance)}:{config.server_port(region, instance)}"
    return f"{what} started (pid {proc.pid()}) on {where}"


def stop(config: ClusterConfig, region: str, instance: int = 0) -> bool:
    return process(config, region, instance).stop(timeout=60.0)


def unconfigured(config: ClusterConfig) -> list[ManagedProcess]:
    """Instances `venice up` started that the config no longer has (`region.<r>.instances` lowered, or a region
    removed) and that still run: `venice status` shows them and `venice down` stops them too."""
    configured = {name(region, instance) for region, instance in config.instances}
    found = []
    for pid_file in sorted(config.run_dir.glob("server-*.pid")):
        if pid_file.stem not in configured:
            proc = ManagedProcess(pid_file.stem, config.run_dir)
            if proc.pid() is not None:
                found.append(proc)
    return found
