"""Head and title files removed while a listing reads their folder: the file
gone is left out, and every file after it is still read."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sessionstore import JsonlStore, SessionMeta


def removed_when_looked_at(monkeypatch: pytest.MonkeyPatch, path: Path) -> None:
    """Remove ``path`` just before a listing looks at it, after it read the
    folder's names: as another process would, between the two."""
    lstat = os.lstat

    def racing(target: str | Path, *args: object, **kwargs: object) -> os.stat_result:
        if Path(target) == path and path.exists():
            path.unlink()
        return lstat(target, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "lstat", racing)


def named(faults: list[str]) -> list[Path]:
    """The file each fault names (``..., <path> line <n>: ...``)."""
    return [Path(fault.split(", ", 1)[1].split(" line ")[0]) for fault in faults]


async def test_a_head_file_removed_during_a_listing_leaves_the_rest_listed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = JsonlStore(tmp_path)
    await store.create(SessionMeta(id="s"))
    for name in ("a", "b", "c"):
        await store.set_head(name, "s")
    removed_when_looked_at(monkeypatch, tmp_path / "heads" / "a.jsonl")
    assert await store.heads() == ["b", "c"]


async def test_files_removed_during_integrity_leave_the_rest_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = JsonlStore(tmp_path)
    for session_id in ("a", "b"):
        await store.create(SessionMeta(id=session_id))
        await store.set_title(session_id, "kept")
        await store.set_head(session_id, session_id)
    (tmp_path / "heads" / "b.jsonl").write_bytes(b"not a move\n")
    (tmp_path / "titles" / "b.jsonl").write_bytes(b"not a title\n")
    removed_when_looked_at(monkeypatch, tmp_path / "heads" / "a.jsonl")
    assert named(await store.integrity()) == [
        tmp_path / "heads" / "b.jsonl",
        tmp_path / "titles" / "b.jsonl",
    ]
    monkeypatch.undo()
    (tmp_path / "heads" / "b.jsonl").unlink()
    removed_when_looked_at(monkeypatch, tmp_path / "titles" / "a.jsonl")
    assert named(await store.integrity()) == [tmp_path / "titles" / "b.jsonl"]
