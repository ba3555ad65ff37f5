"""Detached processes with a pid file and a log file, stopped as a whole process group."""

from __future__ import annotations

import contextlib
import os
import pwd
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from venice_core.config import ENV_HOST, ClusterConfig
from venice_core.errors import ComponentError
from venice_core.host.pids import running
from venice_core.host.programs import require_program
from venice_core.utils.waiting import poll_until


def members(leader: int) -> list[int]:
    """Running (not zombie) processes started under `leader`, a process started in a session of its own: its
    process group, its session (Airflow's task processes move to process groups of their own, in the same
    session), and the descendants of either (a child that starts a session of its own). Read from /proc."""
    parents: dict[int, int] = {}
    found: set[int] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] == "Z":
            continue
        pid = int(entry.name)
        parents[pid] = int(fields[1])
        if leader in (int(fields[2]), int(fields[3])):
            found.add(pid)
    grown = True
    while grown:  # descendants, whatever their group or session
        new = {pid for pid, parent in parents.items() if parent in found and pid not in found}
        found |= new
        grown = bool(new)
    return sorted(found)


class _Tree:
    """A leader's processes as they are stopped: those seen once stay tracked, so a child orphaned by its parent's
    exit (no longer a descendant, possibly in a session of its own) is still waited for and killed."""

    def __init__(self, leader: int) -> None:
        self.leader = leader
        self.known: set[int] = set()

    def alive(self) -> bool:
        self.known |= set(members(self.leader))
        self.known = {p for p in self.known if running(p)}
        return bool(self.known) or running(self.leader)

    def kill(self) -> None:
        """SIGKILL the leader's group and every process of the tree until none is left (a parent may still
        fork while it dies)."""
        while self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.leader, signal.SIGKILL)
            for pid in self.known:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.leader, os.WNOHANG)
            time.sleep(0.05)


@dataclass(frozen=True)
class Host:
    """A host of the hosts profile a process starts on: its name and its network namespace."""

    name: str
    namespace: str

    @property
    def namespace_path(self) -> str:
        return f"/run/netns/{self.namespace}"


def host_of(config: ClusterConfig, name: str) -> Host | None:
    """The host the process `name` runs on (None: the machine's own network, hosts off)."""
    namespace = config.hosts.namespace(name)
    return Host(name, namespace) if namespace is not None else None


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
        """The pid of the running process, or None. A stale pid file is removed, unless processes the dead leader
        started are still running (a killed Airflow scheduler's executor workers and log server): `start` and
        `stop` find them through it."""
        pid = self._recorded_pid()
        if pid is None:
            return None
        if running(pid):
            return pid
        if not members(pid):
            self.pid_file.unlink(missing_ok=True)
        return None

    def start(
        self,
        argv: Sequence[str],
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        user: str | None = None,
        host: Host | None = None,
    ) -> int:
        """Start `argv` detached, its output appended to the log file; as `user` (with that user's group and no
        other) when given, which needs root: PostgreSQL's server refuses to run as root; on `host` (in its network
        namespace, told its name in `$VENICE_HOST`) when given."""
        pid = self.pid()
        if pid is not None:
            raise ComponentError(f"{self.name} is already running (pid {pid})")
        self._clear_remains()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        account = pwd.getpwnam(user) if user is not None else None
        command, environment = list(argv), dict(env) if env is not None else None
        if host is not None:
            # nsenter joins the namespace and execs the command: the pid recorded is the command's. It drops to
            # `user` itself, after joining (which needs root): Popen's would drop before.
            ids = [f"--setuid={account.pw_uid}", f"--setgid={account.pw_gid}"] if account is not None else []
            command = [require_program("nsenter", "util-linux"), f"--net={host.namespace_path}", *ids, "--", *command]
            environment = {**(environment if environment is not None else os.environ), ENV_HOST: host.name}
            account = None
        with open(self.log_file, "ab") as log:
            proc = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=environment,
                cwd=cwd,
                start_new_session=True,  # its own process group: stopped as a whole, deaf to the shell's ^C
                user=account.pw_uid if account is not None else None,
                group=account.pw_gid if account is not None else None,
                extra_groups=[] if account is not None else None,
            )
        self.pid_file.write_text(str(proc.pid))
        return proc.pid

    def stop(self, timeout: float = 30.0) -> bool:
        """SIGTERM the process group, SIGKILL whatever is left of its processes (`members`) after `timeout`. All
        of them: a leader that exits on SIGTERM before its children (Airflow's standalone and its scheduler), or
        children in process groups or sessions of their own (Airflow's task processes), must not be left behind.
        Returns False if nothing was running."""
        pid = self._recorded_pid()
        tree = _Tree(pid) if pid is not None else None
        if tree is None or not tree.alive():
            self.pid_file.unlink(missing_ok=True)
            return False
        self._signal_group(tree.leader, signal.SIGTERM)

        def gone() -> bool:
            if not tree.alive():
                return True
            self._reap(tree.leader)
            return False

        poll_until(gone, timeout=timeout, interval=0.1)
        tree.kill()
        self.pid_file.unlink(missing_ok=True)
        return True

    def _clear_remains(self) -> None:
        """SIGKILL what a dead leader left running (its group, its session, their descendants): they hold its
        ports and slots, and nothing else would ever stop them."""
        pid = self._recorded_pid()
        if pid is not None and not running(pid):
            _Tree(pid).kill()
            self.pid_file.unlink(missing_ok=True)

    def kill(self) -> None:
        """SIGKILL, as a crash would: for tests of recovery."""
        pid = self._recorded_pid()
        if pid is not None:
            _Tree(pid).kill()
            self.pid_file.unlink(missing_ok=True)

    def _recorded_pid(self) -> int | None:
        try:
            return int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None

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

        def timed_out(_: bool) -> ComponentError:
            self.stop()  # started, never healthy: not left running
            return ComponentError(f"{label} did not become healthy within {timeout:.0f}s")

        wait_until_healthy([Starting(label, self)], healthy, timeout=timeout, interval=poll, timeout_error=timed_out)

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


@dataclass(frozen=True)
class Starting:
    """A process waited on while it starts: its name in errors, and what is said of its log if it exits (by default
    the last lines of its own log file)."""

    label: str
    process: ManagedProcess
    last_lines: Callable[[], str] | None = None

    def exited(self) -> ComponentError:
        proc = self.process
        said = self.last_lines() if self.last_lines else f"last lines of {proc.log_file}:\n{proc.log_tail()}"
        return ComponentError(f"{self.label} exited during start-up; {said}")


def wait_until_healthy(
    started: Sequence[Starting],
    healthy: Callable[[], bool],
    *,
    timeout: float,
    interval: float,
    timeout_error: Callable[[bool], Exception],
) -> None:
    """The one wait for processes just started: until `healthy()` holds. The first of `started` found dead ends it
    at once (its `exited` error, with the end of its log); past `timeout`, `timeout_error(False)` is raised."""

    def check() -> bool:
        for starting in started:
            if starting.process.pid() is None:
                raise starting.exited()
        return healthy()

    poll_until(check, timeout=timeout, interval=interval, timeout_error=timeout_error)
