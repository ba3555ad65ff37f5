"""Which of Spark's zips on a Python path duplicate the installed pyspark (`spark.python_path`)."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from venice_core.spark.python_path import duplicate_zips, prefer_installed_pyspark


def _install(site: Path, py4j_version: str = "0.10.9.9") -> list[str]:
    """A pip-style pyspark in `site` with its two zips; the zips' paths."""
    lib = site / "pyspark" / "python" / "lib"
    lib.mkdir(parents=True)
    (site / "pyspark" / "__init__.py").write_text("")
    (site / "py4j").mkdir()
    (site / f"py4j-{py4j_version}.dist-info").mkdir()
    (site / f"py4j-{py4j_version}.dist-info" / "METADATA").write_text(f"Name: py4j\nVersion: {py4j_version}\n")
    zips = [lib / "pyspark.zip", lib / "py4j-0.10.9.9-src.zip"]
    for zip_file in zips:
        zip_file.write_bytes(b"")
    return [str(z) for z in zips]


def test_the_zips_of_the_installed_pyspark_are_duplicates(tmp_path: Path) -> None:
    zips = _install(tmp_path / "site")
    assert duplicate_zips([*zips, "/usr/lib/python3", str(tmp_path / "site")]) == zips


def test_a_py4j_zip_of_another_version_is_kept(tmp_path: Path) -> None:
    zips = _install(tmp_path / "site", py4j_version="0.10.9.7")
    assert duplicate_zips([*zips, str(tmp_path / "site")]) == zips[:1]


def test_zips_are_kept_when_the_installed_package_is_not_on_the_path(tmp_path: Path) -> None:
    zips = _install(tmp_path / "site")
    assert duplicate_zips(zips) == []


def test_a_clusters_own_spark_home_keeps_its_zips(tmp_path: Path) -> None:
    """SPARK_HOME of a Spark distribution (no Python package around its zips): its code may differ from pip's."""
    lib = tmp_path / "spark" / "python" / "lib"
    lib.mkdir(parents=True)
    zips = [str(lib / "pyspark.zip"), str(lib / "py4j-0.10.9.9-src.zip")]
    site = tmp_path / "site"
    _install(site)
    assert duplicate_zips([*zips, str(site)]) == []


def test_the_path_is_left_alone_once_pyspark_is_imported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Dropping the zips after pyspark came from one of them would mix modules of both copies in one process."""
    zips = _install(tmp_path / "site")
    path = [*zips, str(tmp_path / "site")]
    monkeypatch.setattr(sys, "path", list(path))
    monkeypatch.setitem(sys.modules, "pyspark", types.ModuleType("pyspark"))
    prefer_installed_pyspark()
    assert sys.path == path
    monkeypatch.delitem(sys.modules, "pyspark")
    monkeypatch.delitem(sys.modules, "py4j", raising=False)
    prefer_installed_pyspark()
    assert sys.path == [str(tmp_path / "site")]
