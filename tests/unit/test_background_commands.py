"""A `venice` command a test starts in the background and leaves running (the test failed, or the suite was stopped,
before it waited) is stopped after the test: a cluster test's push once outlived the session, its platform gone."""

from __future__ import annotations

import time
from pathlib import Path

from tests.support.metadata import migrated
from tests.support.platform import make_platform_env, stop_background_commands
from venice_core.meta import MetadataStore


def test_a_command_left_running_is_stopped(tmp_path: Path) -> None:
    env = make_platform_env(tmp_path / "home")
    migrated(MetadataStore(env.config.metadata_db_url)).dispose()
    server = env.venice_background("server", "--region", "dc-0")  # runs until stopped (no version: no broker needed)
    time.sleep(1.0)
    assert server.poll() is None, server.communicate()
    stop_background_commands()
    assert server.poll() is not None
    stop_background_commands()  # each is stopped once: nothing left to stop
