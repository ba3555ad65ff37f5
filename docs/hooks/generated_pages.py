"""MkDocs hook: the pages generated from the code at build time, so that neither can drift from it.

`reference/configuration.md` is `venice_core.config.reference_markdown()` (every key from its declaration) and
`reference/cli.md` is each command's `--help` as the `venice` command prints it (Typer's app walked as Click
commands), under a heading of its own."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

from venice_core.cli.main import command_tree
from venice_core.config import reference_markdown

CONFIGURATION_INTRO = """# Configuration

One properties file, `$VENICE_CONFIG`, else a profile's (`venice --profile NAME`, `$VENICE_PROFILE`:
`deploy/<NAME>.properties`, `replicated` or `cluster`), else `venice.properties` in the data dir
(`$VENICE__DATA_DIR`, default `~/.venice`), over built-in defaults. Unknown or malformed keys are reported with file
and line. Each key below has an environment override (`VENICE__` and the key, dots as `_`), which wins over the file.

The Kafka jars are cached under `$VENICE_CACHE_DIR` (default `~/.cache/venice`), keyed by the pom's content.

This page is generated from the keys' declarations (`venice_core/config/keys.py`).

"""

CLI_INTRO = """# The `venice` command

Every command's `--help`, as `venice` prints it (generated from the Typer app, `venice_core.cli.main`). Bad input
is one line on stderr starting with `error:`, a non-zero exit and no change. Exit statuses: 0 done; 2 a usage
error, or a conf or setting refused; 3 a rollout stopped by a hook or failed, a schema a hook refused, a drain that
failed; 1 any other error (an unknown store, an incompatible schema, a component unreachable, ...) and `venice
status` with a component down; 130 interrupted; `venice airflow` exits with airflow's.

"""


def _commands(command: Any, context: Any) -> Iterator[tuple[Any, Any]]:
    """Each command under `command`, depth first, with its context (Typer's Click copy: duck-typed)."""
    yield command, context
    if hasattr(command, "list_commands"):
        for name in command.list_commands(context):
            sub = command.get_command(context, name)
            yield from _commands(sub, sub.context_class(sub, info_name=name, parent=context))


def cli_markdown() -> str:
    root = command_tree()
    sections = [CLI_INTRO]
    for command, context in _commands(root, root.context_class(root, info_name="venice")):
        heading = "#" * min(context.command_path.count(" ") + 2, 4)
        sections.append(f"{heading} `{context.command_path}`\n\n```text\n{command.get_help(context)}\n```\n")
    return "\n".join(sections)


def on_files(files: Files, config: MkDocsConfig) -> Files:
    configuration = CONFIGURATION_INTRO + reference_markdown()
    files.append(File.generated(config, "reference/configuration.md", content=configuration))
    files.append(File.generated(config, "reference/cli.md", content=cli_markdown()))
    return files
