"""`venice up`, `status`, `down` on a platform of their own: nothing is left running or listening afterwards."""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path

import pytest

from tests.support.leftovers import leaves_nothing, platform_parts
from tests.support.platform import make_platform_env
from venice_core.embedded import kafka


@pytest.mark.kafka  # a platform of its own
def test_up_status_down_leaves_no_process(tmp_path: Path) -> None:
    env = make_platform_env(tmp_path / "home")
    up = env.venice("up", check=True)
    try:  # a failed check leaves nothing running behind it
        assert "kafka started" in up.stdout and "metadata store ready" in up.stdout
        pid = kafka.process(env.config).pid()
        assert pid is not None

        assert "already running" in env.venice("up", check=True).stdout
        status = env.venice("status")
        assert status.returncode == 0, status.stdout + status.stderr
        assert "kafka            healthy" in status.stdout
    except BaseException:
        env.venice("down")
        raise

    with leaves_nothing(*platform_parts(env.config)):  # no process of any component, no port listening
        down = env.venice("down", check=True).stdout
    assert "kafka stopped" in down and "region server dc-0 stopped" in down
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split(")")[1][:3]
    assert not kafka.is_healthy(env.config, timeout=1)
    status = env.venice("status")
    assert status.returncode == 1 and "not running" in status.stdout
    assert "was not running" in env.venice("down", check=True).stdout

    # A component that cannot start (dc-1's port is taken): `venice up` fails in one line and stops what it started.
    # Fresh ports: the first platform's were free for a while, and another test worker may have taken one since.
    env = make_platform_env(tmp_path / "home2")
    with leaves_nothing(*platform_parts(env.config)), socket.socket() as taken:  # (closed before the check)
        taken.bind(("127.0.0.1", env.config.server_port("dc-1")))
        taken.listen()
        failed = env.venice("up")
        assert failed.returncode != 0 and failed.stderr.startswith("error: region server dc-1 ")
    assert kafka.process(env.config).pid() is None


def _bin_with(tmp_path: Path, *programs: str) -> str:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for program in programs:
        os.symlink(shutil.which(program), bin_dir / program)
    return str(bin_dir)


def test_missing_java_is_one_clear_error(tmp_path: Path) -> None:
    env = make_platform_env(tmp_path / "home")
    env.env["PATH"] = _bin_with(tmp_path)
    result = env.venice("up")
    assert result.returncode != 0
    assert result.stderr.strip() == (
        "error: 'java' is not installed or not on PATH: install a Java 17+ runtime "
        "(Debian: apt-get install openjdk-17-jre-headless)"
    )


def test_missing_maven_is_one_clear_error(tmp_path: Path) -> None:
    env = make_platform_env(tmp_path / "home")
    env.env["PATH"] = _bin_with(tmp_path, "java")
    env.env["VENICE_CACHE_DIR"] = str(tmp_path / "empty-cache")
    result = env.venice("up")
    assert result.returncode != 0
    assert result.stderr.strip().startswith("error: 'mvn' is not installed or not on PATH: install Apache Maven")
