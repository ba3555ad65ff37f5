"""`python -m venice_core.config`: rewrite the README's generated list of keys from their declarations."""

from pathlib import Path

from venice_core.config.reference import write_readme

write_readme(Path(__file__).resolve().parents[2] / "README.md")
