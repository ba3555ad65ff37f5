"""ManagedProcess.stop and kill leave nothing started under the leader: children that moved to process groups of
their own (as Airflow's task processes do) or to sessions of their own are stopped too."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from pathlib import Path

import pytest

from tests.support.reads import wait_for
from venice_core.embedded.process import ManagedProcess, members

# The leader starts one child in a process group of its own and one in a session of its own, both deaf to SIGTERM
# (a busy task process), then waits; it dies on SIGTERM itself.
LEADER = """
import os, signal, time
for move in (lambda: os.setpgid(0, 0), os.setsid):
    if os.fork() == 0:
        move()
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(300)
        os._exit(0)
time.sleep(300)
"""


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_children_in_groups_and_sessions_of_their_own_are_stopped(tmp_path: Path, how: str) -> None:
    process = ManagedProcess("tree", tmp_path)
    pid = process.start([sys.executable, "-c", LEADER])

    def leader_and_children() -> list[int] | None:
        found = members(pid)
        return found if len(found) >= 3 else None

    started = wait_for("the leader and its two children", leader_and_children, timeout=10, interval=0.05)
    try:
        assert len(started) == 3, started
        if how == "stop":
            assert process.stop(timeout=1.0)
        else:
            process.kill()
        assert members(pid) == [] and process.pid() is None
        assert [p for p in started if _running(p)] == []
    finally:  # whatever the outcome, nothing of the test outlives it
        for p in started:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, signal.SIGKILL)


def _running(pid: int) -> bool:
    """Exists and is not a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


# A leader whose child stays in its process group, deaf to SIGTERM (an Airflow scheduler's executor worker): the
# leader alone is SIGKILLed, as a crash would.
LEADER_WITH_WORKER = """
import os, signal, time
if os.fork() == 0:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(300)
    os._exit(0)
time.sleep(300)
"""


@pytest.mark.parametrize("then", ["start", "stop"])
def test_what_a_killed_leader_left_running_is_stopped_by_the_next_start_or_stop(tmp_path: Path, then: str) -> None:
    process = ManagedProcess("crashed", tmp_path)
    pid = process.start([sys.executable, "-c", LEADER_WITH_WORKER])
    wait_for("the leader and its worker", lambda: len(members(pid)) >= 2, timeout=10, interval=0.05)
    (worker,) = [p for p in members(pid) if p != pid]
    replacement = None
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)  # the test started it: reap it, or it stays a zombie
        assert process.pid() is None and _running(worker)  # down, but its worker is still there
        if then == "start":
            replacement = process.start([sys.executable, "-c", "import time; time.sleep(300)"])
        else:
            assert process.stop(timeout=1.0)
        assert not _running(worker)
    finally:
        for p in (worker, replacement):
            with contextlib.suppress(ProcessLookupError, TypeError):
                os.kill(p, signal.SIGKILL)
        process.stop(timeout=1.0)
