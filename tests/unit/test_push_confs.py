"""How a push's configs (`venice push --conf`) reach the Spark job, on the direct path and through Airflow."""

from __future__ import annotations

from venice_core.jobs.local_push import job_flags, spark_confs


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
