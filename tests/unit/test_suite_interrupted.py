"""The suite stopped with SIGTERM (a CI job's timeout, `kill`) stops: each worker's running test is interrupted and
no later test starts, even when a test's cleanup fails on the interruption and replaces its KeyboardInterrupt
(`tests/support/interruption.py`'s handlers, loaded here as a plugin into a run of two scripted test files)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from tests.support.profiles import REPO
from venice_core.utils.waiting import poll_until

SCRIPTED = """
import pathlib, subprocess, time

def test_first():
    pathlib.Path("{marks}", "first-{name}").touch()
    try:
        subprocess.run(["sleep", "60"])
    finally:
        raise RuntimeError("a cleanup that fails on the interruption")

def test_second():
    pathlib.Path("{marks}", "second-{name}").touch()
    time.sleep(60)
"""


def test_sigterm_stops_every_worker_after_its_running_test(tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    for name in ("one", "two"):
        (tmp_path / f"test_{name}.py").write_text(SCRIPTED.format(marks=marks, name=name))
    run = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "tests.support.interruption", "-p", "no:cacheprovider", "-n", "2"]
        + ["--dist", "loadfile", "--rootdir", str(tmp_path), "-o", "addopts=", str(tmp_path)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert poll_until(lambda: len(list(marks.glob("first-*"))) == 2, timeout=60, interval=0.1)
        run.send_signal(signal.SIGTERM)
        out, _ = run.communicate(timeout=30)
    finally:
        if run.poll() is None:
            run.kill()
    assert "stopped by signal SIGTERM" in out, out
    assert run.returncode == 2, out  # interrupted
    assert not list(marks.glob("second-*")), out  # no test started after the signal
