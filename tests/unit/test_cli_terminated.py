"""SIGTERM to a `venice` command is taken as Ctrl-C is: the command's cleanup runs (a push in flight is stopped, its
version killed), then it exits 143 saying so. Before, SIGTERM (`timeout`, a closed terminal) killed a `--local` push
outright and left its version STARTED: every later push of the store was refused as "already in progress"."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

SCRIPT = """
import sys, time
from venice_core.cli.main import app, main

@app.command("sleepy")
def sleepy() -> None:
    try:
        print("started", flush=True)
        time.sleep(60)
    finally:
        open(sys.argv[1], "w").write("cleaned up")

main(["sleepy"])
"""


def test_sigterm_runs_the_commands_cleanup_and_exits_143(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    process = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(marker)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert process.stdout is not None and process.stdout.readline().strip() == "started"
    started = time.monotonic()
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 143, stderr
    assert "terminated" in stderr and time.monotonic() - started < 10
    assert marker.read_text() == "cleaned up"
