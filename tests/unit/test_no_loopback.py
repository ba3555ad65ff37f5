"""Nothing assumes one machine (issue 44): no address of this machine's loopback is written into the platform's code
outside the embedded profile's defaults. Every process reaches every other by a configured or advertised address
(`venice_core.config.hosts`), so that the hosts profile, where 127.0.0.1 is each host alone, works."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("venice_core", "plugins", "dags")
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
# Where the loopback may be written: the embedded profile's defaults, each once.
ALLOWED = {
    "venice_core/config/hosts.py",  # LOOPBACK: every host's address when hosts are off
    "venice_core/config/keys.py",  # the defaults of kafka.embedded.host and server.host
}


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the string constants that are docstrings (words about the code, not addresses it uses)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def loopback_literals(path: Path) -> list[int]:
    """The lines of `path` whose string literals (docstrings aside) name a loopback address."""
    tree = ast.parse(path.read_text(), str(path))
    docstrings = _docstrings(tree)
    return sorted(
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
        and any(name in node.value for name in LOOPBACK_NAMES)
    )


def test_no_loopback_address_is_hard_coded_outside_the_embedded_defaults() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for folder in SCANNED
        for path in sorted((ROOT / folder).rglob("*.py"))
        if str(path.relative_to(ROOT)) not in ALLOWED
        for line in loopback_literals(path)
    ]
    assert not found, f"loopback addresses written into the code (use the config's addresses): {found}"


def test_the_scan_finds_a_loopback_address(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text('"""On 127.0.0.1: words."""\nHOST = "127.0.0.1"\nURL = f"http://localhost:{8080}"\n')
    assert loopback_literals(sample) == [2, 3]
