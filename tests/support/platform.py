"""An embedded platform in a temporary home, on free ports, configured through a real properties file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from venice_core.config import ClusterConfig, load_config
from venice_core.embedded.sandbox import write_sandbox_config

VENICE = str(Path(sys.executable).with_name("venice"))
SCHEMAS = Path(__file__).parents[2] / "examples" / "schemas"


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

    def venice_background(self, *args: str) -> subprocess.Popen[str]:
        """Start a `venice` command and return at once (to act on the platform while it runs)."""
        return subprocess.Popen(
            [VENICE, *args], env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )

    def create_user_store(self, prefix: str, partitions: int = 1, *options: str) -> str:
        """A new store, uniquely named, with the example user key and value schemas."""
        store = f"{prefix}_{uuid.uuid4().hex[:8]}"
        self.venice(
            "store",
            "create",
            store,
            "--key-schema",
            str(SCHEMAS / "user_key.avsc"),
            "--value-schema",
            str(SCHEMAS / "user_value_v1.avsc"),
            "--partitions",
            str(partitions),
            *options,
            check=True,
        )
        return store

    def serving(self, store: str) -> dict[str, int]:
        """Each region's current version of the store."""
        info = json.loads(self.venice("store", "show", store, "--json", check=True).stdout)
        return {region: v["current"] for region, v in info["regions"].items()}


def make_platform_env(home: Path, extra: dict[str, str] | None = None) -> PlatformEnv:
    properties = write_sandbox_config(home, extra)
    env = {**os.environ, "VENICE_CONFIG": str(properties)}
    env.pop("VENICE_HOME", None)
    return PlatformEnv(home=home, properties=properties, env=env)
