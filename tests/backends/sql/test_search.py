"""Search on SQL beyond the contract: the word index itself. SQLite's backlog
and its mark, forks sharing indexed rows, erasure leaving no word behind,
long words, PostgreSQL's oversized vectors, and databases migrated with
messages already in them."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import AsyncIterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from sessionstore import (
    Message,
    MessageEntry,
    SessionMeta,
    SessionStore,
    encode,
    migrate,
    open_store,
)
from sessionstore.backends.sql.digests import entry_digest, header_digest
from sessionstore.backends.sql.postings import unpack
from sessionstore.backends.sql.wordindex import BACKLOG, LONG_WORD
from sessionstore.store import SearchHit
from sessionstore.testing.common import stream
from sessionstore.testing.contract import compaction, message
from tests.backends.sql.helpers import stored_bytes
from tests.kinds import StoreTargets

SQL_KINDS = ("sqlite", "postgresql")


@pytest.fixture(params=SQL_KINDS)
def target(request: pytest.FixtureRequest, store_targets: StoreTargets) -> str:
    return store_targets.new(request.param)


@pytest.fixture
async def store(target: str) -> AsyncIterator[SessionStore]:
    async with await open_store(target) as store:
        yield store


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "s.db"


@pytest.fixture
async def lite(db: Path) -> AsyncIterator[SessionStore]:
    async with await open_store(db) as store:
        yield store


def rows(target: str | Path, query: str, **given: Any) -> list[tuple[Any, ...]]:
    """What a plain query reads in the store's database."""
    url = target if isinstance(target, str) else f"sqlite:///{target}"
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            return [tuple(row) for row in connection.execute(text(query), given)]
    finally:
        engine.dispose()


def word_rows(target: str | Path, word: str) -> int:
    """How many messages the index holds ``word`` in, whatever the backend."""
    if str(target).startswith("postgresql"):
        query = "SELECT count(*) FROM search_vectors WHERE words @@ CAST(:word AS tsquery)"
        return int(rows(target, query, word=f"'{word}'")[0][0])
    query = "SELECT batch, postings FROM search_postings WHERE word = :word"  # (seq, hits) each
    return sum(len(list(unpack(blob, batch))) for batch, blob in rows(target, query, word=word))


def mark(db: Path) -> tuple[int, int]:
    """SQLite: the index's mark, and the greatest rowid of ``entries``."""
    query = "SELECT indexed, (SELECT coalesce(max(rowid), 0) FROM entries) FROM search_mark"
    [(indexed, top)] = rows(db, query)
    return indexed, top


async def every_hit(
    store: SessionStore, query: str, *, limit: int, after: str | None = None, **more: Any
) -> list[SearchHit]:
    """Every hit of a search from ``after`` on, page by page."""
    hits: list[SearchHit] = []
    while True:
        page = await store.search(query, limit=limit, after=after, **more)
        hits += page
        if len(page) < limit:
            return hits
        after = page[-1].cursor


def filler(count: int, prefix: str = "f") -> list[Any]:
    """``count`` messages of common words, enough to make the index catch up."""
    return [message(f"{prefix}{n}", f"common words {n}") for n in range(count)]


# ---------------------------------------------------------------- the backlog


async def test_messages_indexed_and_in_the_backlog_are_both_found(
    lite: SessionStore, db: Path
) -> None:
    await lite.create(SessionMeta(id="s"))
    await lite.append("s", message("old", "needle in the index"))
    await lite.append_many("s", filler(BACKLOG))  # one write: it indexes the backlog
    indexed, top = mark(db)
    assert indexed == top
    assert word_rows(db, "needle") == 1
    await lite.append("s", message("new", "needle in the backlog"))
    await lite.append("s", message("also", "common words and a needle"))
    indexed, top = mark(db)
    assert top - indexed == 2
    assert word_rows(db, "needle") == 1
    hits = await every_hit(lite, "needle", limit=1)
    assert sorted(h.entry_id for h in hits) == ["also", "new", "old"]
    both = await every_hit(lite, "common words", limit=7)
    assert len({(h.session_id, h.seq) for h in both}) == len(both) == BACKLOG + 1


