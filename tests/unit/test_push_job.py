"""The push job's edges: how a push's configs (`venice push --conf`) reach it on both paths, and which of its
failures are refusals (not worth a retry)."""

from __future__ import annotations

import pytest

from venice_core.controller.stores import SchemaRefused
from venice_core.errors import ComponentError, IncompatibleSchema, MetadataStoreError
from venice_core.jobs.push import PushJobError, _refusal
from venice_core.jobs.spark_spec import job_flags, spark_confs


def test_spark_properties_and_fault_injections_go_to_spark() -> None:
    confs = {
        "spark.executor.memory": "1g",
        "venice.push.test.fail.partition": "1",
        "allow.duplicate.key": "true",
    }
    assert spark_confs(confs) == {"spark.executor.memory": "1g", "spark.venice.push.test.fail.partition": "1"}


def test_allow_flags_become_job_flags_only_when_true() -> None:
    assert job_flags({"allow.duplicate.key": "TRUE", "allow.empty.input": "true"}) == [
        "--allow-duplicate-key",
        "--allow-empty",
    ]
    assert job_flags({"allow.duplicate.key": "false", "spark.x": "true"}) == []


@pytest.mark.parametrize(
    ("error", "refusal"),
    [
        (PushJobError("input has no key field 'key'"), "input has no key field 'key'"),
        (IncompatibleSchema("field 'age' changed type"), "field 'age' changed type"),
        (SchemaRefused("refused at pre_schema_registration: frozen"), "refused at pre_schema_registration: frozen"),
        (
            RuntimeError(
                "An error occurred while calling o81.\nPushJobError: duplicate key with different values\n  at"
            ),
            "duplicate key with different values",
        ),
        (ComponentError("Kafka broker at 127.0.0.1:1 is unreachable"), None),
        (MetadataStoreError("database is locked"), None),
        (RuntimeError("Python worker exited unexpectedly"), None),
    ],
)
def test_input_errors_are_refusals_and_unreachable_components_are_not(error: Exception, refusal: str | None) -> None:
    assert _refusal(error) == refusal
