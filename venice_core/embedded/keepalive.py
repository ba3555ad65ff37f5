"""`python -m venice_core.embedded.keepalive -- COMMAND...`: run a command, and start it again whenever it exits on
its own, as systemd's `Restart=always` or a container's restart policy would. Airflow's scheduler, triggerer and
dag-processors exit when their database goes away for a few seconds (a PostgreSQL restart: Airflow retries a
transaction three times within ~3 s, then gives up, expecting a supervisor to start it again); on the cluster
profile's database server each runs under this.

The command runs in a process group of its own: SIGTERM or SIGINT to this process (a managed process's stop
signals its group, which is this process's alone) is passed on to the command once, and ends the loop. A command
that exits within `--first-run` seconds of its first start is not started again: it could not start (a setting, a
missing program), and the caller is told at once, by this process's exit with its status. Each later start waits
a second, doubled after each quick exit up to 30 s, and back to a second after a run of a minute or more.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
from types import FrameType

from venice_core.utils.waiting import poll_until

MIN_DELAY_SECONDS = 1.0
MAX_DELAY_SECONDS = 30.0
STEADY_SECONDS = 60.0  # a run this long resets the delay


def _say(text: str) -> None:
    print(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} keepalive: {text}", file=sys.stderr, flush=True)


def run(argv: list[str], first_run: float) -> int:
    stopping: list[int] = []
    child: subprocess.Popen[bytes] | None = None

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        if not stopping and child is not None and child.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child.pid, signum)
        stopping.append(signum)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    delay, started_once = MIN_DELAY_SECONDS / 2, False
    while True:
        started = time.monotonic()
        child = subprocess.Popen(argv, process_group=0)
        code = child.wait()
        ran = time.monotonic() - started
        if stopping:
            return code if code >= 0 else 128 - code
        if not started_once and ran < first_run:
            _say(f"{argv[0]} exited ({code}) {ran:.0f} s after its first start: not starting it again")
            return code if code >= 0 else 128 - code
        started_once = True
        delay = MIN_DELAY_SECONDS if ran >= STEADY_SECONDS else min(delay * 2, MAX_DELAY_SECONDS)
        _say(f"{' '.join(argv[:3])} exited ({code}) after {ran:.0f} s: starting it again in {delay:.0f} s")
        poll_until(lambda: bool(stopping), timeout=delay, interval=0.1)  # a stop ends the delay
        if stopping:
            return 0


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m venice_core.embedded.keepalive")
    parser.add_argument("--first-run", type=float, default=30.0, help="seconds a first run must last to be retried")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given")
    return run(command, args.first_run)


if __name__ == "__main__":
    sys.exit(main())
