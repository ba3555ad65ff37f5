"""The layers of ARCHITECTURE.md, as pyproject.toml's import-linter contracts state them, hold for the code, and
an import that breaks one fails the check `make test` runs (a copy of the tree with one bad import planted)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(root / "plugins")])}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"], cwd=root, env=env, capture_output=True, text=True, timeout=120
    )


def test_the_code_keeps_every_contract() -> None:
    result = _lint_imports(REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(
    ("module", "planted", "broken"),
    [
        ("venice_core/protocol/partitioner.py", "import venice_core.cli.main", "venice_core's layers BROKEN"),
        ("venice_core/davinci/batch.py", "import venice_core.server.http", "venice_core's layers BROKEN"),
        ("venice_core/controller/job.py", "import airflow", "Nothing in venice_core imports Airflow BROKEN"),
        ("venice_core/rollout/names.py", "import pyspark", "Only venice_core.spark imports pyspark BROKEN"),
        ("venice_core/server/http.py", "import venice_core.server.region_server", "No cycle among the modules"),
        (
            "venice_core/spark/tasks/push_tasks.py",
            "import venice_core.spark.jobs.push",
            "venice_core.spark by where its code runs BROKEN",
        ),
    ],
)
def test_a_planted_import_that_breaks_a_layer_fails_the_check(
    tmp_path: Path, module: str, planted: str, broken: str
) -> None:
    for part in ("venice_core", "plugins"):
        shutil.copytree(REPO / part, tmp_path / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path)
    with open(tmp_path / module, "a") as source:
        source.write(f"\n{planted}  # noqa\n")
    result = _lint_imports(tmp_path)
    assert result.returncode != 0 and broken in result.stdout, result.stdout + result.stderr
