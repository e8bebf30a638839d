"""SqlStore streaming a session whose rows are not what ``seq`` says: a
corrupt database is a CorruptSessionError naming the session and the
missing seq, never an IndexError."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from sessionstore import ArchiveError, CorruptSessionError, SessionMeta, SqlStore
from sessionstore.archive import ArchiveReport, export_archive
from sessionstore.testing.contract import message


async def corrupt_database(db: Path) -> None:
    """Three entries, then a row whose seq is a BLOB: SQLite orders a BLOB
    after every number, so max(seq) is that row (read as 10), though no row
    has a seq between 4 and 10."""
    store = await SqlStore.open(f"sqlite:///{db}")
    try:
        await store.create(SessionMeta(id="s"))
        await store.append_many("s", [message(f"e{n}", "x") for n in range(1, 4)])
        await store.create(SessionMeta(id="fine"))
    finally:
        await store.close()
    with sqlite3.connect(db) as conn:
        # A copy of the last row (whatever columns the schema has), but its seq.
        columns = [row[1] for row in conn.execute("PRAGMA table_info(entries)")]
        values = ["x'3130'" if c == "seq" else c for c in columns]
        conn.execute(
            f"INSERT INTO entries ({', '.join(columns)}) "
            f"SELECT {', '.join(values)} FROM entries WHERE seq = 3"
        )


@pytest.mark.parametrize("read", ["raw_lines", "raw_blocks", "iter_entries"])
async def test_a_page_missing_rows_seq_promised_is_corrupt(tmp_path: Path, read: str) -> None:
    db = tmp_path / "s.db"
    await corrupt_database(db)
    store = await SqlStore.open(f"sqlite:///{db}")
    try:
        stream = getattr(store, read)("s")
        with pytest.raises(CorruptSessionError, match="seq 4 is missing") as caught:
            _ = [item async for item in stream]
        assert caught.value.session_id == "s"
        assert "entries" in str(caught.value)
    finally:
        await store.close()


async def test_export_refuses_that_session_and_exports_the_others(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    await corrupt_database(db)
    store = await SqlStore.open(f"sqlite:///{db}")
    try:
        with pytest.raises(ArchiveError) as caught:
            await export_archive(store, tmp_path / "archive", sessions=["s", "fine"])
    finally:
        await store.close()
    report = caught.value.report
    assert isinstance(report, ArchiveReport)
    (issue,) = report.refused
    assert issue.file == str(tmp_path / "archive" / "sessions" / "s.jsonl")
    assert "not exported" in issue.reason
    assert "seq 4 is missing" in issue.reason
    assert report.sessions == 1
    assert not (tmp_path / "archive" / "sessions" / "s.jsonl").exists()
    assert (tmp_path / "archive" / "sessions" / "fine.jsonl").exists()
