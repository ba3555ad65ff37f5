"""Where the platform keeps its security material, and how a private file is written."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from venice_core.config import ClusterConfig
from venice_core.config.security_layout import ca_file, certificate_files, certificates_dir, security_dir

KEY_MODE = 0o600


def folder(config: ClusterConfig) -> Path:
    """Where the platform keeps its CA (when it made it) and the certificates it issued."""
    return security_dir(config.data_dir)


def ca_path(config: ClusterConfig) -> Path:
    """The CA certificate every certificate of the platform is checked against: the operator's, or its own."""
    return ca_file(config.data_dir, config.security.ca_cert)


def certificate(config: ClusterConfig, name: str) -> tuple[Path, Path]:
    """The certificate and key the platform issued `name` (a host or a client role)."""
    return certificate_files(config.data_dir, name)


def certificates_folder(config: ClusterConfig) -> Path:
    return certificates_dir(config.data_dir)


def write_private(path: Path, data: bytes) -> None:
    """`data` into `path`, mode 0600 from its first byte, whole or not at all."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.partial")  # writers at once
    partial.unlink(missing_ok=True)
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, KEY_MODE)
    with os.fdopen(descriptor, "wb") as file:
        file.write(data)
    os.replace(partial, path)


def keep_private(path: Path, text: str) -> Path:
    """`text` in `path` (mode 0600), written only when it is not there already: a file many processes read."""
    try:
        if path.read_text() == text:
            return path
    except OSError:
        pass
    write_private(path, text.encode())
    return path
