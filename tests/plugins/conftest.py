"""Airflow imported by the plugin tests uses a throwaway AIRFLOW_HOME and sees the project's plugins folder."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

PLUGINS = Path(__file__).parents[2] / "plugins"
if "AIRFLOW_HOME" not in os.environ:
    _home = tempfile.mkdtemp(prefix="venice-airflow-home-")
    os.environ["AIRFLOW_HOME"] = _home
    atexit.register(shutil.rmtree, _home, ignore_errors=True)  # the worker's own: gone with it
os.environ["AIRFLOW__CORE__PLUGINS_FOLDER"] = str(PLUGINS)
os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
if str(PLUGINS) not in sys.path:  # as Airflow puts it on sys.path
    sys.path.insert(0, str(PLUGINS))

# Airflow's modules after its home and plugins folder are set above.
from airflow.sdk.definitions.context import _AIRFLOW_PARSING_CONTEXT_DAG_ID  # noqa: E402

from tests.support.metadata import migrated  # noqa: E402
from tests.support.platform import make_platform_env  # noqa: E402
from venice_core.config import ClusterConfig  # noqa: E402
from venice_core.meta import MetadataStore  # noqa: E402


@pytest.fixture
def platform(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[ClusterConfig, MetadataStore]]:
    """A platform config of its own with a migrated metadata store, named where the DAG file and the tasks look
    (`$VENICE_CONFIG`), outside any task's parsing context: the DAG files parsed as the dag-processor does."""
    env = make_platform_env(tmp_path / "home")
    monkeypatch.setenv("VENICE_CONFIG", str(env.properties))
    monkeypatch.delenv("VENICE__DATA_DIR", raising=False)
    monkeypatch.delenv(_AIRFLOW_PARSING_CONTEXT_DAG_ID, raising=False)
    meta = MetadataStore(env.config.metadata_db_url)
    migrated(meta)
    yield env.config, meta
    meta.dispose()
