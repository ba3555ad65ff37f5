"""Which venice config the DAG files read: the one of the platform whose Airflow home this is, named in the
home's `airflow.cfg` (`[venice]`, written by `venice_core.embedded.airflow.prepare`). The platform's components
also get it in their environment; Airflow's own CLI run with AIRFLOW_HOME alone (`airflow tasks list ...`) gets it
only here, and its task processes inherit it from the process that parsed the DAG file."""

from __future__ import annotations

import os

from airflow.sdk import conf

from venice_core.config import ENV_CONFIG, ENV_DATA_DIR
from venice_core.deployment.airflow import PLATFORM_SECTION


def use_platform_config() -> None:
    """Set $VENICE_CONFIG and $VENICE__DATA_DIR as the platform's components have them, from the Airflow home's
    config; nothing when it names none (a home the platform did not write)."""
    home = conf.get(PLATFORM_SECTION, "data_dir", fallback="")
    if not home:
        return
    os.environ[ENV_DATA_DIR] = home
    config = conf.get(PLATFORM_SECTION, ENV_CONFIG.lower(), fallback="")
    if config:
        os.environ[ENV_CONFIG] = config
    else:
        os.environ.pop(ENV_CONFIG, None)
