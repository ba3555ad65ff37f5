"""A profile the project ships (`config.PROFILES`: the embedded platform, `replicated`, `cluster`), chosen as a user
chooses it (by name: `VENICE_PROFILE`, `venice --profile`, `make demo*`), with a home of the test's own: the
profile's data dir (`~/.venice*`) is the test's, its ports the profile's own, which nothing else on a test machine
uses (the sandboxes take theirs from 20000-32000). The jars already fetched are kept (`VENICE_CACHE_DIR`)."""

from __future__ import annotations

import os
import shutil
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support.leftovers import leaves_nothing, platform_parts
from tests.support.platform import PlatformEnv
from venice_core.config import ENV_CONFIG, ENV_DATA_DIR, ENV_PROFILE, ClusterConfig, profile_path
from venice_core.embedded import network, platform
from venice_core.host.cache import ENV_CACHE_DIR, cache_dir

REPO = Path(__file__).parents[2]
VENV_BIN = REPO / ".venv" / "bin"
# What this process's environment must not pass on: a profile is chosen by name alone.
CHOICES = (ENV_CONFIG, ENV_PROFILE, ENV_DATA_DIR)
# The cluster tests' profile: the hosts profile (a host per process) where network namespaces can be made, the
# stricter form of the cluster profile; else the cluster profile itself.
CLUSTER_PROFILE = "hosts" if os.geteuid() == 0 and shutil.which("ip") and shutil.which("nsenter") else "cluster"


@contextmanager
def as_a_user(home: Path) -> Iterator[dict[str, str]]:
    """This process (and what it starts) with `home` as the user's home and no config chosen, as a new user's shell
    is: `~` is `home` for the tests' own reads too. Its environment, with the venv's commands first on the PATH
    (`source .venv/bin/activate`). Restored afterwards."""
    cache = cache_dir()  # before HOME moves: the jars and archives already fetched and built
    saved = {key: os.environ.get(key) for key in ("HOME", ENV_CACHE_DIR, *CHOICES)}
    for key in CHOICES:
        os.environ.pop(key, None)
    os.environ.update({"HOME": str(home), ENV_CACHE_DIR: str(cache)})
    try:
        yield {**os.environ, "PATH": f"{VENV_BIN}:{os.environ.get('PATH', '')}", "VIRTUAL_ENV": str(VENV_BIN.parent)}
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def profile_env(env: dict[str, str], profile: str) -> PlatformEnv:
    """The platform of a profile chosen by name (`VENICE_PROFILE`), in a user's environment (`as_a_user`)."""
    properties = profile_path(profile)
    chosen = {**env, ENV_PROFILE: profile} if properties is not None else dict(env)
    home = Path(env["HOME"])
    return PlatformEnv(home=home, properties=properties or home / ".venice" / "venice.properties", env=chosen)


def assert_ports_free(config: ClusterConfig, profile: str) -> None:
    """The profile's ports (or its hosts) are free: a platform of the profile already up (someone's `make demo`) is
    named, rather than met as a failed start."""
    if config.hosts.enabled:
        if network.namespaces(config):
            pytest.fail(
                f"the {profile} profile's hosts (bridge {config.hosts.bridge}) are in use: stop the platform running "
                f"on them (`VENICE_PROFILE={profile} make down`) before these tests, which run that profile themselves"
            )
        return
    taken = [port for process in platform.plan(config) for port in process.ports if _listening(port)]
    if taken:
        pytest.fail(
            f"the {profile} profile's ports {taken} are in use: stop the platform running on them "
            f"(`VENICE_PROFILE={profile} make down`) before these tests, which run that profile themselves"
        )


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


@contextmanager
def stopped_at_the_end(env: PlatformEnv) -> Iterator[None]:
    """`venice down` at the end, as the README says, leaving no process or port of the platform behind."""
    config = env.config
    try:
        yield
    finally:
        with leaves_nothing(*platform_parts(config)):
            env.venice("down", timeout=600)
        if config.hosts.enabled:  # and no namespace, link or bridge of its hosts
            assert network.namespaces(config) == [], network.namespaces(config)
            left = [name for name in network.links() if name.startswith(config.hosts.bridge[:8])]
            assert left == [], left
            assert network.route_to(config.hosts.gateway).find("unreachable") == -1  # the subnet's route went too
