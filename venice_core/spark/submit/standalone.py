"""A standalone Spark master as a client sees it, through its web UI (the master `venice up` runs, or any other at
`spark.master` with its UI on `spark.standalone.ui.port`): its state, and the applications of a job's earlier try
killed.

Why kill: a job's driver runs in client mode on the Celery worker of its step. When that worker's host is cut off the
network, the driver keeps running there and its executors keep their cores: no connection closes, so neither the
master nor the executors learn it is gone for minutes. The step's retry, on another worker, would wait for cores that
never come back. Before it submits, the retry kills every application of its own name still on the master (the name
holds the store and version: only an earlier try of the same step has it)."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from venice_core.config import ClusterConfig

LIVE_STATES = frozenset({"RUNNING", "WAITING", "SUBMITTED"})


def ui_url(config: ClusterConfig, master: str | None = None) -> str | None:
    """The web UI of the standalone master at `master` (default `spark.master`), None for another kind of master."""
    url = master or config.spark.master
    if not url.startswith("spark://") or "," in url:  # a master with standbys: whichever is active is not known here
        return None
    host = url.removeprefix("spark://").rpartition(":")[0]
    return f"http://{host}:{config.spark.ui_port}"


def master_state(config: ClusterConfig, master: str | None = None, timeout: float = 2.0) -> dict[str, Any] | None:
    """The master's state as its web UI reports it (`/json/`: workers, running and completed applications), or
    None while it does not answer (or is no standalone master)."""
    base = ui_url(config, master)
    if base is None:
        return None
    try:
        with urllib.request.urlopen(f"{base}/json/", timeout=timeout) as response:
            state = json.load(response)
    except (urllib.error.URLError, OSError, ValueError):
        return None
    return state if isinstance(state, dict) else None


def kill_applications(config: ClusterConfig, master: str, name: str, timeout: float = 5.0) -> list[str] | None:
    """Kill the master's live applications named `name` (an earlier try's): their executors release their cores.
    Returns the ids killed (none for a master that is no standalone one), None when its web UI does not answer."""
    base = ui_url(config, master)
    if base is None:
        return []
    state = master_state(config, master, timeout)
    if state is None:
        return None
    killed = []
    for app in state.get("activeapps", []):
        if app.get("name") == name and app.get("state") in LIVE_STATES:
            body = urllib.parse.urlencode({"id": app["id"], "terminate": "true"}).encode()
            try:
                with urllib.request.urlopen(f"{base}/app/kill/", data=body, timeout=timeout):
                    killed.append(str(app["id"]))
            except (urllib.error.URLError, OSError):
                continue
    return killed
