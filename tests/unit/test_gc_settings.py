"""The collector settings of the platform's own processes (`gc_settings`), checked in a process of their own: they
are process-wide, and the test process keeps Python's."""

from __future__ import annotations

import subprocess
import sys


def test_tuning_freezes_start_up_objects_and_collects_the_young_less_often() -> None:
    script = (
        "import gc; from venice_core.host import gc_settings; before = gc.get_threshold(); "
        "gc_settings.tune_for_throughput(); print(before[0], gc.get_threshold()[0], gc.get_freeze_count() > 1000)"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["700", "50000", "True"]
