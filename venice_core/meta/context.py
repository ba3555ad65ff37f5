"""The cluster config with an opened, migrated metadata store: what every command and Airflow task starts from."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from venice_core.config import ClusterConfig, load_config
from venice_core.meta.db import MetadataStore


@contextmanager
def metadata() -> Iterator[tuple[ClusterConfig, MetadataStore]]:
    config = load_config()
    meta = MetadataStore(config.metadata_db_url)
    try:
        meta.check_migrated()
        yield config, meta
    finally:
        meta.dispose()
