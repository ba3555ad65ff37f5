"""ManagedProcess.stop leaves nothing of the process group behind, even when the leader exits first."""

from __future__ import annotations

from pathlib import Path

from tests.support.reads import wait_for
from venice_core.embedded.process import ManagedProcess, members


def test_stop_kills_children_that_outlive_their_leader(tmp_path: Path) -> None:
    process = ManagedProcess("group", tmp_path)
    # The leader dies on SIGTERM; its child ignores SIGTERM (as a busy scheduler may) and would be orphaned.
    pid = process.start(["bash", "-c", '(trap "" TERM; sleep 300) & wait'])
    wait_for("bash and its child", lambda: len(members(pid)) >= 2, timeout=10, interval=0.05)
    assert process.stop(timeout=1.0)
    assert members(pid) == [] and process.pid() is None
