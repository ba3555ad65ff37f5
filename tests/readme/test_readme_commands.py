"""The README's commands as a new user runs them: `make demo`'s job (scripts/demo.sh), then "Your first ten minutes"
line by line as the README has it, on the platform the README chooses (no config: the embedded platform), on its
own ports, with a home of the test's own. The records are fewer than the demo's million (`DEMO_RECORDS`), to fit
the suite. `make demo-replicated` (the same script, the profile chosen by `DEMO_PROFILE`) is here too and `make
demo-cluster` is `tests/cluster/`'s, both marked `cluster`: `make test-cluster` runs them, beyond `make test`'s time
budget. A README edit that breaks a command breaks these tests."""

from __future__ import annotations

import re
import shlex
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.profiles import REPO, as_a_user, assert_ports_free, profile_env, stopped_at_the_end
from venice_core.utils.waiting import poll_until

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.airflow]

DEMO_RECORDS = 20_000
# What a user asks again while it says "not yet": a read of what is still on its way (a nearline write to another
# region, a Da Vinci client still ingesting), until it answers what the README says it will (the 10,000 users pushed
# and Bob, written nearline). Everything else must succeed the first time.
EVENTUAL = {"venice get ": "", "venice davinci sql ": r"\b10001\b"}
EVENTUAL_SECONDS = 90


def first_ten_minutes() -> list[str]:
    """The commands of the README's "Your first ten minutes" block, one per entry (continued lines joined), without
    its comments."""
    text = (REPO / "README.md").read_text()
    section = text[text.index("## Your first ten minutes") :]
    block = section[section.index("```\n") + 4 :]
    block = block[: block.index("```")]
    commands, pending = [], ""
    for line in block.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        pending += line.removesuffix("\\").strip() + " "
        if not line.endswith("\\"):
            commands.append(re.sub(r"\s+#.*$", "", pending.strip()))
            pending = ""
    return commands


def run_demo(env: dict[str, str], profile: str | None = None) -> str:
    """`make demo` (or `make demo-<profile>`) past its install: scripts/demo.sh; its output."""
    demo_env = {**env, "DEMO_RECORDS": str(DEMO_RECORDS)} | ({"DEMO_PROFILE": profile} if profile else {})
    demo = subprocess.run(["scripts/demo.sh"], cwd=REPO, env=demo_env, capture_output=True, text=True, timeout=1200)
    assert demo.returncode == 0, demo.stdout + demo.stderr
    assert "version 1 of 'demo_users' is serving in every region" in demo.stdout, demo.stdout
    assert len(re.findall(r"^dc-\d user-\d{9}: \{", demo.stdout, re.M)) == 9, demo.stdout  # 3 keys x 3 regions
    return demo.stdout


@pytest.fixture
def user_home() -> Iterator[Path]:
    """A new user's home (PostgreSQL-free profiles: any folder will do), removed at the end."""
    home = Path(tempfile.mkdtemp(prefix="venice-readme-"))
    try:
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)


@pytest.mark.timeout(1200)  # a platform started, three pushes through Airflow
def test_make_demo_then_the_first_ten_minutes(tmp_path: Path, user_home: Path) -> None:
    scratch = tmp_path / "scratch"  # the README's /tmp, the test's own
    scratch.mkdir()
    with as_a_user(user_home) as user:
        embedded = profile_env(user, "embedded")
        assert_ports_free(embedded.config, "embedded")
        with stopped_at_the_end(embedded):
            run_demo(user)
            run_first_ten_minutes(user, scratch)


@pytest.mark.cluster
def test_make_demo_replicated(user_home: Path) -> None:
    with as_a_user(user_home) as user:
        replicated = profile_env(user, "replicated")
        assert_ports_free(replicated.config, "replicated")
        with stopped_at_the_end(replicated):
            out = run_demo(user, "replicated")
    for region in ("dc-0", "dc-1", "dc-2"):  # its `venice status`: three instances of each region
        assert all(re.search(rf"^{name}\s", out, re.M) for name in _servers(region)), out


def run_first_ten_minutes(env: dict[str, str], scratch: Path) -> None:
    """Each command of the block in a shell of the user's, in the repository (as after `make demo`); a command
    ending in `&` in the background, `kill -INT %1` to it."""
    background: subprocess.Popen[str] | None = None
    ran = []
    for command in first_ten_minutes():
        command = command.replace("/tmp/", f"{scratch}/")
        ran.append(command)
        if command.endswith("&"):
            background = subprocess.Popen(
                ["bash", "-c", command.removesuffix("&").strip()],
                cwd=REPO,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            continue
        if command == "kill -INT %1":
            assert background is not None, ran
            background.send_signal(signal.SIGINT)
            out, _ = background.communicate(timeout=60)
            assert background.returncode == 0, out  # stops cleanly
            continue
        expected = next((said for start, said in EVENTUAL.items() if command.startswith(start)), None)
        runs: list[subprocess.CompletedProcess[str]] = []

        def answered(
            command: str = command, expected: str | None = expected, runs: list[subprocess.CompletedProcess[str]] = runs
        ) -> bool:
            result = subprocess.run(
                ["bash", "-c", command], cwd=REPO, env=env, capture_output=True, text=True, timeout=900
            )
            runs.append(result)
            return result.returncode == 0 and re.search(expected or "", result.stdout) is not None

        ok = poll_until(answered, timeout=EVENTUAL_SECONDS if expected is not None else 0, interval=1)
        result = runs[-1]
        assert ok, f"{shlex.quote(command)} failed:\n{result.stdout}{result.stderr}"
    assert background is not None and background.poll() is not None, ran


def _servers(region: str) -> list[str]:
    return [f"server-{region}", f"server-{region}.1", f"server-{region}.2"]
