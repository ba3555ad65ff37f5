"""What the CLI tests share: a platform config with a migrated metadata store and no running component, one per
test module (the CLI runs in-process against it, `PlatformEnv.cli`)."""

from __future__ import annotations

import pytest

from tests.support.metadata import migrated
from tests.support.platform import PlatformEnv, make_platform_env
from venice_core.meta import MetadataStore


@pytest.fixture(scope="module")
def cli_env(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> PlatformEnv:
    env = make_platform_env(tmp_path_factory.mktemp(request.module.__name__.rsplit(".", 1)[-1]) / "home")
    meta = MetadataStore(env.config.metadata_db_url)
    migrated(meta)
    meta.dispose()
    return env
