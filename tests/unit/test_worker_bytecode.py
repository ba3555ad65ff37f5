"""Spark's Python workers import pyspark from its zip: the zip rewritten with bytecode beside each module
(`spark.submit.worker_bytecode`), loaded as is, once per Python."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import zipfile
from pathlib import Path

from venice_core.spark.submit.worker_bytecode import build, compiled, worker_zips

MODULES = {
    "pkg/__init__.py": "",
    "pkg/mod.py": "def fail():\n    raise ValueError('from the zip')\n",
    "pkg/data.txt": "x",
}


def make_zip(path: Path) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in MODULES.items():
            archive.writestr(name, text)
    return path


def test_the_zip_gets_this_pythons_bytecode_beside_each_module_and_keeps_everything_else(tmp_path: Path) -> None:
    path = make_zip(tmp_path / "lib.zip")
    assert not compiled(path)
    build(path)
    assert compiled(path)
    with zipfile.ZipFile(path) as archive:
        names = set(archive.namelist())
        assert names == {*MODULES, "pkg/__init__.pyc", "pkg/mod.pyc"}
        assert all(archive.read(name).decode() == text for name, text in MODULES.items())
        assert archive.read("pkg/mod.pyc")[:4] == importlib.util.MAGIC_NUMBER
    # Imported from the zip, by a fresh interpreter: a traceback still names the module's file in the zip.
    probe = f"import sys; sys.path.insert(0, {str(path)!r}); import pkg.mod; pkg.mod.fail()"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert "ValueError: from the zip" in result.stderr and f"{path}/pkg/mod.py" in result.stderr, result.stderr


def test_a_zip_already_compiled_is_left_alone_and_another_pythons_bytecode_is_replaced(tmp_path: Path) -> None:
    path = build(make_zip(tmp_path / "lib.zip"))
    before = path.stat().st_mtime_ns
    build(path)
    assert path.stat().st_mtime_ns == before
    foreign = tmp_path / "foreign.zip"
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(foreign, "w") as target:
        for entry in source.infolist():
            data = source.read(entry)
            target.writestr(entry, b"\0\0\r\n" + data[4:] if entry.filename.endswith(".pyc") else data)
    assert not compiled(foreign)
    build(foreign)
    assert compiled(foreign)
    assert not list(tmp_path.glob("*.partial*"))


def test_the_zips_are_those_spark_puts_on_its_workers_path() -> None:
    names = [path.name for path in worker_zips()]
    assert "pyspark.zip" in names and any(name.startswith("py4j") for name in names), names
