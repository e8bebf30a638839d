"""An export of everything racing an erase another writer has under way
(JSONL: an erase records its removal, then unlinks the file)."""

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sessionstore import JsonlStore, SessionMeta, SessionNotFoundError
from sessionstore.archive import export_archive
from sessionstore.backends.jsonl import file as jsonl_file
from sessionstore.backends.jsonl import titles as title_files
from sessionstore.testing.common import message


class _EraseUnderWay:
    """The store, with ``victim``'s erase (by another store object on the
    same directory) paused after its record, before the unlink, while the
    export asks for `integrity`; let go once that answered."""

    def __init__(self, store: JsonlStore, other: JsonlStore, victim: str) -> None:
        self._store = store
        self._other = other
        self._victim = victim
        self.paused = threading.Event()
        self.go_on = threading.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def hold(self, forget: Callable[[Path, str], None]) -> Callable[[Path, str], None]:
        def held(directory: Path, session_id: str) -> None:  # between the record and the unlink
            self.paused.set()
            assert self.go_on.wait(timeout=60)
            forget(directory, session_id)

        return held

    async def integrity(self) -> list[str]:
        erase = asyncio.ensure_future(self._other.erase(self._victim, reason="by another"))
        assert await asyncio.to_thread(self.paused.wait, 60)
        try:
            return await self._store.integrity()
        finally:
            self.go_on.set()
            await erase


async def test_an_erase_under_way_during_an_export_leaves_the_session_out_not_a_fault(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, other = JsonlStore(tmp_path / "store"), JsonlStore(tmp_path / "store")
    for session_id in ("a", "b", "c"):
        await store.create(SessionMeta(id=session_id))
        await store.append(session_id, message(f"{session_id}-1", "hello"))
        await store.set_title(session_id, f"about {session_id}")
    racing = _EraseUnderWay(store, other, "b")
    forget = title_files.forget
    monkeypatch.setattr(title_files, "forget", racing.hold(forget))
    report = await export_archive(racing, tmp_path / "archive")
    assert report.ok, report.faults
    assert sorted(p.name for p in (tmp_path / "archive" / "sessions").iterdir()) == [
        "a.jsonl",
        "c.jsonl",
    ]
    assert [(Path(w.file).name, w.reason) for w in report.warnings] == [
        ("b.jsonl", "erased while exporting: left out")
    ]


async def test_an_erase_that_died_after_its_record_is_still_a_fault(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = JsonlStore(tmp_path / "store")
    await store.create(SessionMeta(id="s"))

    def dies(directory: Path, session_id: str) -> None:
        raise OSError(5, "the process died here")

    monkeypatch.setattr(title_files, "forget", dies)
    with pytest.raises(Exception, match="the process died here"):
        await store.erase("s", reason="asked")
    monkeypatch.undo()
    [fault] = await store.integrity()
    assert "the erase of session 's' did not finish" in fault


async def test_a_session_erased_between_listing_its_name_and_reading_it_is_no_fault(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, other = JsonlStore(tmp_path), JsonlStore(tmp_path)
    for session_id in ("a", "b", "c"):
        await store.create(SessionMeta(id=session_id))
    real = jsonl_file.read_header

    def erased_first(path: Path, session_id: str) -> SessionMeta:
        if session_id == "b" and (tmp_path / "b.jsonl").exists():
            asyncio.run(other.erase("b", reason="by another"))  # its name was read already
        return real(path, session_id)

    monkeypatch.setattr(jsonl_file, "read_header", erased_first)
    assert await store.integrity() == []
    assert not (tmp_path / "b.jsonl").exists()


def _waiting_for_a_lock() -> bool:
    """Whether some process waits for a file lock (``->`` in /proc/locks)."""
    return "->" in Path("/proc/locks").read_text()


async def test_titles_read_during_an_erase_wait_for_it_never_read_as_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, other = JsonlStore(tmp_path), JsonlStore(tmp_path)
    await store.create(SessionMeta(id="s"))
    await store.set_title("s", "secret")
    paused, go_on = threading.Event(), threading.Event()
    forget = title_files.forget

    def held(directory: Path, session_id: str) -> None:  # titles gone, the file not yet
        forget(directory, session_id)
        paused.set()
        assert go_on.wait(timeout=60)

    monkeypatch.setattr(title_files, "forget", held)
    erase = asyncio.ensure_future(other.erase("s", reason="asked"))
    assert await asyncio.to_thread(paused.wait, 60)
    reading = asyncio.ensure_future(store.titles("s"))
    while not reading.done() and not _waiting_for_a_lock():
        await asyncio.wait({reading}, timeout=0.01)  # answered, or waiting for the erase
    go_on.set()
    await erase
    with pytest.raises(SessionNotFoundError):
        await reading  # the session, not the session without its titles
