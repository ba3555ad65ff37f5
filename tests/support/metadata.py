"""A test's fresh metadata store, migrated by copying a SQLite file this process migrated once: Alembic's upgrade of
an empty database costs ~0.1 s of CPU, and most tests of the fast tier make one (a tenth of its CPU, profiled).
`tests/integration/test_metadata_store.py` migrates for real."""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path

from sqlalchemy.engine import make_url

from venice_core.meta import MetadataStore


def migrated(meta: MetadataStore) -> MetadataStore:
    """`meta` at the newest migration: a SQLite file not made yet becomes a copy of the migrated one; anything
    else (a file in use, another database) is migrated by Alembic."""
    url = make_url(meta.url)
    path = Path(url.database) if url.get_backend_name() == "sqlite" and url.database else None
    if path is None or path.exists():
        meta.migrate()
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(_migrated_file(), path)
    return meta


@functools.cache
def _migrated_file() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="venice-meta-template-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    path = folder / "meta.db"
    template = MetadataStore(f"sqlite:///{path}")
    try:
        template.migrate()
    finally:
        template.dispose()  # the last connection closed: its write-ahead log folded into the file
    if path.with_name(path.name + "-wal").exists():
        raise AssertionError(f"{path}: its write-ahead log outlived its connections: a copy would miss it")
    return path
