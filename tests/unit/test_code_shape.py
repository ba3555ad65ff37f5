"""The shape the code keeps (issue 42): no function of venice_core/ or plugins/ over 80 lines. A CLI command's
option declarations are its signature, not its body: a function is measured from its first statement."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 80


def _long_functions() -> list[str]:
    found = []
    for path in sorted([*(ROOT / "venice_core").rglob("*.py"), *(ROOT / "plugins").rglob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.body[0].lineno + 1
                if lines > MAX_LINES:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({lines} lines)")
    return found


def test_no_function_is_over_80_lines() -> None:
    assert _long_functions() == []
