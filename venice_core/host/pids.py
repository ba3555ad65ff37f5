"""Whether a process of this machine runs: the one answer every pid check of the platform gives."""

from __future__ import annotations

import os
from pathlib import Path


def running(pid: int) -> bool:
    """True while `pid` runs. A zombie (exited, not yet reaped) does not: in a container whose first process reaps
    no orphans, a killed server stays a zombie for good, and its pid must not keep its lease."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state != "Z"
