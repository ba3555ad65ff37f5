"""A job's result file: written whole or not at all, since `venice push --local` reads it as soon as it appears."""

from __future__ import annotations

from pathlib import Path

from venice_core.rollout.local import _succeeded
from venice_core.spark.specs.job_result import JobResult


def test_a_result_appears_whole_and_only_a_success_ends_the_wait(tmp_path: Path) -> None:
    path = tmp_path / "result.json"
    assert _succeeded(path) is None  # not written yet
    JobResult({"0": 3, "1": 4}, 7, 2).write(path)
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]  # renamed into place, no partial left
    result = _succeeded(path)
    assert result is not None and result.records == 7 and result.record_counts == {"0": 3, "1": 4}
    JobResult(refused="input has no key field 'id'").write(path)
    assert _succeeded(path) is None  # a refusal: the caller waits for the exit and reports it
