"""The configuration reference, rendered from the keys' declarations: the docs' page and the README's list are
this text, so neither can drift from the code (tests/unit/test_config_reference.py)."""

from __future__ import annotations

from pathlib import Path

from venice_core.config.keys import HOOKS_CONFIGS_PREFIX, KEYS, REGION_KEY_DOCS, Key

_GROUP_TITLES = {
    "cluster": "The cluster",
    "hosts": "Hosts (a network namespace per process)",
    "security": "Security",
    "kafka": "Kafka",
    "spark": "Spark",
    "airflow": "Airflow",
    "redis": "Redis (embedded)",
    "postgres": "PostgreSQL (embedded)",
    "server": "Region servers",
    "client": "Clients",
    "rollout": "Rollouts",
    "hooks": "Lifecycle hooks (VIP-4)",
}


def _default(key: Key) -> str:
    if key.default is None or key.default == "":
        return key.derived or "none"
    return f"`{key.default}`"


def reference_markdown() -> str:
    """Every key by group: a table of name, type, default, environment override and description."""
    lines: list[str] = []
    for group, title in _GROUP_TITLES.items():
        lines += [f"### {title}", "", "| Key | Type | Default | Environment | Description |", "|---|---|---|---|---|"]
        for key in (k for k in KEYS.values() if k.group == group):
            lines.append(f"| `{key.name}` | {key.kind.name} | {_default(key)} | `{key.env}` | {key.doc} |")
        if group == "cluster":
            for setting, (default, doc) in REGION_KEY_DOCS.items():
                lines.append(f"| `region.<r>.{setting}` | | {default} | | {doc} |")
        if group == "hooks":
            lines.append(f"| `{HOOKS_CONFIGS_PREFIX}<x>` | text | | | A config every hook is given as `<x>`. |")
        lines.append("")
    return "\n".join(lines)


README_START = "<!-- config-keys:start (generated: python -m venice_core.config) -->"
README_END = "<!-- config-keys:end -->"


def readme_block() -> str:
    return f"{README_START}\n\n{reference_markdown()}\n{README_END}"


def write_readme(readme: Path) -> None:
    """Replace the README's generated block with the declarations' rendering."""
    text = readme.read_text()
    start, end = text.index(README_START), text.index(README_END) + len(README_END)
    readme.write_text(text[:start] + readme_block() + text[end:])
