"""Airflow's REST API scripted by a unit test: a real HTTP server that answers the sign-in, checks every other
call's token and hands it to the test's `respond`, and an `AirflowApi` configured to call it."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.support.platform import make_platform_env
from tests.support.webhook import Respond, Webhook
from venice_core.orchestration.airflow.api import AirflowApi

TOKEN = "token"


@contextmanager
def scripted_api(home: Path, respond: Respond) -> Iterator[AirflowApi]:
    """An `AirflowApi` (its platform's home in `home`) whose calls, once signed in, `respond` answers."""

    def answer(path: str, headers: Mapping[str, str], body: Any) -> tuple[int, Any]:
        if path == "/auth/token":
            return 201, {"access_token": TOKEN}
        assert headers["Authorization"] == f"Bearer {TOKEN}"
        return respond(path, headers, body)

    server = Webhook(respond=answer)
    try:
        yield AirflowApi(make_platform_env(home, {"airflow.port": str(server.port)}).config)
    finally:
        server.close()
