"""SqlStore streams a session of long lines about a megabyte at a time
(`sessionstore.backends.sql.lineage`), not `ROWS` lines at a time: 2,000
tools' outputs of 64 KB would be 128 MB held at once."""

from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection

import sessionstore.backends.sql.store as store_module
from sessionstore import SessionMeta, SqlStore, encode
from sessionstore.backends.sql import queries as Q
from sessionstore.backends.sql.lineage import BYTES
from sessionstore.models import MessageEntry
from sessionstore.testing.contract import message

ENTRIES = 300  # several megabytes: several pages, though far fewer rows than ROWS


def long_message(n: int) -> MessageEntry:
    """A message of 16,000 characters, one word (quick to index)."""
    return message(f"e{n}", "x" * 16_000)


LINES = [encode(long_message(n)) + "\n" for n in range(ENTRIES)]
SIZE = sum(map(len, LINES))  # the session's bytes but its header
LINE = max(map(len, LINES))


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqlStore]:
    store = await SqlStore.open(str(tmp_path / "s.db"))
    yield store
    await store.close()


async def long_session(store: SqlStore) -> str:
    session_id = await store.create(SessionMeta(id="long"))
    await store.append_many(session_id, [long_message(n) for n in range(ENTRIES)])
    return session_id


async def given(lines: Iterable[str]) -> AsyncIterator[str]:
    for line in lines:
        yield line


async def test_an_export_reads_long_lines_about_a_megabyte_at_a_time(store: SqlStore) -> None:
    session_id = await long_session(store)
    _, *blocks = [block async for block in store.raw_blocks(session_id)]
    assert sum(map(len, blocks)) == SIZE > 4 * BYTES
    assert max(map(len, blocks)) <= BYTES + LINE


async def test_an_import_inserts_long_lines_about_a_megabyte_at_a_time(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    inserted: list[int] = []
    insert = store_module._insert

    def recorded(conn: Connection, rows: list[dict[str, Any]], sealer: None) -> None:
        inserted.append(sum(len(row["line"]) + 1 for row in rows))
        insert(conn, rows, sealer)

    monkeypatch.setattr(store_module, "_insert", recorded)
    lines = (line.rstrip("\n") for line in LINES)
    assert await store.import_session(encode(SessionMeta(id="long")), given(lines)) == ENTRIES
    assert sum(inserted) == SIZE
    assert max(inserted) <= BYTES + LINE


async def test_integrity_reads_long_lines_about_a_megabyte_at_a_time(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await long_session(store)
    pages: list[int] = []
    read = Q.ENTRY_DIGESTS.all

    def recorded(conn: Connection, **given: Any) -> list[Any]:
        rows = read(conn, **given)
        pages.append(sum(len(row[-1]) + 1 for row in rows))
        return rows

    monkeypatch.setattr(Q.ENTRY_DIGESTS, "all", recorded)
    assert await store.integrity() == []
    assert sum(pages) == SIZE
    assert max(pages) <= BYTES + LINE
