"""A real PostgreSQL server (Debian's package) in a temporary directory, for the tests' lifetime."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.sandbox import free_ports


def _bin_dir() -> Path:
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not candidates:
        raise RuntimeError(
            "PostgreSQL server binaries not found: run scripts/install-system-packages.sh --with-test-deps"
        )
    return Path(candidates[-1]).parent


def _as_postgres_user(argv: list[str]) -> list[str]:
    # The server refuses to run as root; Debian's package creates the `postgres` user.
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *argv]
    return argv


@contextmanager
def postgres_server(base_dir: Path) -> Iterator[str]:
    bins = _bin_dir()
    data = base_dir / "pgdata"
    base_dir.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        shutil.chown(base_dir, "postgres", "postgres")
    (port,) = free_ports(1)
    subprocess.run(
        _as_postgres_user([str(bins / "initdb"), "-D", str(data), "-U", "venice", "--auth=trust", "-E", "UTF8"]),
        check=True,
        capture_output=True,
    )
    log = base_dir / "postgres.log"
    subprocess.run(
        _as_postgres_user(
            [
                str(bins / "pg_ctl"),
                "-D",
                str(data),
                "-l",
                str(log),
                "-w",
                "-o",
                f"-c listen_addresses=127.0.0.1 -c port={port} -k {base_dir}",
                "start",
            ]
        ),
        check=True,
        capture_output=True,
    )
    try:
        url = f"postgresql+psycopg2://venice@127.0.0.1:{port}/postgres"
        deadline = time.monotonic() + 30
        import sqlalchemy

        while True:
            try:
                engine = sqlalchemy.create_engine(url)
                with engine.connect():
                    pass
                engine.dispose()
                break
            except sqlalchemy.exc.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.3)
        yield url
    finally:
        subprocess.run(
            _as_postgres_user([str(bins / "pg_ctl"), "-D", str(data), "-m", "fast", "stop"]),
            capture_output=True,
        )
