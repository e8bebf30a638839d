"""What the archive's tests share."""

from __future__ import annotations

from pathlib import Path


def tree(root: Path) -> dict[str, bytes]:
    """Every file below ``root``, by relative path."""
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }
