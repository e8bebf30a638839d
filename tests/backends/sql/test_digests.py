"""The SQL chain of digests, pinned by known answers: every database already
written holds these digests, so a change in how one is computed (its size,
how an empty column reads, the length before each column, what a fork
chains from) would make every existing session read as tampered."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from sessionstore import SessionMeta, SqlStore
from sessionstore.backends.sql.digests import (
    DIGEST_SIZE,
    ENTRY_COLUMNS,
    entry_digest,
    fork_digest,
    header_digest,
)
from sessionstore.testing.contract import message

HEADER = '{"type":"session","id":"s"}'

MESSAGE_ROW: dict[str, Any] = {
    "entry_id": "e1",
    "type": "message",
    "timestamp": "2026-01-01T00:00:00Z",
    "first_kept_id": None,
    "line": '{"id":"e1"}',
}

COMPACTION_ROW: dict[str, Any] = {
    "entry_id": "c1",
    "type": "compaction",
    "timestamp": "2026-01-01T00:00:01Z",
    "first_kept_id": "e1",
    "line": b'{"id":"c1"}',  # a driver may hand the line back as bytes
}


def test_a_header_digest_is_a_known_blake2b_128() -> None:
    assert DIGEST_SIZE == 16
    assert header_digest(HEADER).hex() == "ff1d45aca88870cfe59309af1b644cb9"
    assert header_digest(HEADER.encode()) == header_digest(HEADER)


def test_entry_digests_chain_to_known_answers() -> None:
    first = entry_digest(header_digest(HEADER), MESSAGE_ROW)
    assert first.hex() == "8e13cba8217b6d255c8ee9bfc7504dde"
    second = entry_digest(first, COMPACTION_ROW)
    assert second.hex() == "cfff12223fd6f32d9dff559383408438"


def test_a_missing_column_digests_as_empty_text() -> None:
    start = header_digest(HEADER)
    assert entry_digest(start, MESSAGE_ROW) == entry_digest(
        start, {**MESSAGE_ROW, "first_kept_id": ""}
    )


def test_each_column_is_digested_after_its_length() -> None:
    """Without the length before each column, moving a byte from one column
    to the next would leave the digest as it was."""
    start = header_digest(HEADER)
    moved = {**MESSAGE_ROW, "entry_id": "e", "type": "1message"}
    assert entry_digest(start, moved) != entry_digest(start, MESSAGE_ROW)
    into_empty = {**MESSAGE_ROW, "timestamp": "2026-01-01T00:00:00", "first_kept_id": "Z"}
    assert entry_digest(start, into_empty) != entry_digest(start, MESSAGE_ROW)


def test_a_fork_digest_is_a_known_answer_over_header_point_and_base() -> None:
    base = bytes.fromhex("cfff12223fd6f32d9dff559383408438")
    fork = '{"id":"f"}'
    assert fork_digest(fork, 2, base).hex() == "be2b26003f4b010f1e6c17f7359bb048"
    assert fork_digest(fork, 2, bytes(DIGEST_SIZE)) != fork_digest(fork, 2, base)
    assert fork_digest(fork, 1, base) != fork_digest(fork, 2, base)
    assert fork_digest(fork, 2, base) != header_digest(fork)


# ----------------------------------------------------- what the store writes


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "s.db"


@pytest.fixture
async def store(db: Path) -> AsyncIterator[SqlStore]:
    async with await SqlStore.open(str(db)) as store:
        yield store


def sqlite_connection(db: Path) -> contextlib.closing[sqlite3.Connection]:
    return contextlib.closing(sqlite3.connect(db, isolation_level=None))


async def test_the_store_writes_the_chain_the_functions_compute(store: SqlStore, db: Path) -> None:
    await store.create(SessionMeta(id="source"))
    await store.append_many("source", [message("e1", "a"), message("e2", "b")])
    await store.fork("source", at="e1", meta=SessionMeta(id="fork"))
    with sqlite_connection(db) as connection:
        sessions = {
            row[0]: row[1:]
            for row in connection.execute("SELECT id, header, digest, base_seq FROM sessions")
        }
        entries = connection.execute(
            "SELECT e.entry_id, e.type, e.timestamp, e.first_kept_id, e.line, e.digest "
            "FROM entries e JOIN sessions s ON s.pk = e.session_pk WHERE s.id = 'source' "
            "ORDER BY e.seq"
        ).fetchall()
    header, stored, _ = sessions["source"]
    digest = header_digest(header)
    assert stored == digest
    for *columns, stored in entries:
        row = dict(zip(ENTRY_COLUMNS, columns, strict=True))
        digest = entry_digest(digest, row)
        assert stored == digest
    header, stored, base_seq = sessions["fork"]
    assert base_seq == 1
    assert stored == fork_digest(header, 1, entries[0][-1])


async def test_a_fork_chains_from_its_bases_stored_digest(store: SqlStore, db: Path) -> None:
    """The digest a fork starts from covers the digest of the entry it
    branched at: that digest changed, both chains break."""
    await store.create(SessionMeta(id="source"))
    await store.append_many("source", [message(f"e{n}", "x") for n in range(3)])
    await store.fork("source", at="e1", meta=SessionMeta(id="fork"))
    with sqlite_connection(db) as connection:
        connection.execute("DROP TRIGGER entries_no_update")  # only a test may do this
        connection.execute("UPDATE entries SET digest = zeroblob(16) WHERE seq = 2")
    assert await store.integrity() == [
        "session 'source': entry 2 ('e1') does not match its digest: "
        "its row changed after it was written",
        "session 'fork': its header does not match its digest: "
        "its row changed after it was written",
    ]
