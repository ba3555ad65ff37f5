"""Airflow's REST API (v2), the calls the platform makes of its own Airflow: sign in (again on 401), trigger a DAG
run, read runs, task instances and their XComs, answer a human-in-the-loop task, ask for a DAG file to be parsed.
What the client needs of the Airflow home (its URL, the admin password, the API's secret key) it reads from
`deployment.airflow`, as `embedded.airflow` prepared it."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from datetime import UTC, datetime
from typing import Any, cast

from itsdangerous import URLSafeSerializer

from venice_core.config import ClusterConfig
from venice_core.deployment.airflow import (
    API_READ_TIMEOUT_SECONDS,
    PLATFORM_BUNDLE,
    USER,
    base_url,
    config_value,
    home,
    password,
)
from venice_core.errors import ComponentError
from venice_core.utils.waiting import poll_until

# A trigger answered with a server error is sent again this long, this often (`AirflowApi.trigger`).
TRIGGER_RETRY_SECONDS = 120.0
TRIGGER_RETRY_INTERVAL_SECONDS = 2.0
PAGE_LIMIT = 100  # Airflow's `[api] maximum_page_limit`: a larger limit is cut to it


class AirflowUnreachable(ComponentError):
    """Airflow's API does not answer: the platform is down (the message says what to do), or Airflow restarts."""

    HINT = "is the platform up? run `venice up`, or push with --local"

    def __init__(self, url: str, cause: BaseException) -> None:
        why = getattr(cause, "reason", cause)  # a URLError's own cause
        self.url, self.why = url, getattr(why, "strerror", None) or str(why)  # `Connection refused`
        super().__init__(f"Airflow at {url} is unreachable ({self.why}): {self.HINT}")


