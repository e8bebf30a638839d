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


def archive_files(archive: Path) -> dict[str, bytes]:
    """The archive's session files under their final names (no temporary)."""
    directory = archive / "sessions"
    if not directory.is_dir():
        return {}
    return {
        path.name.removesuffix(".jsonl"): path.read_bytes()
        for path in directory.iterdir()
        if not path.name.startswith(".")
    }