async def test_the_index_takes_less_than_the_lines_it_indexes(lite: SessionStore, db: Path) -> None:
    # 512 messages of 40 words, 36 different on average: 20 common ones, and
    # 20 drawn from 2,000 rarer ones, held by a few messages each.
    words = [f"word{n}" for n in range(2000)]
    texts = [
        " ".join(
            [*(f"c{k}" for k in range(20)), *(words[(n * 37 + k * 101) % 2000] for k in range(20))]
        )
        for n in range(2 * BACKLOG)
    ]
    await lite.create(SessionMeta(id="s"))
    for n, said in enumerate(texts):  # appended one by one, as a conversation is
        await lite.append("s", message(f"m{n}", said))
    assert mark(db)[0] == mark(db)[1]  # all indexed
    with closing(sqlite3.connect(db)) as connection:
        lines, index = connection.execute(
            "SELECT (SELECT sum(length(line)) FROM entries), "
            "(SELECT sum(pgsize) FROM dbstat WHERE name = 'search_postings')"
        ).fetchone()
    # Packed, about 0.6 of them; a row per word per message (19 bytes a
    # word) took twice the lines.
    assert index < lines


async def test_a_search_pages_on_while_its_backlog_is_indexed(lite: SessionStore, db: Path) -> None:
    await lite.create(SessionMeta(id="s"))
    await lite.append_many("s", [message(f"m{n}", f"pear {'x ' * n}") for n in range(6)])
    first = await lite.search("pear", limit=3)
    assert word_rows(db, "pear") == 0  # the page came from the backlog
    await lite.append_many("s", filler(BACKLOG))
    assert word_rows(db, "pear") == 6  # the rest comes from the index
    rest = await every_hit(lite, "pear", limit=2, after=first[-1].cursor)
    assert [h.entry_id for h in first + rest] == [f"m{n}" for n in range(6)]  # shortest first


async def test_erasing_the_newest_session_lowers_the_mark(lite: SessionStore, db: Path) -> None:
    await lite.create(SessionMeta(id="kept"))
    await lite.append("kept", message("k", "kept text"))
    await lite.create(SessionMeta(id="newest"))
    await lite.append_many("newest", filler(BACKLOG))
    assert mark(db)[0] == mark(db)[1] > 1
    await lite.erase("newest", reason="asked")
    indexed, top = mark(db)
    assert indexed == top == 1
    # SQLite gives the next rows the rowids just freed: they are the backlog.
    await lite.create(SessionMeta(id="later"))
    await lite.append_many("later", [message("l1", "fresh words"), message("l2", "fresh")])
    assert {h.entry_id for h in await lite.search("fresh")} == {"l1", "l2"}
    assert {h.entry_id for h in await lite.search("common")} == set()


async def test_an_import_is_indexed_as_it_goes(lite: SessionStore, db: Path) -> None:
    header = encode(SessionMeta(id="imported"))
    lines = [encode(entry) for entry in filler(3 * BACKLOG)]

    async def stream() -> AsyncIterator[str]:
        for line in lines:
            yield line

    await lite.import_session(header, stream())
    indexed, top = mark(db)
    assert top - indexed < BACKLOG
    assert len(await every_hit(lite, "common", limit=500)) == 3 * BACKLOG


async def test_a_query_of_many_words_is_answered_from_the_index(store: SessionStore) -> None:
    many = " ".join(f"w{n}" for n in range(12))
    await store.create(SessionMeta(id="s"))
    await store.append_many("s", [message("all", many), message("some", "w1 w2 w3"), *filler(300)])
    assert [h.entry_id for h in await store.search(many)] == ["all"]
    assert {h.entry_id for h in await store.search("w3 w1 w2 w2")} == {"all", "some"}


@pytest.mark.parametrize("then_indexed", [False, True], ids=["backlog", "indexed"])
async def test_words_are_found_however_the_line_spells_them(
    store: SessionStore, then_indexed: bool
) -> None:
    parts = Message(
        role="assistant",
        content=[{"type": "text", "text": "hel"}, {"type": "text", "text": "lo world"}],
    )
    await store.create(SessionMeta(id="s"))
    await store.append_many(
        "s",
        [
            MessageEntry(id="parts", timestamp="t", message=parts),  # "hello" across parts
            message("escaped", "line one\nline two\ttab"),
            message("kelvin", "\u212aelvin"),  # KELVIN SIGN: K once in NFC
        ],
    )
    line = '{"type":"message","id":"escapes","timestamp":"t",'
    line += '"message":{"role":"user","content":"caf\\u00e9 \\u0041pple"}}'
    await store.import_session(encode(SessionMeta(id="imported")), stream([line]))
    if then_indexed:
        await store.append_many("s", filler(300))
    found = {q: {h.entry_id for h in await store.search(q)} for q in QUERIES}
    assert found == QUERIES


