"""`AirflowApi`'s reads of a run's task instances against a scripted HTTP server that pages as Airflow's REST API
does: at most 100 a call whatever the limit asked (`[api] maximum_page_limit`), so a run with more tasks (a rollout
over nine regions) is read page by page; one task instance's state, and None for one not there."""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.support.scripted_airflow import scripted_api
from venice_core.orchestration.airflow.api import AirflowApi

RUN = "manual__2026-11-29T00:00:00+00:00"
TASKS = f"/api/v2/dags/venice_push__users/dagRuns/{urllib.parse.quote(RUN)}/taskInstances"
MAXIMUM_PAGE_LIMIT = 100


class PagingAirflow:
    """A run of `count` task instances (`task_<n>`, each `success`), served as Airflow serves them."""

    def __init__(self, count: int) -> None:
        self.tasks = [{"task_id": f"task_{n}", "state": "success"} for n in range(count)]
        self.pages: list[tuple[int, int]] = []  # (offset, limit) of each list call

    def respond(self, path: str, _headers: Mapping[str, str], _body: Any) -> tuple[int, Any]:
        url = urllib.parse.urlsplit(path)
        if url.path == TASKS:
            query = urllib.parse.parse_qs(url.query)
            offset, limit = int(query.get("offset", ["0"])[0]), int(query["limit"][0])
            self.pages.append((offset, limit))
            page = self.tasks[offset : offset + min(limit, MAXIMUM_PAGE_LIMIT)]
            return 200, {"task_instances": page, "total_entries": len(self.tasks)}
        task_id = url.path.removeprefix(f"{TASKS}/")
        found = [t for t in self.tasks if t["task_id"] == task_id]
        return (200, found[0]) if found else (404, {"detail": "Task Instance not found"})


@pytest.fixture
def airflow(tmp_path: Path) -> Iterator[tuple[PagingAirflow, AirflowApi]]:
    server = PagingAirflow(230)
    with scripted_api(tmp_path / "home", server.respond) as api:
        yield server, api


def test_a_run_with_more_task_instances_than_a_page_is_read_whole(airflow: tuple[PagingAirflow, AirflowApi]) -> None:
    server, api = airflow
    tasks = api.task_instances("venice_push__users", RUN)
    assert [t["task_id"] for t in tasks] == [f"task_{n}" for n in range(230)]
    assert [offset for offset, _limit in server.pages] == [0, 100, 200]
    assert api.task_states("venice_push__users", RUN)["task_229"] == "success"


def test_one_task_state_and_none_for_a_task_not_there(airflow: tuple[PagingAirflow, AirflowApi]) -> None:
    _server, api = airflow
    assert api.task_state("venice_push__users", RUN, "task_7") == "success"
    assert api.task_state("venice_push__users", RUN, "dc_9.pre_swap") is None
