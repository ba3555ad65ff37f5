"""A fresh machine's first run: several processes find the cache empty at once (the suite's workers, `venice up`
beside `make test`) and each must end up with the same, whole entry."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from venice_core.embedded.cache import ENV_CACHE_DIR

FETCH = "from venice_core.embedded.kafka import ensure_jars; print(ensure_jars())"
# Fills an entry the way every cache user does (`filling`, `staging`, rename), slowly, recording each fill.
SLOW_FILL = """
import sys, time
from pathlib import Path
from venice_core.embedded.cache import filling, staging
entry, log = Path(sys.argv[1]), Path(sys.argv[2])
with filling(entry):
    if not entry.exists():
        with log.open("a") as out:
            out.write("fill\\n")
        partial = staging(entry)
        partial.write_text("half")
        time.sleep(1.0)
        partial.write_text("whole")
        partial.replace(entry)
print(entry.read_text())
"""


def _at_once(argvs: list[list[str]], env: dict[str, str]) -> list[subprocess.CompletedProcess[str]]:
    started = [
        subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for argv in argvs
    ]
    results = []
    for process in started:
        out, err = process.communicate(timeout=600)
        results.append(subprocess.CompletedProcess(process.args, process.returncode, out, err))
    return results


def test_processes_filling_one_entry_at_once_take_turns_and_all_see_it_whole(tmp_path: Path) -> None:
    entry, log = tmp_path / "cache" / "entry", tmp_path / "fills.log"
    results = _at_once([[sys.executable, "-c", SLOW_FILL, str(entry), str(log)]] * 3, dict(os.environ))
    assert [(r.returncode, r.stdout.strip()) for r in results] == [(0, "whole")] * 3, [r.stderr for r in results]
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
