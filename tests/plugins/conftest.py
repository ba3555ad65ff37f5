"""Airflow imported by the plugin tests uses a throwaway AIRFLOW_HOME and sees the project's plugins folder."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

PLUGINS = Path(__file__).parents[2] / "plugins"
os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="venice-airflow-home-"))
os.environ["AIRFLOW__CORE__PLUGINS_FOLDER"] = str(PLUGINS)
os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
if str(PLUGINS) not in sys.path:  # as Airflow puts it on sys.path
    sys.path.insert(0, str(PLUGINS))
