"""A fresh machine's first run: several processes find the cache empty at once (the suite's workers, `venice up`
beside `make test`) and each must end up with the same, whole entry."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from venice_core.host.cache import ENV_CACHE_DIR, filling

FETCH = "from venice_core.embedded.kafka import ensure_jars; print(ensure_jars())"
# Fills an entry the way every cache user does (`filling`, `staging`, rename), recording each fill; says "ready"
# just before it asks for the entry's lock.
FILLER = """
import sys
from pathlib import Path
from venice_core.host.cache import filling, staging
entry, log = Path(sys.argv[1]), Path(sys.argv[2])
print("ready", flush=True)
with filling(entry):
    if not entry.exists():
        with log.open("a") as out:
            out.write("fill\\n")
        partial = staging(entry)
        partial.write_text("whole")
        partial.replace(entry)
print(entry.read_text())
"""


def _at_once(argvs: list[list[str]], env: dict[str, str]) -> list[subprocess.CompletedProcess[str]]:
    started = [subprocess.Popen(a, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for a in argvs]
    results = []
    for process in started:
        out, err = process.communicate(timeout=600)
        results.append(subprocess.CompletedProcess(process.args, process.returncode, out, err))
    return results


def test_processes_filling_one_entry_at_once_take_turns_and_all_see_it_whole(tmp_path: Path) -> None:
    """Three fillers find the entry missing at once (they all wait on its lock, held here, before any looks): one
    fills it, the others find it whole; a staging copy a killed filler left is cleared."""
    entry, log = tmp_path / "cache" / "entry", tmp_path / "fills.log"
    entry.parent.mkdir()
    (entry.parent / "entry.partial-999999").write_text("half, from a filler killed mid-way")
    argv = [sys.executable, "-c", FILLER, str(entry), str(log)]
    with filling(entry):
        fillers = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(3)]
        for filler in fillers:
            assert filler.stdout is not None and filler.stdout.readline() == "ready\n"
        assert not log.exists()  # all three are waiting on the lock
    outcomes = [(f.wait(timeout=60), f.communicate()) for f in fillers]
    assert [(code, out.strip()) for code, (out, _err) in outcomes] == [(0, "whole")] * 3, outcomes
    assert log.read_text() == "fill\n"  # one process filled it; the others found it whole
    assert sorted(p.name for p in entry.parent.iterdir()) == ["entry", "entry.lock"]  # no staging copy left


@pytest.mark.kafka  # Maven and the broker's jars
def test_three_jar_fetches_at_once_into_an_empty_cache_all_succeed_with_the_same_jars(tmp_path: Path) -> None:
    cache = tmp_path / "empty-cache"
    env = {**os.environ, ENV_CACHE_DIR: str(cache)}
    results = _at_once([[sys.executable, "-c", FETCH]] * 3, env)
    assert [r.returncode for r in results] == [0, 0, 0], [r.stderr[-2000:] for r in results]
    folders = {Path(r.stdout.strip()) for r in results}
    assert len(folders) == 1, folders
    (jars,) = folders
    names = sorted(p.name for p in jars.glob("*.jar"))
    assert any(n.startswith("kafka_") for n in names) and len(names) > 20, names
    assert (jars / ".complete").exists()
    assert not [p.name for p in cache.iterdir() if ".partial" in p.name]  # no half-filled copy left behind
