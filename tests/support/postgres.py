"""A real PostgreSQL server (Debian's package) in a temporary directory, for the tests' lifetime: the embedded one
(`venice_core.embedded.postgres`), on a free port, with no database but `postgres`."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.sandbox import free_ports
from venice_core.embedded.postgres import Server


@contextmanager
def postgres_server(base_dir: Path) -> Iterator[str]:
    """A server with its data dir and log in `base_dir`; yields the URL of its `postgres` database."""
    (port,) = free_ports(1)
    server = Server(base_dir / "pgdata", base_dir, port, databases=())
    server.start()
    try:
        yield server.url()
    finally:
        server.stop()
