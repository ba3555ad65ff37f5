"""`venice rollout status` on a platform configured without Airflow says so and where to look instead, rather than
"Airflow is unreachable: run venice up" (which never starts an Airflow that is disabled)."""

from __future__ import annotations

from pathlib import Path

from tests.support.platform import metadata_env


def test_rollout_status_without_airflow_points_to_store_show(tmp_path: Path) -> None:
    env, meta = metadata_env(tmp_path, hooks="")
    try:
        result = env.cli("rollout", "status", "users")
        assert result.returncode == 1
        assert "this platform runs without Airflow (airflow.enabled=false)" in result.stderr
        assert "`venice store show users`" in result.stderr
    finally:
        meta.dispose()
