"""Entry point of the `venice` command: every error the platform raises, and every usage error, is one line on
stderr starting `error:`.

Exit statuses (each error's `exit_code`): 0 done; 2 a usage error (an unknown option, a value of the wrong type, a
missing argument) or a conf, name or setting refused (`ConfigError`); 3 a rollout stopped by a hook (ABORT or
ROLLBACK) or failed, a schema a hook refused, a drain that failed; 1 any other error (an unknown store, an
incompatible schema, Kafka, Airflow or a region server unreachable, ...), and `venice status` when a component is
not healthy; 130 interrupted; `venice airflow` exits with airflow's own status."""

from __future__ import annotations

import functools
import signal
import sys
import threading
from types import FrameType

import typer
import typer.main
from typer.core import TyperGroup

from venice_core.cli import airflow, data, platform
from venice_core.cli.access import acl_app, security_app
from venice_core.cli.context import ProfileOption, use_kafka_principal, use_profile
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


@app.callback()
def _common(profile: str | None = ProfileOption) -> None:
    """A Venice-style derived-data platform: stores, pushes, rollouts, reads."""
    use_profile(profile)
    use_kafka_principal()


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
store_app.add_typer(acl_app, name="acl")
app.add_typer(store_app, name="store")
app.add_typer(schema_app, name="schema")
app.add_typer(rollout_app, name="rollout")
app.add_typer(stream_app, name="stream")
app.add_typer(davinci_app, name="davinci")
app.add_typer(security_app, name="security")


class Terminated(KeyboardInterrupt):
    """SIGTERM (`timeout`, a closed terminal, a supervisor), taken as Ctrl-C is: what a command started is undone (a
    push in flight is stopped, its version killed) before it exits."""


_signalled: list[int] = []  # the SIGTERM seen (Typer turns the interrupt into an exit status of 130)


def _terminated(signum: int, _frame: FrameType | None) -> None:
    _signalled.append(signum)
    raise Terminated


@functools.cache
def command_tree() -> TyperGroup:
    """`app` as Click's command tree, built once per process: Typer builds it anew at every call, from every
    command's signature and type hints (~0.1 s of CPU), and a process may run many commands (the CLI tests run
    hundreds in theirs: a fifth of the fast tier's CPU). Typer's own call adds only its pretty exceptions, which
    `app` turns off."""
    tree = typer.main.get_command(app)
    if not isinstance(tree, TyperGroup):  # (an app with subcommands is a group)
        raise TypeError(f"the venice app is a {type(tree).__name__}, not a group")
    return tree


def main(argv: list[str] | None = None) -> None:
    """Run the command line `argv` (default: the process's own); exits with the command's status. Click's own
    errors come here too (not standalone): a usage error is one `error:` line, exit 2, like any bad input."""
    main_thread = threading.current_thread() is threading.main_thread()  # (a test may run the CLI in a thread)
    previous = signal.signal(signal.SIGTERM, _terminated) if main_thread else None  # a command may set its own
    try:
        code = command_tree().main(args=argv, prog_name="venice", standalone_mode=False)
    except typer.TyperException as exc:  # Click's (Typer's copy): usage errors (exit 2), a file it cannot open
        if type(exc).__name__ == "NoArgsIsHelpError":  # `venice`, `venice store`: the help, as before
            exc.show()  # type: ignore[attr-defined]  # a Click usage error (known by name): TyperException has no show
        else:
            typer.echo(f"error: {usage_error(exc)}", err=True)
        sys.exit(exc.exit_code)
    except typer.Abort:
        typer.echo("aborted", err=True)
        sys.exit(1)
    except VeniceError as exc:
        typer.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        if _signalled:
            typer.echo("terminated", err=True)
            sys.exit(143)
        typer.echo("interrupted", err=True)
        sys.exit(130)
    finally:
        if previous is not None:  # the caller's again (a test running the CLI in its process)
            signal.signal(signal.SIGTERM, previous)
    if _signalled:  # Typer answers an interrupt with exit status 130: this one was a SIGTERM
        typer.echo("terminated", err=True)
        sys.exit(143)
    if isinstance(code, int) and code:  # `typer.Exit(n)`: a command's own status (`venice status`, `venice airflow`)
        sys.exit(code)


def usage_error(exc: typer.TyperException) -> str:
    """Click's error in one line: its message (`Invalid value for '--partitions': ...`), lower-cased as our
    messages are, and where the command's help is."""
    message = " ".join(exc.format_message().split()).rstrip(".")
    message = message[:1].lower() + message[1:]
    ctx = getattr(exc, "ctx", None)  # a usage error's command
    return f"{message} (see `{ctx.command_path} --help`)" if ctx is not None else message


if __name__ == "__main__":
    main()
