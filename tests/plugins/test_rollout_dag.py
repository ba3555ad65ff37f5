"""The shape of a store's rollout DAG, built without a running Airflow."""

from __future__ import annotations

from pathlib import Path

from venice_plugin.rollout import PushJobOperator, build_rollout_dag

from venice_core.config import load_config


def test_every_step_is_retried_as_configured_and_the_push_knows_its_result_file(tmp_path: Path) -> None:
    properties = tmp_path / "venice.properties"
    properties.write_text("rollout.step.retries=3\nrollout.step.retry.delay.seconds=7\n")
    dag = build_rollout_dag("users", ["dc-0", "dc-1"], load_config({"VENICE_CONFIG": str(properties)}))
    assert {(t.retries, t.retry_delay.total_seconds()) for t in dag.tasks} == {(3, 7.0)}
    push = dag.get_task("spark_push")
    assert isinstance(push, PushJobOperator) and "result_file" in push.template_fields
    assert [t.task_id for t in dag.tasks if t.task_id.startswith("dc_1.")][-3:] == [
        "dc_1.pre_swap",
        "dc_1.server_swap",
        "dc_1.post_swap",
    ]