QUERIES = {
    "hello": {"parts"},
    "hel": set(),
    "line two": {"escaped"},
    "nline": set(),  # the line reads one\nline: no such word in the text
    "ttab": set(),
    "tab": {"escaped"},
    "kelvin": {"kelvin"},
    "apple café": {"escapes"},
    "apple": {"escapes"},
}


# ------------------------------------------------------------------- forks


async def test_indexed_rows_are_found_in_every_fork_sharing_them(store: SessionStore) -> None:
    await store.create(SessionMeta(id="p", owner="u"))
    await store.append_many(
        "p", [message("m1", "kiwi one"), *filler(300), message("m2", "kiwi two")]
    )
    await store.fork("p", at="m1", meta=SessionMeta(id="early", owner="u"))  # shares m1 only
    await store.fork("p", meta=SessionMeta(id="all", owner="v"))  # shares both
    await store.append("all", message("m3", "kiwi three"))
    await store.fork("all", meta=SessionMeta(id="grand", owner="w"))  # shares m1, m2, m3
    await store.fork("early", at="m1", meta=SessionMeta(id="other", owner="w"))
    await store.append_many("p", [*filler(300, "g"), message("m4", "kiwi four")])  # p's alone
    hits = await every_hit(store, "kiwi", limit=3)
    found = sorted((h.session_id, h.seq, h.entry_id) for h in hits)
    assert found == [
        ("all", 1, "m1"),
        ("all", 302, "m2"),
        ("all", 303, "m3"),
        ("early", 1, "m1"),
        ("grand", 1, "m1"),
        ("grand", 302, "m2"),
        ("grand", 303, "m3"),
        ("other", 1, "m1"),
        ("p", 1, "m1"),
        ("p", 302, "m2"),
        ("p", 603, "m4"),
    ]
    owned = await store.search("kiwi", owner="w", limit=50)
    assert sorted((h.session_id, h.entry_id) for h in owned) == [
        ("grand", "m1"),
        ("grand", "m2"),
        ("grand", "m3"),
        ("other", "m1"),
    ]


# ------------------------------------------------------------------- erasure


async def test_erase_leaves_no_row_of_its_words(store: SessionStore, target: str) -> None:
    secret = f"secret{uuid.uuid4().hex}"
    await store.create(SessionMeta(id="kept"))
    await store.append_many("kept", [message("k1", "shared words"), *filler(300)])
    await store.create(SessionMeta(id="doomed"))
    await store.append_many("doomed", [message("d1", f"shared {secret}"), *filler(300, "d")])
    await store.append("doomed", message("d2", f"{secret} in the backlog, on SQLite"))
    await store.append("doomed", compaction("c", f"{secret} summary", "d2"))
    assert word_rows(target, secret) == (2 if target.startswith("postgresql") else 1)
    await store.erase("doomed", reason="asked")
    assert word_rows(target, secret) == 0
    assert word_rows(target, "shared") == 1
    assert await store.search(secret) == []
    assert [h.entry_id for h in await store.search("shared")] == ["k1"]


async def test_erased_words_are_nowhere_in_the_sqlite_files(lite: SessionStore, db: Path) -> None:
    secret = f"secret{uuid.uuid4().hex}"
    await lite.create(SessionMeta(id="kept"))
    await lite.append_many("kept", filler(300))
    await lite.create(SessionMeta(id="doomed"))
    # The word in many rows of the index (split over several pages), in
    # rows of their own: the entries' lines hold it too, as JSON.
    texts = [f"{secret} {n} {'pad' * (n % 50)}" for n in range(600)]
    await lite.append_many("doomed", [message(f"d{n}", t) for n, t in enumerate(texts)])
    assert word_rows(db, secret) == 600
    await lite.erase("doomed", reason="asked")
    assert secret.encode() not in stored_bytes(db)
    assert len(await every_hit(lite, "common", limit=100)) == 300


async def test_erase_finds_the_rows_of_a_line_that_no_longer_decodes(
    lite: SessionStore, db: Path
) -> None:
    await lite.create(SessionMeta(id="kept"))
    await lite.append_many("kept", filler(10))
    await lite.create(SessionMeta(id="s"))
    await lite.append_many("s", [message("m1", "plum tart"), *filler(300, "s")])
    with closing(sqlite3.connect(db, isolation_level=None)) as connection:
        connection.execute("DROP TRIGGER entries_no_update")  # behind the store's back
        connection.execute("UPDATE entries SET line = 'garbage' WHERE entry_id = 'm1'")
    assert word_rows(db, "plum") == 1
    await lite.erase("s", reason="asked")
    assert word_rows(db, "plum") == 0
    assert rows(db, "SELECT DISTINCT session_pk FROM search_postings") == [(1,)]


