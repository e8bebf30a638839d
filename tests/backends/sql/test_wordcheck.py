"""``integrity()`` rebuilds the word index from the messages and names
what a raw writer changed there (`sessionstore.backends.sql.wordcheck`)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from contextlib import closing

import psycopg
import pytest
from sqlalchemy.engine import make_url

from sessionstore import SessionMeta, open_store
from sessionstore.backends.sql.wordindex import BACKLOG
from sessionstore.testing.contract import compaction, message
from tests.kinds import StoreTargets

SQL_KINDS = ("sqlite", "postgresql")


async def indexed_store(target: str) -> None:
    """Sessions whose messages are all indexed (on SQLite, past the backlog)."""
    async with await open_store(target) as store:
        await store.create(SessionMeta(id="a"))
        await store.append_many("a", [message(f"a{n}", f"apple {n} pear") for n in range(3)])
        await store.append("a", compaction("c", "summary words", "a2"))
        await store.create(SessionMeta(id="b"))
        filler = [message(f"b{n}", f"banana {n}") for n in range(BACKLOG + 10)]
        for start in range(0, len(filler), 100):
            await store.append_many("b", filler[start : start + 100])
        assert await store.integrity() == []  # sound as the store keeps it
        assert len(await store.search("apple")) == 3


def raw(kind: str, target: str) -> Callable[[str], None]:
    """Run a statement on the database behind the store's back."""
    if kind == "sqlite":
        database = make_url(target).database
        assert database is not None

        def on_sqlite(statement: str) -> None:
            with closing(sqlite3.connect(database, isolation_level=None)) as connection:
                connection.execute(statement)

        return on_sqlite
    conninfo = make_url(target).set(drivername="postgresql")

    def on_postgresql(statement: str) -> None:
        with psycopg.connect(conninfo.render_as_string(hide_password=False)) as connection:
            connection.execute(statement)

    return on_postgresql


A = "(SELECT pk FROM sessions WHERE id = 'a')"
# Session 'a' is one batch from seq 1 (sessionstore.backends.sql.postings): the
# word '1' is in message 2 alone, packed as x'02' (seq 1 + 1, once), and the
# row of the word '' holds the lengths, 3 each: x'01' x'03', x'03' x'03', x'03' x'03'.
OF_1 = f"WHERE session_pk = {A} AND word = '1'"
CHANGES = {
    "sqlite": {
        "a word added": f"INSERT INTO search_postings VALUES ('secret', {A}, 1, x'02')",
        "a word deleted": f"DELETE FROM search_postings {OF_1}",
        "hits changed": f"UPDATE search_postings SET postings = x'0309' {OF_1}",
        "bytes that are no postings": f"UPDATE search_postings SET postings = x'0181' {OF_1}",
        "postings made a text": f"UPDATE search_postings SET postings = postings || x'00' {OF_1}",
        "a word that is no text": f"UPDATE search_postings SET word = x'31' {OF_1}",
        "length changed": "UPDATE search_postings SET postings = x'010303090303' "
        f"WHERE session_pk = {A} AND word = ''",
        "words of a compaction": f"INSERT INTO search_postings VALUES ('x', {A}, 1, x'06')",
        "words of no entry": f"INSERT INTO search_postings VALUES ('x', {A}, 1, x'c401')",
    },
    "postgresql": {
        "a word added": "UPDATE search_vectors SET words = words || 'secret'::tsvector "
        f"WHERE session_pk = {A} AND seq = 2",
        "a message's row deleted": f"DELETE FROM search_vectors WHERE session_pk = {A} AND seq = 2",
        "length changed": "UPDATE search_vectors SET length = 9 "
        f"WHERE session_pk = {A} AND seq = 2",
        "words of a compaction": f"INSERT INTO search_vectors VALUES ({A}, 4, 'x', 1)",
        "words of no entry": f"INSERT INTO search_vectors VALUES ({A}, 99, 'x', 1)",
    },
}


@pytest.mark.parametrize(
    ("kind", "change"), [(kind, change) for kind in SQL_KINDS for change in CHANGES[kind]]
)
async def test_a_changed_word_index_is_a_fault(
    store_targets: StoreTargets, kind: str, change: str
) -> None:
    target = store_targets.new(kind)
    await indexed_store(target)
    raw(kind, target)(CHANGES[kind][change])
    seq = 4 if "compaction" in change else 99 if "no entry" in change else 2
    async with await open_store(target) as store:
        assert await store.integrity() == [
            f"session 'a': the word index does not hold the words of its entry {seq} "
            "(search would miss or invent hits; docs/sql.md, Search, says how to rebuild it)"
        ]


@pytest.mark.parametrize("kind", SQL_KINDS)
async def test_each_session_is_named_once_with_its_count(
    store_targets: StoreTargets, kind: str
) -> None:
    target = store_targets.new(kind)
    await indexed_store(target)
    table = "search_postings" if kind == "sqlite" else "search_vectors"
    raw(kind, target)(f"DELETE FROM {table}")
    async with await open_store(target) as store:
        faults = await store.integrity()
    assert faults == [
        "session 'a': the word index does not hold the words of its entry 1 nor of 2 more "
        "(search would miss or invent hits; docs/sql.md, Search, says how to rebuild it)",
        f"session 'b': the word index does not hold the words of its entry 1 nor of "
        f"{BACKLOG + 9} more "
        "(search would miss or invent hits; docs/sql.md, Search, says how to rebuild it)",
    ]


async def test_a_session_erased_while_postgresql_checks_is_no_fault(
    store_targets: StoreTargets, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The checks read one snapshot: a session erased by another process
    between two of their statements is checked as it was when they began."""
    from sessionstore.backends.sql import wordcheck

    target = store_targets.new("postgresql")
    async with await open_store(target) as store:
        await store.create(SessionMeta(id="a"))
        await store.append_many("a", [message(f"a{n}", f"apple {n}") for n in range(3)])
        await store.create(SessionMeta(id="b"))
        await store.append_many("b", [message(f"b{n}", f"banana {n}") for n in range(600)])
        erase = raw("postgresql", target)
        checked = wordcheck._differing

        def erased_first(*args: object) -> object:
            if not erased:
                erased.append(True)
                erase(  # as an erase does, in a transaction of its own
                    "INSERT INTO erasures (kind, name, at, reason, lines, digest) VALUES "
                    "('session', 'a', 't', 'meanwhile', 3, 'x'); "
                    + "; ".join(
                        f"DELETE FROM {table} WHERE session_pk = {A}"
                        for table in ("titles", "listing", "activity", "search_vectors", "entries")
                    )
                    + "; DELETE FROM sessions WHERE id = 'a'"
                )
            return checked(*args)  # type: ignore[arg-type]

        erased: list[bool] = []
        monkeypatch.setattr(wordcheck, "_differing", erased_first)
        assert await store.integrity() == []
        assert erased
        assert [meta.id for meta in await store.list()] == ["b"]
