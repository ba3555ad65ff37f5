"""The platform's generated secrets (passwords, shared keys): each made once, the first time any process asks for it,
and kept in `<data.dir>/security/secrets/<name>`, mode 0600. Two processes asking at once get the same secret: the
first file in place wins (a hard link cannot replace an existing name), the other reads it."""

from __future__ import annotations

import os
import re
import secrets as random
import threading
from pathlib import Path

from venice_core.config import ClusterConfig
from venice_core.config.security_layout import secrets_dir
from venice_core.errors import ConfigError
from venice_core.security.files import KEY_MODE

# The secret's name is part of a file name: a principal, `kafka-push.<store>`, a store's name is letters, digits, '_'
# and '-' (controller.stores.check_name).
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,200}")
SECRET_BYTES = 24  # 192 bits, URL-safe: no quoting in a JAAS line, a properties file or a connection URL


def secrets_folder(config: ClusterConfig) -> Path:
    return secrets_dir(config.data_dir)


def secret(config: ClusterConfig, name: str) -> str:
    """The secret called `name`, made now if it does not exist yet."""
    if not NAME_PATTERN.fullmatch(name):
        raise ConfigError(f"invalid secret name {name!r}")
    path = secrets_folder(config) / name
    try:
        return _read(path)
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    partial = path.with_name(f".{name}.{os.getpid()}.{threading.get_ident()}.partial")  # one per writer
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, KEY_MODE)
    with os.fdopen(descriptor, "w") as file:
        file.write(random.token_urlsafe(SECRET_BYTES) + "\n")
    try:
        os.link(partial, path)  # fails if another process put its own in place first: that one is the secret
    except FileExistsError:
        pass
    finally:
        partial.unlink(missing_ok=True)
    return _read(path)


def _read(path: Path) -> str:
    value = path.read_text().strip()
    if not value:
        raise ConfigError(f"{path} is empty: delete it and run `venice up` to make the secret again")
    return value


def every_secret(config: ClusterConfig) -> dict[str, str]:
    """Every secret made so far, by name: what a leak check looks for."""
    found = secrets_folder(config)
    if not found.is_dir():
        return {}
    return {path.name: _read(path) for path in sorted(found.iterdir()) if not path.name.startswith(".")}


def forget(config: ClusterConfig, name: str) -> None:
    """The secret's file, gone (the next ask makes a new one)."""
    if NAME_PATTERN.fullmatch(name):
        (secrets_folder(config) / name).unlink(missing_ok=True)
