"""`AirflowApi.trigger` against a scripted HTTP server standing in for Airflow's REST API: a server error (Airflow's
database locked past its timeout) is sent again under the same run id, and a retry that finds the run made by an
earlier attempt (409) is that run; an answer that is no server error ends the trigger at once."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.support.scripted_airflow import scripted_api
from venice_core.orchestration.airflow import api
from venice_core.orchestration.airflow.api import AirflowApi, AirflowRefused

DAG_RUNS = "/api/v2/dags/venice_push__users/dagRuns"


class ScriptedAirflow:
    """Answers each POST of a DAG run with the next status of `answers` (201 once they run out), keeping every POSTed
    body of a run in `posted`."""

    def __init__(self) -> None:
        self.answers: list[int] = []
        self.posted: list[dict[str, Any]] = []

    def respond(self, path: str, _headers: Mapping[str, str], body: Any) -> tuple[int, Any]:
        assert path == DAG_RUNS
        self.posted.append(body)
        status = self.answers.pop(0) if self.answers else 201
        return status, {"dag_run_id": body["dag_run_id"]} if status == 201 else {"detail": "Database error"}


@pytest.fixture
def scripted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[ScriptedAirflow, AirflowApi]]:
    monkeypatch.setattr(api, "TRIGGER_RETRY_INTERVAL_SECONDS", 0.01)
    server = ScriptedAirflow()
    with scripted_api(tmp_path / "home", server.respond) as airflow:
        yield server, airflow


def test_server_errors_are_sent_again_under_one_run_id(scripted: tuple[ScriptedAirflow, AirflowApi]) -> None:
    server, airflow = scripted
    server.answers = [500, 503]
    run_id = airflow.trigger("venice_push__users", {"input": "/data"})
    assert run_id.startswith("manual__")
    assert [body["dag_run_id"] for body in server.posted] == [run_id] * 3
    assert all(body["conf"] == {"input": "/data"} for body in server.posted)


def test_a_retry_that_finds_the_run_made_by_an_earlier_attempt_is_that_run(
    scripted: tuple[ScriptedAirflow, AirflowApi],
) -> None:
    server, airflow = scripted
    server.answers = [500, 409]
    run_id = airflow.trigger("venice_push__users", {})
    assert [body["dag_run_id"] for body in server.posted] == [run_id] * 2


@pytest.mark.parametrize("status", [400, 404, 409])
def test_an_answer_that_is_no_server_error_ends_the_trigger_at_once(
    scripted: tuple[ScriptedAirflow, AirflowApi], status: int
) -> None:
    server, airflow = scripted
    server.answers = [status]
    with pytest.raises(AirflowRefused) as refused:
        airflow.trigger("venice_push__users", {})
    assert refused.value.status == status and len(server.posted) == 1


def test_server_errors_past_the_retry_time_are_the_error(scripted: tuple[ScriptedAirflow, AirflowApi]) -> None:
    server, airflow = scripted
    server.answers = [500] * 1000
    with pytest.raises(AirflowRefused) as refused:
        airflow.trigger("venice_push__users", {}, retry_for=0.3)
    assert refused.value.status == 500 and "Database error" in str(refused.value)
    assert 2 <= len(server.posted) < 1000
