"""`keepalive` starts its command again when it exits on its own, not when it could not start (its first run
short), and stops with it on SIGTERM."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.support.reads import wait_for


def _keepalive(first_run: float, script: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "venice_core.embedded.keepalive", "--first-run", str(first_run), "--", "bash", "-c",
         script],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def test_a_command_that_exits_is_started_again_until_sigterm(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    proc = _keepalive(0, f"echo run >> {runs}; sleep 0.2; exit 3")
    wait_for("a second run", lambda: runs.exists() and len(runs.read_text().split()) >= 2, timeout=20, interval=0.1)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=20)
    assert "exited (3)" in err and "starting it again in 1 s" in err


def test_sigterm_is_passed_on_and_ends_the_loop(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    proc = _keepalive(0, f"trap 'echo term >> {runs}; exit 0' TERM; echo run >> {runs}; sleep 30 & wait")
    wait_for("the command running", lambda: runs.exists(), timeout=20, interval=0.1)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 0
    assert runs.read_text().split() == ["run", "term"]


def test_a_command_that_fails_at_its_first_start_is_not_started_again() -> None:
    started = time.monotonic()
    proc = _keepalive(30, "exit 4")
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 4 and time.monotonic() - started < 15
    assert "not starting it again" in err
