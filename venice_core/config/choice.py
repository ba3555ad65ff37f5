"""Which config is in effect, chosen in one place, and passed on to every process the platform starts.

The file is `$VENICE_CONFIG`'s, else a profile's (`venice --profile NAME` or `$VENICE_PROFILE`: a file in the
project's deploy/), else `<data dir>/venice.properties` when there is one (the data dir: `$VENICE__DATA_DIR`, else
`~/.venice`); else the defaults alone apply. `VENICE__<KEY>` variables override single keys over any of them."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from venice_core.config import keys as K
from venice_core.config.build import DEFAULT_DATA_DIR, Setting, build_config
from venice_core.config.model import ClusterConfig
from venice_core.errors import ConfigError

ENV_CONFIG = "VENICE_CONFIG"
ENV_PROFILE = "VENICE_PROFILE"  # `venice --profile NAME`: the config file of a profile the project ships
ENV_DATA_DIR = K.KEYS[K.DATA_DIR].env  # `data.dir`'s override, and where a config file is looked for
# The Kafka credentials file of the process's principal (security.principals): set by whoever starts the process,
# for that process alone, never inherited through `process_env`.
ENV_KAFKA_CLIENT = "VENICE_KAFKA_CLIENT"
CONFIG_FILE_NAME = "venice.properties"

# The profiles: each a config file in the project's deploy/ (None: the built-in defaults, the embedded platform).
PROFILES_DIR = Path(__file__).resolve().parents[2] / "deploy"
PROFILES: Mapping[str, str | None] = MappingProxyType(
    {
        "embedded": None,
        "replicated": "replicated.properties",
        "cluster": "cluster.properties",
        "hosts": "hosts.properties",
    }
)


def parse_properties(text: str, source: str) -> dict[str, Setting]:
    """Parse `key=value` (or `key: value`) lines; `#` and `!` start comments, as in Java properties files."""
    settings: dict[str, Setting] = {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        match = re.match(r"^([^=:\s]+)\s*[=:]\s*(.*)$", line)
        where = f"{source}:{lineno}"
        if not match:
            raise ConfigError(f"{where}: malformed line (expected key=value): {raw.strip()!r}")
        key, value = match.group(1), match.group(2).strip()
        if key in settings:
            raise ConfigError(f"{where}: duplicate key '{key}' (first set at {settings[key].where})")
        settings[key] = Setting(value, where)
    return settings


def profile_path(name: str) -> Path | None:
    """A profile's config file (None for `embedded`); ConfigError naming the profiles for an unknown one."""
    if name not in PROFILES:
        raise ConfigError(f"unknown profile {name!r} (profiles: {', '.join(PROFILES)})")
    file = PROFILES[name]
    return None if file is None else PROFILES_DIR / file


def config_path(env: Mapping[str, str] | None = None) -> Path | None:
    """The properties file in effect, or None when only the defaults apply: `$VENICE_CONFIG`'s, else the profile's
    (`$VENICE_PROFILE`), else `<data dir>/venice.properties` when there is one."""
    env = os.environ if env is None else env
    if env.get(ENV_PROFILE):
        path = profile_path(env[ENV_PROFILE])
        given = Path(env[ENV_CONFIG]).expanduser() if env.get(ENV_CONFIG) else None
        if given is not None and (path is None or given.resolve() != path.resolve()):
            raise ConfigError(
                f"${ENV_CONFIG} ({given}) and the profile {env[ENV_PROFILE]!r} both name the config: choose one"
            )
        if path is not None:
            return path
    if env.get(ENV_CONFIG):
        path = Path(env[ENV_CONFIG]).expanduser()
        if not path.is_file():
            raise ConfigError(f"${ENV_CONFIG} names {path}, which is not a file")
        return path
    data_dir = Path(env[ENV_DATA_DIR]).expanduser() if env.get(ENV_DATA_DIR) else DEFAULT_DATA_DIR
    candidate = data_dir / CONFIG_FILE_NAME
    return candidate if candidate.is_file() else None


def load_config(env: Mapping[str, str] | None = None) -> ClusterConfig:
    env = os.environ if env is None else env
    path = config_path(env)
    if path is None:
        return build_config({}, "built-in defaults", env)
    return build_config(parse_properties(path.read_text(), str(path)), str(path), env)


def process_env(config: ClusterConfig) -> dict[str, str]:
    """The environment of a process started for this config (region server, Spark job, Airflow and its tasks): it
    loads the same config and inherits PYTHONPATH, so hook modules outside the project can be named. The config
    reaches it as one choice, its file (`$VENICE_CONFIG`), however this process chose it: a profile named by `venice
    --profile` or `$VENICE_PROFILE` is passed on as the file it names, never beside it (a process that imports the
    project from elsewhere, a Spark job's shipped package, would find the profile's file somewhere else). The
    `VENICE__` overrides are inherited as they are; this process's Kafka principal is not."""
    env = dict(os.environ)
    env.pop(ENV_PROFILE, None)
    env.pop(ENV_KAFKA_CLIENT, None)  # each process's starter names its principal
    if Path(config.source).is_file():
        env[ENV_CONFIG] = str(Path(config.source).resolve())
    else:
        env.pop(ENV_CONFIG, None)
        env[ENV_DATA_DIR] = str(config.data_dir)
    return env
