"""The SQL store keeps the contexts it built: they must stay exact."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from sessionstore import (
    CompactionEntry,
    CorruptSessionError,
    SessionEntry,
    SessionMeta,
    SqlStore,
    encode,
)
from sessionstore.backends.records import decode_stored_entries
from sessionstore.backends.sql import contexts as sql_contexts
from sessionstore.context import build_context
from sessionstore.testing.contract import message
from tests.helpers import traced


async def test_no_statement_of_a_turn_runs_on_the_event_loop(tmp_path: Path) -> None:
    async with await SqlStore.open(str(tmp_path / "s.db")) as store:
        threads: list[str] = []
        traced(store, threads)
        session_id = await store.create(SessionMeta.new())
        log: list[SessionEntry] = [message("e0", "x")]
        await store.append(session_id, log[0])
        assert await store.load_context(session_id) == build_context(log)  # built
        for n in range(1, 4):  # then kept, and extended
            log.append(message(f"e{n}", "x"))
            await store.append(session_id, log[-1])
            assert await store.load_context(session_id) == build_context(log)
            assert [entry.id for entry in (await store.load_slice(session_id, -1)).entries] == [
                f"e{n}"
            ]
        await store.set_title(session_id, "a title")
        assert await store.head("nothing") is None
        assert threads  # traced
        assert threading.main_thread().name not in threads


async def test_a_context_extended_by_many_new_entries_is_exact(tmp_path: Path) -> None:
    async with await SqlStore.open(str(tmp_path / "s.db")) as store:
        session_id = await store.create(SessionMeta.new())
        log: list[SessionEntry] = [message(f"e{n}", "x") for n in range(5)]
        await store.append_many(session_id, log)
        assert await store.load_context(session_id) == build_context(log)
        new = [message(f"n{n}", "y") for n in range(200)]
        await store.append_many(session_id, new)
        assert await store.load_context(session_id) == build_context([*log, *new])
        cut = CompactionEntry(id="c", timestamp="t", summary="s", first_kept_id="n190")
        await store.append(session_id, cut)  # moves the cut: built again
        assert await store.load_context(session_id) == build_context([*log, *new, cut])


async def test_a_new_row_whose_line_disagrees_with_its_columns_is_corrupt(
    tmp_path: Path,
) -> None:
    db = tmp_path / "s.db"
    async with await SqlStore.open(str(db)) as store:
        session_id = await store.create(SessionMeta.new())
        await store.append(session_id, message("e1", "x"))
        await store.load_context(session_id)  # kept
        await store.append(session_id, message("e2", "y"))
        connection = sqlite3.connect(db, isolation_level=None)
        connection.execute("DROP TRIGGER entries_no_update")  # only a test may do this
        line = encode(CompactionEntry(id="c", timestamp="t", summary="s", first_kept_id="e1"))
        connection.execute("UPDATE entries SET line = ? WHERE seq = 2", (line,))
        connection.close()
        with pytest.raises(CorruptSessionError, match="disagrees"):
            await store.load_context(session_id)


async def test_a_long_context_is_decoded_in_the_thread_a_short_one_on_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    decoded: list[tuple[int, bool]] = []  # rows decoded, and whether on the loop's thread

    def recorded(session_id: str, rows: Any, *, path: str | None) -> list[SessionEntry]:
        found = decode_stored_entries(session_id, rows, path=path)
        decoded.append((len(found), threading.current_thread() is threading.main_thread()))
        return found

    monkeypatch.setattr(sql_contexts, "decode_stored_entries", recorded)
    many = sql_contexts.DECODED_ON_THE_LOOP + 1
    target = str(tmp_path / "s.db")
    async with await SqlStore.open(target) as store, await SqlStore.open(target) as other:
        session_id = await store.create(SessionMeta.new())
        log: list[SessionEntry] = [message(f"e{n}", "x") for n in range(many)]
        await store.append_many(session_id, log)
        assert await store.load_context(session_id) == build_context(log)  # afresh
        log.append(message("one", "y"))
        await store.append(session_id, log[-1])
        assert await store.load_context(session_id) == build_context(log)  # one row more
        new = [message(f"n{n}", "z") for n in range(many)]
        await other.append_many(session_id, new)  # many rows by another store object
        log += new
        assert await store.load_context(session_id) == build_context(log)
    assert decoded == [(many, False), (1, True), (many, False)]
