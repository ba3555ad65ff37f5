"""What a platform leaves behind when it stops: `leaves_nothing` wraps a stop (`venice down`, a fixture's
teardown) and fails naming every process of the stopped components still running and every port of theirs still
listening. What it finds is killed before it fails, so one leak does not slow the tests after it."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from venice_core.config import ClusterConfig
from venice_core.deployment import airflow as deployment
from venice_core.embedded import airflow, platform
from venice_core.embedded.process import ManagedProcess, members


def platform_parts(config: ClusterConfig) -> tuple[list[ManagedProcess], list[int], list[str]]:
    """The platform's processes, its ports, and the environment entry every Airflow process carries (so a process
    Airflow orphaned before the stop is found too)."""
    planned = platform.plan(config)
    processes = [ManagedProcess(p.name, config.run_dir) for p in planned if not p.name.startswith("airflow-")]
    ports = [port for p in planned if not p.name.startswith("airflow-") for port in p.ports]
    airflow_processes, airflow_ports, markers = airflow_parts(config)
    return processes + airflow_processes, ports + airflow_ports, markers


def airflow_parts(config: ClusterConfig) -> tuple[list[ManagedProcess], list[int], list[str]]:
    ports = [config.airflow.port, config.airflow.port + 1]  # the API, a log server (the scheduler starts none)
    return airflow.processes(config), ports, [f"AIRFLOW_HOME={deployment.home(config)}"]


@contextmanager
def leaves_nothing(
    processes: Sequence[ManagedProcess], ports: Sequence[int], markers: Sequence[str] = ()
) -> Iterator[None]:
    """Around a stop: afterwards no process of `processes` (their sessions, groups and descendants, as they were
    before the stop), and none whose environment holds one of `markers` (`KEY=value`), runs, and no port of
    `ports` is listening."""
    before: dict[int, str] = {}
    for process in processes:
        pid = process.pid()
        if pid is not None:
            before |= {member: _identity(member) for member in members(pid)}
    yield
    left = {pid: _command(pid) for pid, identity in before.items() if identity and _identity(pid) == identity}
    left |= {pid: _command(pid) for pid in _with_environment(markers)}
    listening = sorted(set(ports) & _listening_ports())
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert not left and not listening, f"left running: {left}; ports still listening: {listening}"


def _stat(pid: int) -> list[str] | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] == "Z" else fields


def running(pid: int) -> bool:
    """Is the process running (not gone, not a zombie)?"""
    return _stat(pid) is not None


def _identity(pid: int) -> str:
    """A running process's start time (a pid reused by another process is not it); '' once it is gone."""
    fields = _stat(pid)
    return fields[19] if fields else ""


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:200]
    except OSError:
        return "?"


def _with_environment(markers: Sequence[str]) -> list[int]:
    wanted = [marker.encode() + b"\0" for marker in markers]
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid() or not wanted:
            continue
        try:
            environ = b"\0" + (entry / "environ").read_bytes()
        except OSError:
            continue
        if any(b"\0" + w in environ for w in wanted) and _stat(int(entry.name)):
            found.append(int(entry.name))
    return found


def _listening_sockets() -> dict[int, tuple[str, int]]:
    """Sockets in LISTEN state (TCP, v4 and v6) by inode: (local address as /proc writes it, port)."""
    sockets = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if fields[3] == "0A":
                    address, port = fields[1].rsplit(":", 1)
                    sockets[int(fields[9])] = (address, int(port, 16))
    return sockets


def _listening_ports() -> set[int]:
    return {port for _, port in _listening_sockets().values()}


# 127.0.0.1, ::1 and ::ffff:127.0.0.1 (a JVM's dual-stack socket bound to 127.0.0.1), as /proc/net writes them
LOOPBACK = {"0100007F", "00000000000000000000000001000000", "0000000000000000FFFF00000100007F"}


def listening_beyond_loopback(processes: Sequence[ManagedProcess]) -> dict[int, list[tuple[str, int]]]:
    """The sockets that the processes (their sessions, groups and descendants) listen on at an address other than
    loopback, by pid: what a server bound to 0.0.0.0 exposes to the network."""
    sockets = _listening_sockets()
    found: dict[int, list[tuple[str, int]]] = {}
    for process in processes:
        leader = process.pid()
        for pid in members(leader) if leader is not None else []:
            with contextlib.suppress(OSError):
                for fd in Path(f"/proc/{pid}/fd").iterdir():
                    with contextlib.suppress(OSError):
                        target = os.readlink(fd)
                        inode = int(target[len("socket:[") : -1]) if target.startswith("socket:[") else None
                        if inode in sockets and sockets[inode][0] not in LOOPBACK:
                            found.setdefault(pid, []).append(sockets[inode])
    return found
