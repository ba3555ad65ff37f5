"""Every secret of a secured platform known to Airflow's secrets masker in each task process, before its task runs
(an Airflow listener, called by the task runner): a secret a task would print (an error that quotes a client's
settings, say) is `***` in its log, in the task process's log and its supervisor's alike. The secrets themselves stay
in the platform's 0600 files (`venice_core.security.secrets`), which the processes outside Airflow read too."""

from __future__ import annotations

import logging
from typing import Any

from airflow.listeners import hookimpl
from airflow.sdk.log import mask_secret

from venice_core.config import load_config
from venice_core.security.secrets import every_secret
from venice_plugin.platform_config import use_platform_config

log = logging.getLogger(__name__)


def mask_platform_secrets() -> int:
    """Register every secret the platform has made with the masker; how many (none unsecured)."""
    use_platform_config()
    config = load_config()
    if not config.security.enabled:
        return 0
    found = every_secret(config)
    for value in found.values():
        mask_secret(value)  # by value, whatever a task calls it: a name would mask only a "sensitive" one
    return len(found)


@hookimpl
def on_task_instance_running(previous_state: Any, task_instance: Any) -> None:
    try:
        mask_platform_secrets()
    except Exception:  # a listener must not fail the task; the secrets stay out of its command line and files anyway
        log.exception("could not register the platform's secrets with Airflow's masker")
