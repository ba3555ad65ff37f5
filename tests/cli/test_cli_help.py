"""Every command's `--help` shows its option names whole, at a narrow terminal as at a wide one."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

from venice_core.cli.main import app, command_tree


def _commands(command: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    """The command tree, the root and every group included (Typer's own click commands)."""
    found = [(path, command)]
    if hasattr(command, "commands"):
        for name, sub in command.commands.items():
            found += _commands(sub, (*path, name))
    return found


COMMANDS = _commands(command_tree())


def test_the_tree_holds_every_command() -> None:
    paths = {" ".join(path) for path, _ in COMMANDS}
    assert {"push", "up", "down", "store create", "store update", "rollout status", "schema add"} <= paths


@pytest.mark.parametrize("columns", [80, 40])
@pytest.mark.parametrize(("path", "command"), [pytest.param(p, c, id=" ".join(p) or "venice") for p, c in COMMANDS])
def test_help_shows_option_names_whole(path: tuple[str, ...], command: Any, columns: int) -> None:
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": str(columns)}, prog_name="venice")
    assert result.exit_code == 0, result.output
    assert "…" not in result.output
    words = set(result.output.replace(",", " ").split())
    for param in command.params:
        for name in (*param.opts, *param.secondary_opts):
            if name.startswith("-"):
                assert name in words, (
                    f"venice {' '.join(path)} --help at {columns} columns cuts {name}:\n{result.output}"
                )
    if columns == 80:
        long = [line for line in result.output.splitlines() if len(line) > 80]
        assert not long, long
