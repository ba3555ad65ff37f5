"""The Spark class archive is used only when it was built whole for this Java and pyspark: a JVM that maps one cut
short crashes (SIGBUS) instead of failing cleanly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from venice_core.spark import submit
from venice_core.spark.submit import class_archive


@pytest.fixture
def archive_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(class_archive, "ARCHIVE_DIR", tmp_path)
    return tmp_path


def _write(path: Path, data: bytes, recorded_size: int | None) -> None:
    path.write_bytes(data)
    if recorded_size is not None:
        path.with_suffix(".json").write_text(json.dumps({"size": recorded_size}))


def test_a_whole_archive_is_added_to_the_drivers_java_options(archive_dir: Path) -> None:
    path = class_archive.archive_path()
    assert path is not None and path.parent == archive_dir and path.suffix == ".jsa"
    assert class_archive.java_options("-XX:TieredStopAtLevel=1") == "-XX:TieredStopAtLevel=1"  # none yet
    _write(path, b"x" * 100, 100)
    assert class_archive.java_options("-Xa") == f"-Xa -XX:SharedArchiveFile={path}"
    confs = submit.default_spark_confs()
    assert confs["spark.driver.extraJavaOptions"] == f"{submit.DRIVER_JAVA_OPTIONS} -XX:SharedArchiveFile={path}"


@pytest.mark.parametrize("data, recorded", [(b"x" * 50, 100), (b"x" * 100, None), (b"x" * 100, "garbage")])
def test_an_archive_cut_short_or_unrecorded_is_not_used(archive_dir: Path, data: bytes, recorded: object) -> None:
    path = class_archive.archive_path()
    assert path is not None
    path.write_bytes(data)
    if recorded == "garbage":
        path.with_suffix(".json").write_text("{not json")
    elif recorded is not None:
        path.with_suffix(".json").write_text(json.dumps({"size": recorded}))
    assert class_archive.usable_archive() is None
    assert class_archive.java_options("-Xa") == "-Xa"


def test_the_archive_is_named_for_the_java_and_the_pyspark(
    archive_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = class_archive.archive_path()
    other = tmp_path / "jdk" / "bin" / "java"
    other.parent.mkdir(parents=True)
    other.write_text("#!/bin/sh\n")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    assert class_archive.archive_path() not in (None, first)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    assert class_archive.archive_path() is None and class_archive.java_options("-Xa") == "-Xa"
