"""`venice push` following its run rides out a database restart: Airflow's API answering 5xx meanwhile (its
database gone), the metadata store unreachable; an answer that is not an outage (a 404) still ends it."""

from __future__ import annotations

import pytest
from sqlalchemy.exc import OperationalError

from venice_core.orchestration.airflow import run_following
from venice_core.orchestration.airflow.api import AirflowRefused
from venice_core.orchestration.airflow.run_following import PlainView


class _Follower:
    """Polls that answer `polls` in turn (a run's state, or a failure raised), then find the run succeeded."""

    def __init__(self, polls: list[Exception | str]) -> None:
        self.polls = polls

    def poll(self) -> str:
        answer = self.polls.pop(0) if self.polls else "success"
        if isinstance(answer, Exception):
            raise answer
        return answer


@pytest.fixture(autouse=True)
def no_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(run_following.time, "sleep", lambda _seconds: None)


def test_a_restarting_database_is_waited_for() -> None:
    lines: list[str] = []
    shutting_down = OperationalError("SELECT 1", {}, Exception("FATAL:  the database system is shutting down"))
    refused = AirflowRefused("Database error", 500)
    polls: list[Exception | str] = [refused, refused, "running", shutting_down, "running"]
    assert run_following.follow(_Follower(polls), PlainView(lines.append), 60) == "success"
    assert lines == [  # once an outage
        "  Airflow answered 500 (its database restarting?); still following the run",
        "  the metadata store is unreachable (FATAL:  the database system is shutting down); still following the run",
    ]


def test_an_answer_that_is_no_outage_ends_the_follow() -> None:
    with pytest.raises(AirflowRefused):
        run_following.follow(_Follower([AirflowRefused("no such run", 404)]), PlainView(print), 60)
