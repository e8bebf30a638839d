"""The word index checked against the entries it is derived from (``integrity()``).

A raw writer's row added, changed or deleted there makes `search` invent or
miss a message: `faults` rebuilds each message's words as they were
indexed and compares, reading each line once. SQLite's index must hold
exactly the words of each message up to its mark (one made with another
word rule is not checked); PostgreSQL's a vector and length per message,
and nothing else. Each session's first wrong message is named.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import closing
from functools import partial
from itertools import groupby
from typing import TYPE_CHECKING

from sqlalchemy import BigInteger, Connection, bindparam, literal_column, select, text

from sessionstore.backends.sql import queries as Q
from sessionstore.backends.sql.postings import LENGTHS, unpack
from sessionstore.backends.sql.query import Query
from sessionstore.backends.sql.tables import entries, search_postings
from sessionstore.backends.sql.wordindex import (
    BACKLOG_SIZE,
    RULE,
    Indexed,
    indexed,
    message_of,
    opened_rows,
    vector,
)
from sessionstore.backends.sql.wordkeys import bucket_of, current, sealed_hits

if TYPE_CHECKING:
    from sessionstore.encryption.sealer import Sealer

_MESSAGE = entries.c.type == literal_column("'message'")
_rowid = literal_column("entries.rowid", BigInteger)

_INDEXED_MESSAGES, _ALL_MESSAGES = (
    Query(
        select(entries.c.session_pk, entries.c.seq, entries.c.line)
        .where(_MESSAGE, *upto)
        .order_by(entries.c.session_pk, entries.c.seq)
    )
    for upto in ([_rowid <= bindparam("mark")], [])
)
_WORD_ROWS = Query(
    select(
        search_postings.c.session_pk,
        search_postings.c.batch,
        search_postings.c.word,
        search_postings.c.postings,
    ).order_by(search_postings.c.session_pk, search_postings.c.batch)
)

# PostgreSQL: a page of messages' expected rows against the stored ones.
_VECTORS_DIFFER = text(
    "SELECT x.pk, x.seq FROM unnest(CAST(:pks AS bigint[]), CAST(:seqs AS bigint[]), "
    "CAST(:present AS boolean[]), CAST(:words AS text[]), CAST(:lengths AS int[])) "
    "AS x(pk, seq, present, words, length) "
    "LEFT JOIN search_vectors v ON v.session_pk = x.pk AND v.seq = x.seq "
    "WHERE x.present <> (v.session_pk IS NOT NULL) OR (x.present AND "
    "(v.length <> x.length OR v.words IS DISTINCT FROM CAST(x.words AS tsvector)))"
)
_VECTORS_OF_NO_MESSAGE = text(
    "SELECT v.session_pk, v.seq FROM search_vectors v LEFT JOIN entries e "
    "ON e.session_pk = v.session_pk AND e.seq = v.seq "
    "WHERE e.session_pk IS NULL OR e.type <> 'message' ORDER BY v.session_pk, v.seq"
)
_PAGE = 500

_Words = tuple[tuple[str, int], ...]  # a message's (word, hits), sorted
_Key = tuple[int, int]  # (session_pk, seq)


def faults(conn: Connection, sealer: Sealer | None = None) -> list[str]:
    """Where the word index disagrees with the messages it indexes (in a
    sealed store, with their words' tokens; a line that does not open has
    no words here, and is a fault of its own, `survey.broken_chains`)."""
    missing: list[str] = []  # word keys that do not unwrap
    if conn.dialect.name == "postgresql":
        wrong = _vector_faults(conn, sealer, missing)
    else:
        mark, rule, _ = BACKLOG_SIZE.first(conn)
        if rule != RULE:
            return []
        wrong = _word_faults(conn, mark, sealer, missing)
    return [f"the word index: {reason}" for reason in missing] + _named(conn, wrong)


def _opened(
    conn: Connection, rows: Iterator[tuple[int, int, str | bytes]], sealer: Sealer | None
) -> Iterator[tuple[int, int, str | bytes]]:
    return rows if sealer is None else opened_rows(conn, sealer, rows, unopened="")


def _expected(
    conn: Connection,
    rows: Iterator[tuple[int, int, str | bytes]],
    sealer: Sealer | None,
    missing: list[str],
) -> Iterator[tuple[_Key, Indexed | None]]:
    """Each entry's words and length, as the index should hold them (None:
    no message, or no words; in a sealed store, their tokens under the word
    key of its bucket, and a bucket with none holds no word)."""
    keys = None if sealer is None else dict(current(conn, sealer, missing=missing))
    for pk, seq, line in rows:
        message = message_of(line)
        seal = None
        if sealer is not None and keys is not None:
            key = keys.get(bucket_of(pk))
            seal = partial(sealed_hits, sealer, key) if key is not None else _unkeyed
        yield (pk, seq), indexed(message, seal) if message is not None else None


def _unkeyed(hits: Mapping[str, int]) -> dict[str, int]:
    """A message of a bucket with no word key: no token the index can hold."""
    return {"\x00" + word: count for word, count in hits.items()}


def _stored(rows: Iterator[tuple[int, int, str, bytes]]) -> Iterator[tuple[_Key, _Words, int]]:
    """Each message's words and length, as the index holds them: a
    session's batch at a time (the rows of one key, in ``seq`` order)."""
    for (pk, batch), group in groupby(rows, key=lambda row: (row[0], row[1])):
        lengths: dict[int, list[int]] = {}
        found: dict[int, list[tuple[str, int]]] = {}
        for _, _, word, blob in group:
            for seq, hits in unpack(blob, batch):
                if word == LENGTHS:
                    lengths.setdefault(seq, []).append(hits)
                else:  # a word that is no text (a raw writer's) is none of the line's
                    found.setdefault(seq, []).append((str(word), hits))
        for seq in sorted(lengths.keys() | found.keys()):
            given = lengths.get(seq, [])
            length = given[0] if len(given) == 1 else -1  # -1: no one length
            yield (pk, seq), tuple(sorted(found.get(seq, []))), length


