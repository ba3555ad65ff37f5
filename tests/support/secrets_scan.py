"""Where a platform's secrets must not be: any process's command line, any file of its data dir but those that keep
them (each readable by its owner alone)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from venice_core.config import ClusterConfig
from venice_core.security.secrets import every_secret


def command_lines() -> list[str]:
    """Every process's command line, its arguments joined by spaces."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            found.append((proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:
            continue
    return found


def assert_secrets_kept(
    config: ClusterConfig,
    keeping: Sequence[Path],
    skipped: Sequence[Path] = (),
    skipped_suffixes: Sequence[str] = (),
    largest: int | None = None,
) -> int:
    """No secret of `config`'s platform on a command line, nor in a file of its data dir (each read once) but under
    `keeping`, where it is mode 0600. Files under `skipped`, with a suffix of `skipped_suffixes`, or over `largest`
    bytes are not read. Returns how many files were read."""
    found = every_secret(config)
    lines = command_lines()
    for name, value in found.items():
        assert not any(value in line for line in lines), f"{name} is on a command line"
    scanned = 0
    for path in config.data_dir.rglob("*"):
        if not path.is_file() or path.suffix in skipped_suffixes or any(path.is_relative_to(s) for s in skipped):
            continue
        if largest is not None and path.stat().st_size > largest:
            continue
        text = path.read_text(errors="replace")
        scanned += 1
        for name, value in found.items():
            if value in text:
                assert any(path.is_relative_to(kept) for kept in keeping), f"{name} is in {path}"
                assert path.stat().st_mode & 0o077 == 0, f"{path} holds {name} and others may read it"
    return scanned
