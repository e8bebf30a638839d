"""What the JSONL store's tests share."""

from __future__ import annotations

from pathlib import Path

import pytest

from sessionstore import JsonlStore, StorageError


async def erase_dying_before_the_unlink(
    store: JsonlStore, monkeypatch: pytest.MonkeyPatch, *, reason: str
) -> None:
    """Erase session ``s`` as a process that dies after its record, before its
    file goes: the unlink of the session's file fails, then all is as before."""
    path = store.path("s")
    unlink = Path.unlink

    def crash(self: Path, missing_ok: bool = False) -> None:
        if self == path:
            raise OSError(5, "simulated crash", str(self))
        unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", crash)
    with pytest.raises(StorageError):
        await store.erase("s", reason=reason)
    monkeypatch.undo()
