"""The suite stopped by SIGTERM ends as on Ctrl-C, its fixtures torn down: a pytest plugin of its own (registered by
`tests/conftest.py`), light enough for `tests/unit/test_suite_interrupted.py` to load alone into the runs it stops."""

from __future__ import annotations

import functools
import signal

import pytest


def pytest_sessionstart(session: pytest.Session) -> None:
    """A run stopped with SIGTERM (`kill`, a CI job's timeout) ends as on Ctrl-C: pytest then tears down the
    session's fixtures, so the platforms, brokers and Airflows it started stop with it. Python's default for SIGTERM
    ends the process at once, leaving them running and holding their ports. A parallel run's controller passes the
    signal on to its workers, which tear down and report their interruption: its own interrupt would end them at
    once, before their teardown."""
    if not hasattr(session.config, "workerinput") and session.config.pluginmanager.hasplugin("dsession"):
        signal.signal(signal.SIGTERM, _pass_on_to_workers)
    else:
        signal.signal(signal.SIGTERM, functools.partial(_interrupted, session))


def _pass_on_to_workers(signum: int, _frame: object) -> None:
    import psutil

    signal.signal(signum, _once)  # a worker signalled twice would cut its own teardown short
    for worker in psutil.Process().children():
        worker.send_signal(signum)


def _once(_signum: int, _frame: object) -> None:
    """A repeated signal, let pass (a handler, not SIG_IGN, which the processes a teardown starts would inherit)."""


def _interrupted(session: pytest.Session, signum: int, _frame: object) -> None:
    """The running test is interrupted, and no other test starts: a test's cleanup that fails on the interruption
    (a server it stops already gone) replaces the KeyboardInterrupt with its own error, and the worker, seeing a
    failed test, would go on with the next (seen: two of three workers ran on after a SIGTERM)."""
    signal.signal(signum, _once)  # the teardown runs to its end (SIGKILL still ends it)
    name = signal.Signals(signum).name
    session.shouldstop = f"stopped by signal {name}"
    raise KeyboardInterrupt(f"stopped by signal {name}")