def _word_faults(
    conn: Connection, mark: int, sealer: Sealer | None, missing: list[str]
) -> list[_Key]:
    """SQLite: the messages whose rows in ``search_postings`` are not their words."""
    wrong: list[_Key] = []
    with (
        closing(_INDEXED_MESSAGES.each(conn, mark=mark)) as messages,
        closing(_WORD_ROWS.each(conn)) as rows,
    ):
        expected = (
            (key, tuple(sorted(found.hits.items())), found.length)
            for key, found in _expected(conn, _opened(conn, messages, sealer), sealer, missing)
            if found is not None
        )
        stored = _stored(rows)
        want, have = next(expected, None), next(stored, None)
        while want is not None or have is not None:
            if have is None or (want is not None and want[0] < have[0]):
                assert want is not None
                wrong.append(want[0])  # words missing
                want = next(expected, None)
            elif want is None or have[0] < want[0]:
                wrong.append(have[0])  # words of no indexed message
                have = next(stored, None)
            else:
                if want[1:] != have[1:]:
                    wrong.append(want[0])
                want, have = next(expected, None), next(stored, None)
    return wrong


def _vector_faults(conn: Connection, sealer: Sealer | None, missing: list[str]) -> list[_Key]:
    """PostgreSQL: the messages whose row in ``search_vectors`` is not theirs,
    and rows of what is no message."""
    wrong: list[_Key] = []
    with closing(_ALL_MESSAGES.each(conn)) as messages:
        page: list[tuple[int, int, bool, str | None, int]] = []
        opened = _opened(conn, messages, sealer)
        for (pk, seq), found in _expected(conn, opened, sealer, missing):
            if found is None:
                page.append((pk, seq, False, None, 0))
            else:
                page.append((pk, seq, True, vector(found.hits), found.length))
            if len(page) == _PAGE:
                wrong += _differing(conn, page)
                page = []
        wrong += _differing(conn, page)
    wrong += [(pk, seq) for pk, seq in conn.execute(_VECTORS_OF_NO_MESSAGE)]
    return sorted(wrong)


def _differing(conn: Connection, page: list[tuple[int, int, bool, str | None, int]]) -> list[_Key]:
    if not page:
        return []
    pks, seqs, present, words, lengths = (list(column) for column in zip(*page, strict=True))
    given = {"pks": pks, "seqs": seqs, "present": present, "words": words, "lengths": lengths}
    return [(pk, seq) for pk, seq in conn.execute(_VECTORS_DIFFER, given)]


def _named(conn: Connection, wrong: list[_Key]) -> list[str]:
    """One fault per session: its first wrong message, and how many were."""
    counts = Counter(pk for pk, _ in wrong)
    found = []
    for pk, seq in sorted({pk: (pk, seq) for pk, seq in reversed(wrong)}.values()):
        row = Q.SESSION_ID.first(conn, pk=pk)
        who = f"session {row[0]!r}" if row is not None else f"no session (key {pk})"
        more = counts[pk] - 1
        found.append(
            f"{who}: the word index does not hold the words of its entry {seq}"
            + (f" nor of {more} more" if more else "")
            + " (search would miss or invent hits; docs/sql.md, Search, says how to rebuild it)"
        )
    return found
