"""ManagedProcess.stop and kill leave nothing started under the leader: children that moved to process groups of
their own (as Airflow's task processes do) or to sessions of their own are stopped too."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from pathlib import Path

import pytest

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
    deadline = time.monotonic() + 10
    while len(members(pid)) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    started = members(pid)
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
