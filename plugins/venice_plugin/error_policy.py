"""How a task of the plugin fails on a VeniceError: one mapping for every operator, sensor and task.

An error that a retry would meet again (`retryable` False: a hook's decision, input that fits no schema, a region's
failed ingestion, a repush refused, a drain refused) fails the task for good (AirflowFailException: no retry); any
other is raised as it is, and retried when the task has tries left."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from airflow.sdk.exceptions import AirflowFailException

from venice_core.errors import VeniceError


@contextmanager
def airflow_errors(on_error: Callable[[VeniceError], None] | None = None) -> Iterator[None]:
    """A VeniceError raised inside as Airflow should see it (see above), after `on_error` has seen it (the rollout's
    steps keep its reason as their XCom `failure`)."""
    try:
        yield
    except VeniceError as error:
        if on_error is not None:
            on_error(error)
        if error.retryable:
            raise
        raise AirflowFailException(str(error)) from error
