"""Detached processes with a pid file and a log file, stopped as a whole process group."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from venice_core.errors import ComponentError, MissingDependency


def require_program(name: str, install_hint: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise MissingDependency(f"'{name}' is not installed or not on PATH: install {install_hint}")
    return path


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (exited, not yet reaped) is not running
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    except (OSError, IndexError):
        return True


def _group_members(pgid: int) -> list[int]:
    """Running (not zombie) processes of a process group, read from /proc."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:
            members.append(int(entry.name))
    return members


@dataclass(frozen=True)
class ManagedProcess:
    name: str
    run_dir: Path

    @property
    def pid_file(self) -> Path:
        return self.run_dir / f"{self.name}.pid"

    @property
    def log_file(self) -> Path:
        return self.run_dir / f"{self.name}.log"

    def pid(self) -> int | None:
        """The pid of the running process, or None (a stale pid file is removed)."""
        try:
            pid = int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None
        if _alive(pid):
            return pid
        self.pid_file.unlink(missing_ok=True)
        return None

    def start(self, argv: Sequence[str], env: Mapping[str, str] | None = None, cwd: Path | None = None) -> int:
        running = self.pid()
        if running is not None:
            raise ComponentError(f"{self.name} is already running (pid {running})")
        self.run_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_file, "ab") as log:
            proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=dict(env) if env is not None else None,
                cwd=cwd,
                start_new_session=True,  # its own process group: stopped as a whole, deaf to the shell's ^C
            )
        self.pid_file.write_text(str(proc.pid))
        return proc.pid

    def stop(self, timeout: float = 30.0) -> bool:
        """SIGTERM the process group, SIGKILL what is left of it after `timeout`. The whole group: a leader that
        exits on SIGTERM before its children (Airflow's standalone and its scheduler) must not leave them behind.
        Returns False if nothing was running."""
        pid = self.pid()
        if pid is None:
            return False
        self._signal_group(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while (_alive(pid) or _group_members(pid)) and time.monotonic() < deadline:
            self._reap(pid)
            time.sleep(0.1)
        if _alive(pid) or _group_members(pid):
            self._signal_group(pid, signal.SIGKILL)
            while _alive(pid) or _group_members(pid):
                self._reap(pid)
                time.sleep(0.05)
        self._reap(pid)
        self.pid_file.unlink(missing_ok=True)
        return True

    def kill(self) -> None:
        """SIGKILL, as a crash would: for tests of recovery."""
        pid = self.pid()
        if pid is not None:
            self._signal_group(pid, signal.SIGKILL)
            while _alive(pid):
                time.sleep(0.05)
            self._reap(pid)
            self.pid_file.unlink(missing_ok=True)

    @staticmethod
    def _signal_group(pid: int, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, sig)

    @staticmethod
    def _reap(pid: int) -> None:
        with contextlib.suppress(ChildProcessError):  # not our child: init reaps it
            os.waitpid(pid, os.WNOHANG)

    def wait_until_healthy(self, label: str, healthy: Callable[[], bool], timeout: float, poll: float) -> None:
        """After start: return once `healthy()` holds; if the process dies or `timeout` passes, stop it and raise
        one clear error (with the end of its log when it died)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.pid() is None:
                raise ComponentError(
                    f"{label} exited during start-up; last lines of {self.log_file}:\n{self.log_tail()}"
                )
            if healthy():
                return
            time.sleep(poll)
        self.stop()
        raise ComponentError(f"{label} did not become healthy within {timeout:.0f}s")

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""
