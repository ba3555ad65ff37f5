"""The embedded Airflow home's `airflow.cfg`: the platform's settings, the secrets kept across rewrites, values read
back as Airflow's parser (configparser with `%` interpolation) reads them."""

from __future__ import annotations

import configparser
import dataclasses
import http.server
import json
import threading
from pathlib import Path

import pytest

from tests.support.platform import make_platform_env
from venice_core.deployment import airflow as deployment
from venice_core.embedded import airflow
from venice_core.embedded.airflow import configuration, control
from venice_core.errors import ComponentError
from venice_core.orchestration.airflow.api import AirflowApi


def _read(path: Path) -> configparser.ConfigParser:
    parser = configparser.ConfigParser()  # BasicInterpolation, as Airflow's own parser
    parser.read(path)
    return parser


def test_the_cfg_holds_the_platforms_settings_and_keeps_its_secrets(tmp_path: Path) -> None:
    env = make_platform_env(tmp_path / "100%home")  # a `%` in every path: escaped for Airflow's interpolation
    config = env.config
    path = deployment.home(config) / "airflow.cfg"
    path.parent.mkdir(parents=True)
    path.write_text("[core]\nfernet_key = kept-fernet\nload_examples = True\n\n[api_auth]\njwt_secret = kept-jwt\n")

    configuration.write_config(config)
    cfg = _read(path)
    for (section, option), value in airflow.settings(config).items():
        assert cfg.get(section, option) == value, (section, option)
    assert cfg.get("core", "load_examples") == "False"
    assert cfg.get("database", "sql_alchemy_conn") == (
        f"sqlite:///{tmp_path}/100%home/airflow/airflow.db?timeout={deployment.SQLITE_BUSY_TIMEOUT_SECONDS}"
    )
    assert cfg.get("venice", "venice_config") == str(env.properties)
    # Secrets found in the file (Airflow's own, or an earlier start's) are kept; a missing one is generated.
    assert (cfg.get("core", "fernet_key"), cfg.get("api_auth", "jwt_secret")) == ("kept-fernet", "kept-jwt")
    secret_key = cfg.get("api", "secret_key")
    assert secret_key

    text, mtime = path.read_text(), path.stat().st_mtime_ns
    configuration.write_config(config)
    assert path.read_text() == text and path.stat().st_mtime_ns == mtime  # unchanged: not rewritten

    configuration.write_config(config, dags_folder=tmp_path / "other-dags")  # a setting changed: rewritten
    cfg = _read(path)
    assert cfg.get("core", "dags_folder") == str(tmp_path / "other-dags")
    assert cfg.get("api", "secret_key") == secret_key
    assert path.stat().st_mode & 0o777 == 0o600


class _ParseRequests(http.server.BaseHTTPRequestHandler):
    """Airflow's answers to a sign-in and to parse requests: a file's request is one row, unique while it is
    pending, so a second request for the same file is answered 409 (the dag-processor has not taken the first)."""

    pending: set[str] = set()

    def do_POST(self) -> None:  # /auth/token
        self._reply(201, {"access_token": "t"})

    def do_PUT(self) -> None:  # /api/v2/parseDagFile/<token>
        if self.path in self.pending:
            self._reply(409, {"detail": {"reason": "Unique constraint violation"}})
        else:
            self.pending.add(self.path)
            self._reply(201, {})

    def _reply(self, status: int, body: dict) -> None:
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: object) -> None:
        pass


def test_a_parse_asked_for_twice_while_the_first_is_pending_is_the_same_request(tmp_path: Path) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _ParseRequests)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        env = make_platform_env(tmp_path / "home")
        port = server.server_address[1]
        airflow = dataclasses.replace(env.config.airflow, port=port, api_url=f"http://127.0.0.1:{port}")
        config = dataclasses.replace(env.config, airflow=airflow)
        configuration.write_config(config)
        api = AirflowApi(config)
        api.request_parse("venice_streams.py")
        api.request_parse("venice_streams.py")  # pending still: Airflow answers 409, which is no error
        assert len(_ParseRequests.pending) == 1
    finally:
        server.shutdown()
        server.server_close()


def test_the_stores_dag_files_have_a_bundle_and_a_dag_processor_of_their_own(tmp_path: Path) -> None:
    """Two dag-processors: one for the stores' generated files (parsed on request: it stats and sorts nothing),
    one for dags/ and the users' folder, with Airflow's defaults (it sees an edit by its modification time)."""
    users = tmp_path / "my-dags"
    users.mkdir()
    base = make_platform_env(tmp_path / "home").config
    config = dataclasses.replace(base, airflow=dataclasses.replace(base.airflow, user_dags=users))
    bundles = {b["name"]: b["kwargs"] for b in json.loads(airflow.settings(config)[configuration.BUNDLES_SETTING])}
    assert bundles == {
        "dags-folder": {},
        "venice-stores": {"path": str(deployment.home(config) / "store_dags")},
        "user-dags": {"path": str(users)},
    }
    commands = {name: control._component_command(config, name) for name in airflow.COMPONENTS}
    assert commands["store-dag-processor"] == ["dag-processor", "--bundle-name", "venice-stores"]
    assert commands["dag-processor"] == ["dag-processor", "--bundle-name", "dags-folder", "--bundle-name", "user-dags"]
    env = airflow.environment(config)
    stores_env = control._component_env("store-dag-processor", env)
    assert stores_env["AIRFLOW__DAG_PROCESSOR__FILE_PARSING_SORT_MODE"] == "random_seeded_by_host"
    assert stores_env["AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL"] == str(7 * 24 * 3600)
    assert "AIRFLOW__DAG_PROCESSOR__FILE_PARSING_SORT_MODE" not in control._component_env("dag-processor", env)
    assert env["AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL"] == "120"


class _Component:
    def __init__(self, name: str, pid: int | None) -> None:
        self.name, self._pid = name, pid

    def pid(self) -> int | None:
        return self._pid


def test_a_start_beside_running_components_whose_settings_changed_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A component missing (the store dag-processor a new version adds, say) is not started beside ones that run on
    other settings: they would not see them (another bundle list: their tasks would not find the stores' DAGs)."""
    config = make_platform_env(tmp_path / "home").config
    configuration.write_config(config)  # as the running components read it
    pids = dict(zip(airflow.COMPONENTS, (41, 42, None, 44), strict=True))
    monkeypatch.setattr(control, "processes", lambda _: [_Component(f"airflow-{n}", p) for n, p in pids.items()])
    monkeypatch.setattr(control, "prepare", lambda c, d=None: (configuration.write_config(c, d), ("airflow", {}))[1])
    with pytest.raises(ComponentError, match=r"settings changed since airflow-api-server, airflow-dag-processor, "):
        airflow.start(config, dags_folder=tmp_path / "other-dags")
