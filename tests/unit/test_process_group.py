"""ManagedProcess.stop leaves nothing of the process group behind, even when the leader exits first."""

from __future__ import annotations

import time
from pathlib import Path

from venice_core.embedded.process import ManagedProcess, members


def test_stop_kills_children_that_outlive_their_leader(tmp_path: Path) -> None:
    process = ManagedProcess("group", tmp_path)
    # The leader dies on SIGTERM; its child ignores SIGTERM (as a busy scheduler may) and would be orphaned.
    pid = process.start(["bash", "-c", '(trap "" TERM; sleep 300) & wait'])
    deadline = time.monotonic() + 10
    while len(members(pid)) < 2 and time.monotonic() < deadline:  # bash and its child
        time.sleep(0.05)
    assert len(members(pid)) >= 2
    assert process.stop(timeout=1.0)
    assert members(pid) == [] and process.pid() is None