class AirflowRefused(ComponentError):
    """Airflow's API answered with an HTTP error."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class AirflowApi:
    """The few calls of Airflow's REST API (v2) the CLI needs: trigger a DAG run and follow it."""

    def __init__(self, config: ClusterConfig) -> None:
        self.url, self.home = base_url(config), home(config)
        self._credentials = json.dumps({"username": USER, "password": password(config)}).encode()
        self.headers: dict[str, str] = {}
        self._authenticate()

    def _authenticate(self) -> None:
        token = self._call("POST", "/auth/token", self._credentials, authorised=False)["access_token"]
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def _call(
        self, method: str, path: str, body: bytes | None = None, authorised: bool = True, retry: bool = True
    ) -> dict[str, Any]:
        headers = self.headers if authorised else {"Content-Type": "application/json"}
        request = urllib.request.Request(f"{self.url}{path}", data=body, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=API_READ_TIMEOUT_SECONDS) as response:
                payload = response.read()
                return json.loads(payload) if payload.strip() else {}
        except urllib.error.HTTPError as exc:
            if exc.code == 401 and authorised and retry:  # the token expired: sign in again, once
                self._authenticate()
                return self._call(method, path, body, retry=False)
            raise AirflowRefused(
                f"Airflow answered {exc.code} to {method} {path}: {exc.read()[:300]!r}", exc.code
            ) from None
        except (urllib.error.URLError, OSError) as exc:
            raise AirflowUnreachable(self.url, exc) from None

    def get(self, path: str) -> dict[str, Any]:
        """Any read of Airflow's REST API (`/api/v2/...`), signed in."""
        return self._call("GET", path)

    def get_if_found(self, path: str) -> dict[str, Any] | None:
        """A read of something that may not be there: None when Airflow answers 404."""
        try:
            return self._call("GET", path)
        except AirflowRefused as exc:
            if exc.status == 404:
                return None
            raise

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        """Any call of Airflow's REST API (`/api/v2/...`), signed in, with a JSON body."""
        return self._call(method, path, None if body is None else json.dumps(body).encode())

    def has_dag(self, dag_id: str) -> bool:
        """Airflow has the DAG, and not as stale (its file gone: a deleted store's, until one of that name is back)."""
        try:
            return not self._call("GET", f"/api/v2/dags/{dag_id}").get("is_stale", False)
        except ComponentError:
            return False

    def request_parse(self, dag_file: str, bundle: str = PLATFORM_BUNDLE) -> bool:
        """Ask the dag-processor to parse one DAG file of a bundle now (a store's changed file, the platform's
        pipelines file after a new pipeline); whether Airflow took the request. It takes one only for a file it
        knows a DAG of: a new file is found at the dag-processor's next look at its bundle instead. A request made
        while another for the file is pending is the same request (Airflow answers 409: its row is unique)."""
        try:
            self._call("PUT", f"/api/v2/parseDagFile/{self.file_token(dag_file, bundle)}")
        except AirflowRefused as exc:
            if exc.status == 409:  # a request for the file is pending already (its row is unique): it will do
                return True
            if exc.status == 404:  # no DAG of that file yet
                return False
            raise
        return True

    def file_token(self, dag_file: str, bundle: str = PLATFORM_BUNDLE) -> str:
        """What Airflow's API names a DAG file by (a DAG's `file_token` in `/api/v2/dags`): its bundle and path,
        signed with the API's secret key, which the platform keeps in airflow.cfg. Made here, not read from one of
        the file's DAGs, so that a file whose DAG is not there yet is asked for too."""
        secret = config_value(self.home, "api", "secret_key")
        return URLSafeSerializer(secret).dumps({"bundle_name": bundle, "relative_fileloc": dag_file})

    def dag_paused(self, dag_id: str) -> bool:
        """Is the DAG paused in Airflow (its runs then wait: none starts, a running one holds at its next task)?"""
        return bool(self._call("GET", f"/api/v2/dags/{dag_id}").get("is_paused"))

    def set_run_state(self, dag_id: str, run_id: str, state: str, note: str) -> None:
        """Mark a run `state` (failed, success) as an operator would in the UI, with a note saying why."""
        body = json.dumps({"state": state, "note": note}).encode()
        self._call("PATCH", f"/api/v2/dags/{dag_id}/dagRuns/{urllib.parse.quote(run_id)}", body)

    def trigger(self, dag_id: str, conf: dict[str, Any], retry_for: float = TRIGGER_RETRY_SECONDS) -> str:
        """A new run of the DAG; its run id. The id is made here, as Airflow makes a manual run's, so that a POST
        answered with a server error (Airflow's database locked past its timeout, or restarting) is sent again for
        up to `retry_for` seconds: a retry that finds the run (409) knows an earlier attempt made it after all."""
        run_id = f"manual__{datetime.now(UTC).isoformat()}"
        body = json.dumps({"dag_run_id": run_id, "logical_date": None, "conf": conf}).encode()
        server_errors: list[AirflowRefused] = []

        def sent() -> bool:
            try:
                self._call("POST", f"/api/v2/dags/{dag_id}/dagRuns", body)
            except AirflowRefused as exc:
                if exc.status == 409 and server_errors:
                    return True
                if exc.status < 500:
                    raise
                server_errors.append(exc)
                return False
            return True

        poll_until(
            sent, timeout=retry_for, interval=TRIGGER_RETRY_INTERVAL_SECONDS, timeout_error=lambda _: server_errors[-1]
        )
        return run_id

    def run_state(self, dag_id: str, run_id: str) -> str:
        return cast(str, self._call("GET", f"/api/v2/dags/{dag_id}/dagRuns/{urllib.parse.quote(run_id)}")["state"])

    def run(self, dag_id: str, run_id: str) -> dict[str, Any]:
        return self._call("GET", f"/api/v2/dags/{dag_id}/dagRuns/{urllib.parse.quote(run_id)}")

    def latest_run(self, dag_id: str) -> dict[str, Any] | None:
        runs = self._call("GET", f"/api/v2/dags/{dag_id}/dagRuns?order_by=-run_after&limit=1")["dag_runs"]
        return runs[0] if runs else None

    def count_dags(self, prefix: str) -> int:
        """How many DAGs Airflow has whose id starts with `prefix`, stale ones left out."""
        pattern = urllib.parse.quote(f"{prefix}%")
        return int(
            self._call("GET", f"/api/v2/dags?limit=1&dag_id_pattern={pattern}&exclude_stale=true")["total_entries"]
        )

    def active_runs(self, dag_id: str) -> list[str]:
        """The DAG's runs in flight (running, or queued behind one), oldest first."""
        path = f"/api/v2/dags/{dag_id}/dagRuns?state=queued&state=running&order_by=run_after&limit=100"
        return [run["dag_run_id"] for run in self._call("GET", path)["dag_runs"]]

    def task_instances(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        """Every task instance of the run, page by page: Airflow answers at most `[api] maximum_page_limit` (100)
        a call whatever the limit asked, and a rollout over nine regions has more tasks than that."""
        path = f"/api/v2/dags/{dag_id}/dagRuns/{urllib.parse.quote(run_id)}/taskInstances?limit={PAGE_LIMIT}"
        found: list[dict[str, Any]] = []
        while True:
            page = self._call("GET", f"{path}&offset={len(found)}")
            found.extend(page["task_instances"])
            if not page["task_instances"] or len(found) >= page["total_entries"]:
                return found

    def task_state(self, dag_id: str, run_id: str, task_id: str) -> str | None:
        """One task instance's state as `task_states` has it ("none" before it is scheduled; None: no such task in
        the run): a fifth of the API server's CPU of listing the run's task instances (12 against 65 ms a call)."""
        path = f"/api/v2/dags/{dag_id}/dagRuns/{urllib.parse.quote(run_id)}/taskInstances/{urllib.parse.quote(task_id)}"
        found = self.get_if_found(path)
        return None if found is None else cast(str, found["state"] or "none")

    def xcom(self, dag_id: str, run_id: str, task_id: str, key: str) -> object | None:
        """A task instance's XCom value under `key` (None: it has none)."""
        path = (
            f"/api/v2/dags/{dag_id}/dagRuns/{urllib.parse.quote(run_id)}/taskInstances/"
            f"{urllib.parse.quote(task_id)}/xcomEntries/{urllib.parse.quote(key)}"
        )
        found = self.get_if_found(path)
        return None if found is None else found.get("value")

    def task_states(self, dag_id: str, run_id: str) -> dict[str, str]:
        return {t["task_id"]: t["state"] or "none" for t in self.task_instances(dag_id, run_id)}

    def respond(self, dag_id: str, run_id: str, task_id: str, option: str) -> dict[str, Any]:
        """Answer a human-in-the-loop task (what a person does in the UI's Required Actions)."""
        path = f"/api/v2/dags/{dag_id}/dagRuns/{urllib.parse.quote(run_id)}/taskInstances/{task_id}/-1/hitlDetails"
        return self._call("PATCH", path, json.dumps({"chosen_options": [option], "params_input": {}}).encode())
