"""Every key declared once: the typed config is built from the declarations alone, each group's fields are landed
by exactly one key (or derived), a `VENICE__` variable overrides a key, and the README's list is the rendering of
the declarations."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from venice_core.config import KEYS, ClusterConfig, load_config, reference_markdown
from venice_core.config.keys import SERVER_MAX_CONNECTIONS
from venice_core.config.reference import README_END, README_START, readme_block
from venice_core.errors import ConfigError

README = Path(__file__).resolve().parents[2] / "README.md"
# Fields set from other keys or several of them (regions from `regions` and `region.<r>.*`), not landed one to one.
ASSEMBLED = {
    "cluster": {"regions", "source"},
    "hooks": {"configs"},
    "kafka": {"node_hosts"},  # each node's host address (the hosts layout's)
    "postgres": {"host"},
    "redis": {"host"},
    "hosts": {"regions"},  # `regions`, given to the layout
}


def _group_fields() -> dict[str, set[str]]:
    """The typed config's fields by group: a field holding a settings object is a group, the others `cluster`'s;
    a group's field holding one is a nested group (`server.limits`), not a field of its own."""
    config = load_config({})
    groups: dict[str, set[str]] = {"cluster": set()}

    def walk(group: str, settings: Any) -> None:
        groups[group] = set()
        for field in dataclasses.fields(settings):
            value = getattr(settings, field.name)
            if dataclasses.is_dataclass(value):
                walk(f"{group}.{field.name}", value)
            else:
                groups[group].add(field.name)

    for field in dataclasses.fields(ClusterConfig):
        value = getattr(config, field.name)
        if dataclasses.is_dataclass(value):
            walk(field.name, value)
        else:
            groups["cluster"].add(field.name)
    return groups


def test_every_field_is_landed_by_exactly_one_key() -> None:
    landed: dict[str, list[str]] = {}
    for key in KEYS.values():
        group, _, name = key.lands.rpartition(".")
        landed.setdefault(f"{group or 'cluster'}.{name}", []).append(key.name)
    assert not {where: names for where, names in landed.items() if len(names) > 1}
    groups = _group_fields()
    for group, fields in groups.items():
        for field in fields - ASSEMBLED.get(group, set()):
            assert f"{group}.{field}" in landed, f"{group}.{field} is landed by no key"
    for where in landed:
        group, _, name = where.rpartition(".")
        assert name in groups.get(group, set()), f"{where} lands on no field"


def test_every_key_has_a_description_and_a_valid_default() -> None:
    for key in KEYS.values():
        assert key.doc.endswith("."), key.name
        assert key.default is not None or key.derived, f"{key.name}: no default and no derived default"
        if key.default:
            key.kind.parse(key.default, key.name)  # a default its own kind refuses would break every load


def test_an_environment_variable_overrides_the_file(tmp_path: Path) -> None:
    path = tmp_path / "venice.properties"
    path.write_text(f"{SERVER_MAX_CONNECTIONS}=100\n")
    env = {"VENICE_CONFIG": str(path)}
    assert load_config(env).server.limits.max_connections == 100
    assert KEYS[SERVER_MAX_CONNECTIONS].env == "VENICE__SERVER_MAX_CONNECTIONS"
    assert load_config({**env, "VENICE__SERVER_MAX_CONNECTIONS": "7"}).server.limits.max_connections == 7


def test_a_bad_environment_value_is_named_by_its_variable() -> None:
    with pytest.raises(
        ConfigError, match=r"\$VENICE__SERVER_MAX_CONNECTIONS: server.max.connections must be at least 1"
    ):
        load_config({"VENICE__SERVER_MAX_CONNECTIONS": "0"})


def test_the_data_dir_has_one_name(tmp_path: Path) -> None:
    config = load_config({"VENICE__DATA_DIR": str(tmp_path)})
    assert config.data_dir == tmp_path
    assert config.run_dir == tmp_path / "run"


def test_the_reference_lists_every_key() -> None:
    text = reference_markdown()
    for key in KEYS.values():
        assert f"`{key.name}`" in text and f"`{key.env}`" in text


def test_the_readme_list_is_the_rendering_of_the_declarations() -> None:
    text = README.read_text()
    assert README_START in text and README_END in text, "README.md lost its generated configuration block"
    assert readme_block() in text, "README.md's key list drifted: run `python -m venice_core.config`"
