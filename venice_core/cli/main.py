"""Entry point of the `venice` command: every error the platform raises is one line on stderr."""

from __future__ import annotations

import sys

import typer

from venice_core.cli import airflow, data, platform
from venice_core.cli.davinci import davinci_app
from venice_core.cli.rollout import rollout_app
from venice_core.cli.stores import schema_app, store_app
from venice_core.cli.stream import stream_app
from venice_core.errors import VeniceError

app = typer.Typer(
    name="venice",
    help="A Venice-style derived-data platform: stores, pushes, rollouts, reads.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    # Click's own help layout (Typer passes the root's mode down to every command): it never cuts an option name,
    # where rich's boxed tables squeeze them to fit the terminal (`--auto-register-sc…` at 80 columns).
    rich_markup_mode=None,
    context_settings={"max_content_width": 120},
)
app.command("up")(platform.up)
app.command("down")(platform.down)
app.command("status")(platform.status)
app.command("metrics")(platform.metrics)
app.command("push")(data.push)
app.command("repush")(data.repush)
app.command("get")(data.get)
app.command("write")(data.write)
app.command("delete")(data.delete)
app.command("server")(data.server)
app.command("airflow", context_settings=airflow.CONTEXT_SETTINGS, options_metavar="[--help] ARGS...")(airflow.airflow)
app.add_typer(store_app, name="store")
app.add_typer(schema_app, name="schema")
app.add_typer(rollout_app, name="rollout")
app.add_typer(stream_app, name="stream")
app.add_typer(davinci_app, name="davinci")


def main(argv: list[str] | None = None) -> None:
    """Run the command line `argv` (default: the process's own); exits with the command's status."""
    try:
        app(args=argv, prog_name="venice")
    except VeniceError as exc:
        typer.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        sys.exit(130)


if __name__ == "__main__":
    main()
