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
    StorageError,
    encode,
)
from sessionstore.backends.sql import contexts, runner
from sessionstore.context import build_context
from sessionstore.testing.contract import message
from tests.helpers import traced


class EntryReads:
    """The reads of entries a SQLite store runs, and where each ran."""

    def __init__(self, store: SqlStore) -> None:
        self._threads: list[str] = []
        self._statements = traced(store, self._threads)

    def taken(self) -> list[bool]:
        """For each read of entries since the last call: whether it ran on the loop."""
        main = threading.main_thread().name
        ran = [
            name == main
            for sql, name in zip(self._statements, self._threads, strict=True)
            if "FROM entries" in sql
        ]
        self._statements.clear()
        self._threads.clear()
        return ran


async def test_a_kept_context_is_read_on_the_event_loop_when_little_is_new(
    tmp_path: Path,
) -> None:
    async with await SqlStore.open(str(tmp_path / "s.db")) as store:
        session_id = await store.create(SessionMeta.new())
        log: list[SessionEntry] = [message(f"e{n}", "x") for n in range(5)]
        await store.append_many(session_id, log)
        on_the_loop = EntryReads(store).taken

        assert await store.load_context(session_id) == build_context(log)
        assert all(on_the_loop())  # a short context is built there too
        for batch in (0, 1, contexts.QUICK_ROWS, contexts.QUICK_ROWS + 1):
            new = [message(f"b{batch}-{n}", "y") for n in range(batch)]
            await store.append_many(session_id, new)
            log += new
            on_the_loop()  # the append's
            assert await store.load_context(session_id) == build_context(log)
            here = on_the_loop()
            assert here[0]  # the probe
            assert all(here) == (batch <= contexts.QUICK_ROWS), here  # beyond: read in a thread


async def test_a_context_built_afresh_is_read_on_the_event_loop_up_to_quick_rows(
    tmp_path: Path,
) -> None:
    quick = contexts.QUICK_ROWS
    async with await SqlStore.open(str(tmp_path / "s.db")) as store:
        session_id = await store.create(SessionMeta.new())
        log: list[SessionEntry] = [message(f"e{n}", "x") for n in range(3 * quick)]
        await store.append_many(session_id, log)
        reads = EntryReads(store)

        async def first_context(
            session: str, expected: list[SessionEntry], *, first: bool = True
        ) -> list[bool]:
            """A first call's reads of entries (or, not ``first``, a call's):
            whether each ran on the loop."""
            if first:
                store.drop_caches()
            reads.taken()
            assert await store.load_context(session) == build_context(expected)
            return reads.taken()

        # No compaction: every entry is read, too many for the loop.
        here = await first_context(session_id, log)
        assert here[0]  # tried there,
        assert not all(here), here  # then read in a thread
        # A compaction keeping exactly QUICK_ROWS messages, then one more.
        for kept in (quick, quick + 1):
            first_kept = log[: 3 * quick][-kept].id
            cut = CompactionEntry(
                id=f"c{kept}", timestamp="t", summary="s", first_kept_id=first_kept
            )
            await store.append(session_id, cut)
            log.append(cut)
            assert all(await first_context(session_id, log)) == (kept == quick)
        # A fork's context, read over the spans of two sessions: the last
        # compaction it shares keeps too many, its own a few.
        fork = await store.fork(session_id)
        assert not all(await first_context(fork.id, log))
        own = CompactionEntry(id="f", timestamp="t", summary="s", first_kept_id=log[-3].id)
        await store.append(fork.id, own)
        assert all(await first_context(fork.id, [*log, own]))
        # A kept context, then a new compaction keeping a few: built again there.
        assert not all(await first_context(session_id, log))
        again = CompactionEntry(id="g", timestamp="t", summary="s", first_kept_id=log[-3].id)
        await store.append(session_id, again)
        assert all(await first_context(session_id, [*log, again], first=False))


async def test_where_quick_reads_run_in_a_thread_they_build_no_context(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As on PostgreSQL, where a quick read runs in a thread too: a context
    # too long for it would be read twice, so it only extends kept ones.
    monkeypatch.setattr(contexts, "is_sqlite", lambda url: False)
    async with await SqlStore.open(str(tmp_path / "s.db")) as store:
        session_id = await store.create(SessionMeta.new())
        log: list[SessionEntry] = [message(f"e{n}", "x") for n in range(5)]
        await store.append_many(session_id, log)
        taken = EntryReads(store).taken

        async def reads(expected: list[SessionEntry]) -> list[bool]:
            taken()
            assert await store.load_context(session_id) == build_context(expected)
            return taken()

        assert not any(await reads(log))  # a first call: one read, in a thread
        cut = CompactionEntry(id="c", timestamp="t", summary="s", first_kept_id="e3")
        await store.append(session_id, cut)
        here = await reads([*log, cut])
        assert here[:2] == [True, True]  # the probe, and the new row that moves the cut,
        assert len(here) > 2
        assert not any(here[2:])  # then the context built again in a thread


async def test_a_quick_read_waits_in_a_thread_when_sqlite_is_busy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with await SqlStore.open(str(tmp_path / "s.db")) as store:
        session_id = await store.create(SessionMeta.new())
        await store.append(session_id, message("e1", "x"))
        await store.load_context(session_id)
        await store.append(session_id, message("e2", "y"))
        on_driver = runner.on_driver

        def locked_on_the_loop(*args: Any, **kwargs: Any) -> Any:
            if threading.current_thread() is threading.main_thread():
                raise sqlite3.OperationalError(error)
            return on_driver(*args, **kwargs)

        monkeypatch.setattr(runner, "on_driver", locked_on_the_loop)
        error = "database is locked"
        expected = build_context([message("e1", "x"), message("e2", "y")])
        assert await store.load_context(session_id) == expected
        error = "disk I/O error"  # not a lock: the caller's error
        with pytest.raises(StorageError, match="disk I/O error"):
            await store.load_context(session_id)


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
