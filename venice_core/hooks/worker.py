"""One hook call in a worker process of its own, which can be killed: Python cannot interrupt a thread stuck in a
loop or a blocking call (a sleep, a wait, a socket read), but a process can be SIGKILLed and its slot freed.

The worker is forked from the caller, so the call runs on the caller's objects as they are when it starts (the
hook instance, its configs, a test's hand-moved clock) and needs nothing pickled; what the call changes there is
the worker's own and ends with it. It sends its answer back through a pipe, length-prefixed JSON as its last act,
and exits with `os._exit` (nothing of the caller's, such as atexit handlers or buffered output, runs twice).

- Forks are serialised (`_FORK_LOCK`): a worker forked while another's pipe is still open in the caller would hold
  its write end and hide that worker's end.
- A worker leads a process group of its own, killed whole when the call ends: what a hook started dies with it.
  Its caller reaps it later (`reap`): a process's exit takes the kernel a while (~10 ms for an Airflow task's size),
  which need not hold the next call back.
- A worker dies with its caller (Linux's parent-death signal), so a caller killed mid-call (an Airflow task
  SIGKILLed) leaves no worker running; the caller reaps its workers itself before it returns.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import struct
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Answer = dict[str, str]
_LENGTH = struct.Struct(">I")
_FORK_LOCK = threading.Lock()
_PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform == "linux" else None


@dataclass
class Worker:
    pid: int
    pipe: int  # the read end of the worker's answer
    started: float  # time.monotonic() when it was forked
    received: bytearray = field(default_factory=bytearray)
    closed: bool = False

    def read(self) -> bool:
        """Take what the pipe holds; True once the answer is whole or the worker closed the pipe without one."""
        try:
            chunk = os.read(self.pipe, 65536)
        except BlockingIOError:
            return False
        if not chunk:
            self.closed = True
        self.received += chunk
        return self.closed or self.answer() is not None

    def answer(self) -> Answer | None:
        """The worker's answer, once whole."""
        if len(self.received) < _LENGTH.size:
            return None
        (size,) = _LENGTH.unpack_from(self.received)
        if len(self.received) < _LENGTH.size + size:
            return None
        answer: Answer = json.loads(self.received[_LENGTH.size : _LENGTH.size + size])
        return answer

    def kill(self) -> None:
        """SIGKILL whatever is left of the worker's process group (after its answer: what the hook left running)."""
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):  # no group of its own yet: the worker alone
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)

    def reap(self) -> str:
        """Wait for the worker's end and close its pipe; returns how it ended ("exit status 3", "killed by
        SIGKILL")."""
        try:
            _, status = os.waitpid(self.pid, 0)
        except ChildProcessError:  # reaped by someone else (SIGCHLD ignored)
            status = 0
        finally:
            os.close(self.pipe)
        code = os.waitstatus_to_exitcode(status)
        return f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"


def start(call: Callable[[], Answer]) -> Worker:
    """Fork a worker that runs `call` and sends back what it returns (a JSON object of strings), or
    `{"error": "<exception type>: <message>"}` if it raises."""
    _flush()  # else the worker would inherit, and write again, what is buffered here
    caller = os.getpid()
    with _FORK_LOCK:
        read_end, write_end = os.pipe()
        started = time.monotonic()
        pid = os.fork()
        if pid == 0:
            _serve(call, write_end, caller)  # never returns
        os.close(write_end)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.setpgid(pid, pid)  # the worker does it too: whichever runs first, it leads its group before it is killed
    os.set_blocking(read_end, False)
    return Worker(pid, read_end, started)


def _serve(call: Callable[[], Answer], pipe: int, caller: int) -> None:
    status = 1
    try:
        os.setpgid(0, 0)
        if _LIBC is not None:
            _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != caller:  # the caller died before the parent-death signal was set
            return
        for signum in (signal.SIGTERM, signal.SIGINT):  # the caller's handlers (an Airflow task's) are not the worker's
            signal.signal(signum, signal.SIG_DFL)
        try:
            answer: Any = call()
        except BaseException as exc:  # noqa: BLE001 - whatever the call raises is its answer
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        _flush()
        body = json.dumps(answer).encode()
        view = memoryview(_LENGTH.pack(len(body)) + body)
        while view:
            view = view[os.write(pipe, view) :]
        status = 0
    finally:
        os._exit(status)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()