async def test_rows_of_another_word_rule_are_erased_too(lite: SessionStore, db: Path) -> None:
    await lite.create(SessionMeta(id="s"))
    await lite.append_many("s", [message("m1", "plum tart"), *filler(300, "s")])
    with closing(sqlite3.connect(db, isolation_level=None)) as connection:
        # As if indexed by a Python with other Unicode tables: "tart" was a
        # word then that this rule does not find in the line.
        connection.execute("INSERT INTO search_postings VALUES ('t4rt', 1, 1, x'00')")
        connection.execute("UPDATE search_mark SET rule = 'another'")
    await lite.erase("s", reason="asked")
    assert rows(db, "SELECT count(*) FROM search_postings") == [(0,)]


# ---------------------------------------------------------------- word sizes


async def test_a_long_word_is_found_and_kept_as_a_digest(store: SessionStore, target: str) -> None:
    long = "z" * (LONG_WORD + 1)
    await store.create(SessionMeta(id="s"))
    await store.append_many("s", [message("m1", f"a {long} b"), *filler(300)])
    await store.append("s", message("m2", f"{long.upper()} backlog"))
    assert {h.entry_id for h in await store.search(long)} == {"m1", "m2"}
    assert await store.search("z" * LONG_WORD) == []
    assert word_rows(target, long) == 0  # the digest stands for it


async def test_a_message_too_large_for_a_tsvector_is_still_found(
    pg_url: str,
) -> None:
    huge = " ".join(f"w{n:06}" for n in range(120_000))  # about 1.2 MB of distinct words
    async with await open_store(pg_url) as store:
        await store.create(SessionMeta(id="s"))
        await store.append_many("s", [message("big", f"{huge} needle"), message("small", "needle")])
        assert rows(pg_url, "SELECT count(*) FROM search_vectors WHERE words IS NULL") == [(1,)]
        assert [h.entry_id for h in await store.search("needle")] == ["small", "big"]
        assert [h.entry_id for h in await store.search("w000007 needle")] == ["big"]
        await store.erase("s", reason="asked")
        assert rows(pg_url, "SELECT count(*) FROM search_vectors") == [(0,)]


# ---------------------------------------------------------------- migrations


def populate_at_0004(target: str) -> None:
    """Two sessions with messages, written row by row as a 0004 store would."""
    engine = create_engine(target)
    with engine.begin() as connection:
        for session_id, texts in [("a", ["hello old world", "other"]), ("b", ["old news"])]:
            header = encode(SessionMeta(id=session_id, created_at="2026-01-01T00:00:00Z"))
            digest = header_digest(header)
            pk = connection.execute(
                text(
                    "INSERT INTO sessions (id, version, created_at, header, digest) "
                    "VALUES (:id, 1, '2026-01-01T00:00:00Z', :header, :digest) RETURNING pk"
                ),
                {"id": session_id, "header": header, "digest": digest},
            ).scalar_one()
            for seq, said in enumerate(texts, 1):
                entry = message(f"{session_id}{seq}", said)
                row = {
                    "entry_id": entry.id,
                    "type": "message",
                    "timestamp": entry.timestamp,
                    "first_kept_id": None,
                    "line": encode(entry),
                }
                digest = entry_digest(digest, row)
                connection.execute(
                    text(
                        "INSERT INTO entries (session_pk, seq, entry_id, type, timestamp, "
                        "first_kept_id, line, digest) VALUES (:pk, :seq, :entry_id, :type, "
                        ":timestamp, :first_kept_id, :line, :digest)"
                    ),
                    {**row, "pk": pk, "seq": seq, "digest": digest},
                )
    engine.dispose()


async def test_a_populated_database_is_indexed_by_the_upgrade(target: str) -> None:
    await migrate.upgrade(target, "0004")
    populate_at_0004(target)
    await migrate.upgrade(target)
    assert word_rows(target, "old") == 2  # indexed in place, not left to a backlog
    if target.startswith("sqlite"):
        assert rows(target, "SELECT indexed FROM search_mark") == [(3,)]
    async with await open_store(target) as store:
        assert await store.integrity() == []
        hits = await store.search("OLD")
        assert sorted((h.session_id, h.seq, h.snippet) for h in hits) == [
            ("a", 1, "hello old world"),
            ("b", 1, "old news"),
        ]
        await store.append("a", message("a3", "old again"))
        assert len(await store.search("old")) == 3
        await store.erase("b", reason="after the upgrade")
        assert {h.entry_id for h in await store.search("old")} == {"a1", "a3"}
    assert word_rows(target, "news") == 0
