"""`python -m venice_core.meta migrate`: the metadata store's schema brought to the latest revision (Alembic), as
`venice up` does first; docker-compose.yaml's `migrate` service runs it once before the other services start."""

from __future__ import annotations

import argparse

from venice_core.config import load_config
from venice_core.meta import MetadataStore


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m venice_core.meta", description=__doc__)
    parser.add_argument("command", choices=["migrate"], help="migrate: the schema to the latest revision")
    parser.parse_args()
    meta = MetadataStore(load_config().metadata_db_url)
    try:
        meta.migrate()
        print(f"metadata store ready at {meta.safe_url} (schema {meta.current_revision()})")
    finally:
        meta.dispose()


if __name__ == "__main__":
    main()
