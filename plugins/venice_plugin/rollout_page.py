"""The rollout page in the Airflow UI: a FastAPI app the plugin mounts on Airflow's API server under `/venice`,
shown as a tab of a store's DAG and of each of its runs (the plugin's external views).

    GET /venice/rollout/                            every store the user may read (the UI's Browse menu)
    GET /venice/rollout/{dag_id}[?run_id=...]       a store's page (HTML; default: its latest run)
    GET /venice/rollout/{dag_id}/data[?run_id=...]  the same, as JSON
    GET /venice/api/job/{store}/{version}           VIP-4's `/job` reply: the version's status, each region's
                                                    status and status-update time, the hooks' latest answers

A plugin's app is not behind Airflow's authentication: every route depends on Airflow's own check, the one its
REST API uses (`get_user`, `requires_access_dag`): the user's JWT, from the UI's cookie or a bearer token (none:
401, a bad one: 403), and the auth manager's permission to read the DAG's runs (the list shows the stores whose DAG
the user may read).

Every task process loads the plugin folder, and FastAPI plus Airflow's API modules take seconds to import: the
plugin registers `LazyApp`, which builds the real app on the API server's first request to it.
"""

# No `from __future__ import annotations`: FastAPI reads the route signatures, whose types are imported in
# `create_app`, at definition time.
import dataclasses
from typing import Any

from venice_core.rollout.names import ROLLOUT_DAG_PREFIX, rollout_dag_id, store_of

URL_PREFIX = "/venice"


class LazyApp:
    """An ASGI app that builds the page's FastAPI app when it first serves a request."""

    def __init__(self) -> None:
        self._app: Any = None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if self._app is None:
            self._app = create_app()
        await self._app(scope, receive, send)


def create_app() -> Any:
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
    from airflow.api_fastapi.core_api.security import GetUserDep, requires_access_dag
    from fastapi import Depends, FastAPI, HTTPException, Request
    from fastapi.responses import HTMLResponse

    from venice_core.controller.job import job_reply
    from venice_core.controller.stores import list_stores
    from venice_core.errors import StoreNotFound, VeniceError
    from venice_core.meta.context import metadata
    from venice_core.rollout.view import RolloutView, rollout_view
    from venice_plugin import airflow_runs
    from venice_plugin.rollout_html import StorePage, render_index, render_missing, render_page

    app = FastAPI(title="Venice rollouts", docs_url=None, redoc_url=None, openapi_url=None)
    read_runs = [Depends(requires_access_dag("GET", DagAccessEntity.RUN))]

    def view(dag_id: str, run_id: str | None) -> tuple[RolloutView, list[airflow_runs.RunInfo]]:
        if not dag_id.startswith(ROLLOUT_DAG_PREFIX):
            raise HTTPException(404, f"{dag_id} is not a store's rollout DAG")
        runs = airflow_runs.recent_runs(dag_id)
        run = airflow_runs.find_run(dag_id, run_id) if run_id else (runs[0] if runs else None)
        if run_id and run is None:
            raise HTTPException(404, f"{dag_id} has no run {run_id}")
        tasks = airflow_runs.run_tasks(dag_id, run.run_id) if run else []
        try:
            with metadata() as (_, meta):
                page = rollout_view(
                    meta,
                    store_of(dag_id),
                    run.run_id if run else None,
                    run.state if run else None,
                    tasks,
                    run.conf if run else None,
                )
        except VeniceError as exc:  # an unknown store, a metadata store not migrated
            raise HTTPException(exc.http_status, str(exc)) from None
        return page, runs

    @app.get("/rollout/", response_class=HTMLResponse)
    def index(user: GetUserDep, q: str = "", page: int = 1) -> HTMLResponse:
        readable = get_auth_manager().get_authorized_dag_ids(user=user, method="GET")
        with metadata() as (_, meta):
            names = [name for name in list_stores(meta) if rollout_dag_id(name) in readable]
            shown = StorePage.of(names, q.strip(), page)  # a page out of range: the nearest there is
            stores = []
            for name in shown.names:
                try:
                    view = rollout_view(meta, name)
                except StoreNotFound:  # deleted since the list was read
                    continue
                stores.append((view, next(iter(airflow_runs.recent_runs(rollout_dag_id(name), 1)), None)))
        return HTMLResponse(render_index(stores, shown))

    @app.get("/rollout/{dag_id}", response_class=HTMLResponse, dependencies=read_runs)
    def page(dag_id: str, run_id: str | None = None) -> HTMLResponse:
        try:
            rollout, runs = view(dag_id, run_id)
        except HTTPException as exc:
            return HTMLResponse(render_missing(str(exc.detail)), status_code=exc.status_code)
        return HTMLResponse(render_page(rollout, runs))

    @app.get("/rollout/{dag_id}/data", dependencies=read_runs)
    def data(dag_id: str, run_id: str | None = None) -> dict[str, Any]:
        rollout, _ = view(dag_id, run_id)
        return dataclasses.asdict(rollout)

    @app.get("/api/job/{store}/{version}")
    def job(store: str, version: int, request: Request, user: GetUserDep) -> dict[str, Any]:
        # Airflow's own check, on the store's DAG (the path names the store, not the DAG).
        requires_access_dag("GET", DagAccessEntity.RUN, param_dag_id=rollout_dag_id(store))(request, user)
        try:
            with metadata() as (_, meta):
                return job_reply(meta, store, version)
        except VeniceError as exc:  # an unknown store or version
            raise HTTPException(exc.http_status, str(exc)) from None

    return app
