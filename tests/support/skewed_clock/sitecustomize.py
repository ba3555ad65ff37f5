"""On a process's PYTHONPATH with VENICE_TEST_CLOCK_SKEW_SECONDS set, this makes that process's wall clock
(`time.time`, `time.time_ns`) read that many seconds off, as on a machine whose clock is wrong. Its monotonic clock
is left alone, as are other processes' clocks (`tests/integration/test_replicated_regions.py`'s skewed instances).

Debian's libfaketime (0.9.10), the usual tool, breaks Python 3.11's `time.sleep`: EINVAL from its
`clock_nanosleep` with FAKETIME_DONT_FAKE_MONOTONIC, a hang without it (even at an offset of +0s)."""

import os
import time

_SKEW = float(os.environ.get("VENICE_TEST_CLOCK_SKEW_SECONDS", "0"))

if _SKEW:
    _wall, _wall_ns = time.time, time.time_ns
    time.time = lambda: _wall() + _SKEW
    time.time_ns = lambda: _wall_ns() + int(_SKEW * 1_000_000_000)
