"""An earlier try's application killed on a standalone master before a retry submits (`spark.submit.standalone`):
only live applications of the job's own name, through the master's web UI (a stand-in master here: the HTTP exchange
is the unit; tests/cluster/test_hosts_faults.py has the real master)."""

from __future__ import annotations

import dataclasses
import http.server
import json
import threading
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.platform import make_platform_env
from venice_core.config import ClusterConfig
from venice_core.spark.specs.application import application_name
from venice_core.spark.submit import PushJobRequest, push_job_spec, standalone

OURS = application_name("push", "s", 2)  # the name the job gives its session and the spec gives spark-submit
APPS = [
    {"id": "app-1", "name": OURS, "state": "RUNNING"},
    {"id": "app-2", "name": application_name("push", "other", 1), "state": "RUNNING"},
    {"id": "app-3", "name": OURS, "state": "WAITING"},
    {"id": "app-4", "name": application_name("push", "s", 1), "state": "RUNNING"},  # another version's: kept
]


class _Master(http.server.BaseHTTPRequestHandler):
    killed: list[dict[str, list[str]]] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        body = json.dumps({"activeapps": APPS, "workers": []}).encode()
        self.send_response(200 if self.path in ("/json/", "/") else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers["Content-Length"])
        if self.path == "/app/kill/":
            _Master.killed.append(urllib.parse.parse_qs(self.rfile.read(length).decode()))
        self.send_response(302)
        self.send_header("Location", "/")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *_args: object) -> None:
        pass


@pytest.fixture
def master(tmp_path: Path) -> Iterator[tuple[ClusterConfig, str]]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Master)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Master.killed = []
    base = make_platform_env(tmp_path / "home").config
    config = dataclasses.replace(base, spark=dataclasses.replace(base.spark, ui_port=server.server_address[1]))
    try:
        yield config, "spark://127.0.0.1:7077"
    finally:
        server.shutdown()


def test_the_live_applications_of_the_jobs_name_are_killed_and_no_other(master: tuple[ClusterConfig, str]) -> None:
    config, url = master
    assert standalone.kill_applications(config, url, OURS) == ["app-1", "app-3"]
    assert [(k["id"], k["terminate"]) for k in _Master.killed] == [(["app-1"], ["true"]), (["app-3"], ["true"])]


def test_nothing_is_killed_on_a_local_master_or_one_that_does_not_answer(master: tuple[ClusterConfig, str]) -> None:
    config, _ = master
    assert standalone.kill_applications(config, "local[2]", OURS) == []
    unanswered = dataclasses.replace(config, spark=dataclasses.replace(config.spark, ui_port=1))
    assert standalone.kill_applications(unanswered, "spark://127.0.0.1:7077", OURS) is None  # said, not skipped
    assert _Master.killed == []


def test_the_push_specs_name_is_the_applications(tmp_path: Path) -> None:
    config = make_platform_env(tmp_path / "home").config
    request = PushJobRequest("s", 2, str(tmp_path / "in"), "key", "value", "job-1")
    assert push_job_spec(config, request, tmp_path / "r.json").name == OURS
