"""An embedded platform in a temporary home, on free ports, configured through a real properties file."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from venice_core.config import ClusterConfig, load_config
from venice_core.embedded.sandbox import write_sandbox_config

VENICE = str(Path(sys.executable).with_name("venice"))


@dataclass
class PlatformEnv:
    home: Path
    properties: Path
    env: dict[str, str] = field(default_factory=dict)

    @property
    def config(self) -> ClusterConfig:
        return load_config(self.env)

    def venice(self, *args: str, check: bool = False, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """Run the `venice` command as a user would."""
        result = subprocess.run([VENICE, *args], env=self.env, capture_output=True, text=True, timeout=timeout)
        if check and result.returncode != 0:
            raise AssertionError(f"venice {' '.join(args)} failed ({result.returncode}):\n{result.stderr}")
        return result


def make_platform_env(home: Path, extra: dict[str, str] | None = None) -> PlatformEnv:
    properties = write_sandbox_config(home, extra)
    env = {**os.environ, "VENICE_CONFIG": str(properties)}
    env.pop("VENICE_HOME", None)
    return PlatformEnv(home=home, properties=properties, env=env)
