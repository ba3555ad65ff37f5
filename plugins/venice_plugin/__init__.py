"""The Airflow plugin of the platform: the business-hours timetable, the rollout pages (a FastAPI app on Airflow's
API server): the stores in the Browse menu, and a store's page as a tab of its DAG and of each run; and the
listener that ends a push whose run an operator marked failed or success by hand."""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from venice_plugin import run_listener, secret_masking
from venice_plugin.rollout_page import URL_PREFIX, LazyApp
from venice_plugin.timetables import BusinessHoursTimetable

# The UI replaces {DAG_ID} and {RUN_ID} in a tab's address; the page shows any DAG's tab, and says so when the DAG
# is not a store's rollout.
ROLLOUT_PAGE = f"{URL_PREFIX}/rollout/{{DAG_ID}}"


class VenicePlugin(AirflowPlugin):
    name = "venice"
    timetables = [BusinessHoursTimetable]
    # A run an operator marks failed or success by hand ends its push at once; every task's log masks the secrets.
    listeners = [run_listener, secret_masking]
    fastapi_apps = [{"app": LazyApp(), "url_prefix": URL_PREFIX, "name": "Venice rollouts"}]
    external_views = [
        {
            "name": "Rollouts",
            "href": f"{URL_PREFIX}/rollout/",
            "destination": "nav",
            "category": "browse",
            "url_route": "venice-rollouts",
        },
        {"name": "Rollout", "href": ROLLOUT_PAGE, "destination": "dag", "url_route": "venice-rollout"},
        {
            "name": "Rollout",
            "href": f"{ROLLOUT_PAGE}?run_id={{RUN_ID}}",
            "destination": "dag_run",
            "url_route": "venice-rollout-run",
        },
    ]


# Loaded with the plugin (Airflow loads plugins eagerly here, `lazy_load_plugins=False`): the scheduler then has the
# rollout DAGs' module imported before it forks its executor's workers, and each task process inherits it instead
# of importing it again (about 0.2 s of CPU a task).
import venice_plugin.prefork  # noqa: E402, F401  (the task processes' warm-up, inherited the same way)
import venice_plugin.rollout_dag  # noqa: E402, F401
