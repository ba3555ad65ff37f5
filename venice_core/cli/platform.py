"""`venice up`, `venice down`, `venice status`."""

from __future__ import annotations

import json

import typer

from venice_core.config import load_config
from venice_core.embedded import platform


def up() -> None:
    """Bring up the embedded platform: Kafka, the metadata store (migrated), and the services after them."""
    platform.up(load_config(), report=typer.echo)


def down() -> None:
    """Stop every component of the embedded platform."""
    platform.down(load_config(), report=typer.echo)


def status(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Show each component and whether it is healthy; exits 1 if any is not."""
    components = platform.status(load_config())
    if as_json:
        typer.echo(json.dumps([c.__dict__ for c in components], indent=2))
    else:
        for c in components:
            typer.echo(f"{c.name:<16} {'healthy' if c.healthy else 'DOWN':<8} {c.detail}")
    if not all(c.healthy for c in components):
        raise typer.Exit(1)
