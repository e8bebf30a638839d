"""The word index behind `SqlStore.search`: what it holds, and keeping it.

A message's words are `sessionstore.backends.words`'s (never the
database's own idea of a word); a word longer than `LONG_WORD` bytes is
kept as a digest of it (`word_key`), so no key grows without bound. Each
indexed message has its ``length`` in words, and each word its ``hits``
(occurrences): what `words.score` ranks a message by, on every backend.

* **SQLite** (``search_postings``): one row per word of each session's
  messages indexed together, ``(word, session_pk, batch)`` its key and the
  messages holding the word packed in it (`sessionstore.backends.sql.postings`),
  an ordinary table whose rows an erase deletes, their bytes zeroed by
  ``secure_delete`` like every other row.
  Appends only store entries: ``search_mark`` says up to which rowid of
  ``entries`` the messages are indexed, and the write that makes the
  backlog after it reach `BACKLOG` entries has the backlog indexed in a
  transaction of its own (`keep_up`, then `catch_up`); a search reads the
  backlog as it stands (`sessionstore.backends.sql.search`). Indexing 256 messages at once
  writes each page of the index once instead of once per message.
* **PostgreSQL** (``search_vectors``): one ``tsvector`` of each message's
  words, built from our words (each occurrence a position, up to 256),
  with a GIN index, written in the append's transaction. A message whose
  vector would pass PostgreSQL's limit of 1 MB keeps NULL there, and a
  search reads such messages' lines instead.
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    BigInteger,
    Connection,
    bindparam,
    cast,
    delete,
    func,
    insert,
    literal_column,
    select,
)
from sqlalchemy import update as update_

from sessionstore.backends.sql.database import session_id
from sessionstore.backends.sql.postings import LENGTHS, packed_rows
from sessionstore.backends.sql.query import Query
from sessionstore.backends.sql.tables import (
    TsVector,
    entries,
    search_mark,
    search_postings,
    search_vectors,
)
from sessionstore.backends.sql.wordkeys import Tokens
from sessionstore.backends.words import message_words
from sessionstore.errors import CorruptSessionError, InvalidRecordError
from sessionstore.models import MessageEntry, SessionEntry
from sessionstore.wire import decode_entry
from sessionstore.wire.stored import trusted_entry

if TYPE_CHECKING:
    from sessionstore.encryption.sealer import Sealer

__all__ = [
    "BACKLOG",
    "LONG_WORD",
    "RULE",
    "TEXT",
    "Indexed",
    "catch_up",
    "forget",
    "index_rows",
    "indexed",
    "keep_up",
    "lower_mark",
    "message_of",
    "opened_rows",
    "vector",
    "word_key",
]

BACKLOG = 256
"""SQLite: entries appended after the index's mark before a write indexes them."""

LONG_WORD = 64
"""Bytes of the longest word kept as it is; a longer one is kept as its digest."""

RULE = f"words 1, unicode {unicodedata.unidata_version}"
"""The word rule the index is built with: `words.words` depends on Python's
Unicode tables (which characters are letters, their lower case)."""

_MAX_POSITIONS = 256  # PostgreSQL keeps no more positions per lexeme
_VECTOR_BYTES = 1_000_000  # under PostgreSQL's 1 MB of lexemes and positions


def word_key(word: str) -> str:
    """How the index keeps a word: as it is, or (longer than `LONG_WORD`
    bytes) ``#`` and its BLAKE2b-128 in hex; ``#`` is never in a word."""
    raw = word.encode("utf-8", "surrogatepass")
    if len(raw) <= LONG_WORD:
        return word
    return "#" + hashlib.blake2b(raw, digest_size=16).hexdigest()


@dataclass(frozen=True)
class Indexed:
    """A message's words as the index keeps them.

    Attributes:
        hits: each word's key (`word_key`), and how often it occurs.
        length: how many words the message holds (repeats counted).
    """

    hits: Mapping[str, int]
    length: int


def message_of(line: str | bytes) -> MessageEntry | None:
    """The message a stored line holds; None for a compaction, or a line
    that does not decode (it has no words to find)."""
    entry = _decoded(line)
    return entry if isinstance(entry, MessageEntry) else None


def _decoded(line: str | bytes) -> SessionEntry | None:
    """The entry of a stored line, as `load` reads it; None if it does not decode."""
    try:
        entry = trusted_entry(line)
        return entry if entry is not None else decode_entry(line)
    except InvalidRecordError:
        return None


def indexed(
    entry: MessageEntry, seal: Callable[[Mapping[str, int]], dict[str, int]] | None = None
) -> Indexed | None:
    """A message's words, as the index keeps them (``seal`` makes them their
    tokens, in a sealed store: `wordkeys.Tokens.sealed`); None when it has none."""
    found = message_words(entry.message.text())
    if not found:
        return None
    hits = Counter(found)
    for word in [word for word in hits if len(word) * 4 > LONG_WORD]:  # maybe too long
        if (key := word_key(word)) != word:
            hits[key] += hits.pop(word)
    return Indexed(hits if seal is None else seal(hits), len(found))


_POSITIONS = [",".join(map(str, range(1, n + 1))) for n in range(_MAX_POSITIONS + 1)]


def vector(hits: Mapping[str, int]) -> str | None:
    """PostgreSQL: the ``tsvector`` literal of a message's words, each quoted
    as a lexeme with one position per occurrence (256 at most); None when
    it would pass PostgreSQL's size limit."""
    size = 0
    parts = []
    for key, count in hits.items():
        count = min(count, _MAX_POSITIONS)
        size += len(key.encode("utf-8", "surrogatepass")) + 4 + 2 * count
        quoted = key.replace("\\", "\\\\").replace("'", "''")
        parts.append(f"'{quoted}':{_POSITIONS[count]}")
    return " ".join(parts) if size < _VECTOR_BYTES else None


# ---------------------------------------------------------------- statements

_rowid = literal_column("entries.rowid", BigInteger)
_MESSAGE = entries.c.type == literal_column("'message'")

_top = select(func.coalesce(func.max(_rowid), 0)).select_from(entries).scalar_subquery()

BACKLOG_SIZE = Query(
    select(
        search_mark.c.indexed,
        search_mark.c.rule,
        _top,
    )
)
"""SQLite: the index's mark and rule, and the greatest rowid of ``entries``."""

MARK_RULE = Query(select(search_mark.c.rule))
"""SQLite: the word rule the index's rows were made with (``mixed``: several)."""

BACKLOG_MESSAGES = Query(
    select(entries.c.session_pk, entries.c.seq, entries.c.line)
    .where(_rowid > bindparam("after"), _rowid <= bindparam("upto"), _MESSAGE)
    .order_by(_rowid)
)
"""SQLite: the messages of rowid in ``after < rowid <= upto``."""

INSERT_POSTINGS = Query(insert(search_postings).prefix_with("OR REPLACE"))
"""SQLite: word rows (`Query.many_in_order`); one already there (the same
messages indexed again) is replaced, never doubled."""

SET_MARK = Query(update_(search_mark).values(indexed=bindparam("indexed"), rule=bindparam("rule")))
"""SQLite: the index's new mark, and the rule its rows were made with."""

LOWER_MARK = Query(update_(search_mark).values(indexed=func.min(search_mark.c.indexed, _top)))
"""SQLite: the mark no higher than the greatest rowid left in ``entries``."""

DELETE_ALL_WORDS = Query(
    delete(search_postings).where(search_postings.c.session_pk == bindparam("pk"))
)
"""SQLite: every word row of a session (``pk``), reading the whole index."""

DELETE_WORDS = Query(
    delete(search_postings).where(
        search_postings.c.word == bindparam("word"),
        search_postings.c.session_pk == bindparam("pk"),
    )
)
"""SQLite: a word's rows in one session's own entries (``word``, ``pk``)."""

INSERT_VECTORS = Query(
    insert(search_vectors).values(
        session_pk=bindparam("session_pk"),
        seq=bindparam("seq"),
        words=cast(bindparam("words"), TsVector()),
        length=bindparam("length"),
    )
)
"""PostgreSQL: vector rows (`Query.many`), ``words`` a `vector` literal or None."""

DELETE_VECTORS = Query(delete(search_vectors).where(search_vectors.c.session_pk == bindparam("pk")))
"""PostgreSQL: a session's vector rows (``pk``)."""


# ---------------------------------------------------------------- keeping it


def index_rows(
    conn: Connection, rows: Iterable[tuple[int, int, str | bytes]], sealer: Sealer | None = None
) -> None:
    """Index the messages of ``(session_pk, seq, line)`` rows (others
    skipped), their lines as written (opened, in a sealed store: the index
    then holds each word's token under its bucket's word key,
    `sessionstore.backends.sql.wordkeys`)."""
    if conn.dialect.name == "postgresql":
        vectors = [
            {"session_pk": pk, "seq": seq, "words": vector(found.hits), "length": found.length}
            for pk, seq, found in _indexed_rows(conn, rows, sealer)
        ]
        if vectors:
            INSERT_VECTORS.many(conn, vectors)
        return
    # In key order, each page of the index is written once.
    made = packed_rows(
        (pk, seq, found.hits, found.length) for pk, seq, found in _indexed_rows(conn, rows, sealer)
    )
    if made:
        INSERT_POSTINGS.many_in_order(conn, _POSTING_COLUMNS, made)


_POSTING_COLUMNS = ("word", "session_pk", "batch", "postings")


def _indexed_rows(
    conn: Connection, rows: Iterable[tuple[int, int, str | bytes]], sealer: Sealer | None
) -> Iterator[tuple[int, int, Indexed]]:
    tokens = None if sealer is None else Tokens(conn, sealer)
    for pk, seq, line in rows:
        message = message_of(line)
        seal = None if tokens is None else partial(tokens.sealed, pk)
        found = indexed(message, seal) if message is not None else None
        if found is not None:
            yield pk, seq, found


TEXT = "text"
"""In a sealed store, the key of an entry row's line as written (its
``line`` then holds it sealed): what `keep_up` indexes."""


def keep_up(
    conn: Connection, inserted: Sequence[Mapping[str, Any]], sealer: Sealer | None = None
) -> bool:
    """After ``inserted`` entry rows went in (in this write transaction):
    PostgreSQL indexes them now. On SQLite, whether the backlog holds
    `BACKLOG` entries: index it then with `catch_up`, in a transaction of
    its own (an append's stays a few rows)."""
    if conn.dialect.name == "postgresql":
        line = TEXT if sealer is not None else "line"
        index_rows(
            conn,
            ((row["session_pk"], row["seq"], row[line]) for row in inserted if _message(row)),
            sealer,
        )
        return False
    mark, _, top = BACKLOG_SIZE.first(conn)
    return bool(top - mark >= BACKLOG)


def catch_up(conn: Connection, sealer: Sealer | None = None) -> None:
    """SQLite: index the backlog once it holds `BACKLOG` entries (a write
    transaction's body)."""
    mark, rule, top = BACKLOG_SIZE.first(conn)
    if top - mark >= BACKLOG:
        rows = BACKLOG_MESSAGES.each(conn, after=mark, upto=top)
        if sealer is None:
            index_rows(conn, rows)
        else:
            index_rows(conn, opened_rows(conn, sealer, list(rows)), sealer)
        # Rows made with another rule stay: an erase then reads the whole index.
        made = RULE if rule == RULE else "mixed"
        SET_MARK.many(conn, [{"indexed": top, "rule": made}])


def _message(row: Mapping[str, Any]) -> bool:
    return bool(row["type"] == "message")


def opened_rows(
    conn: Connection,
    sealer: Sealer,
    rows: Iterable[tuple[int, int, str | bytes]],
    *,
    unopened: str | None = None,
) -> Iterator[tuple[int, int, str]]:
    """Rows ``(session_pk, seq, line)`` of entries, each its session's own,
    with their lines opened; a line that does not open raises
    `CorruptSessionError`, or with ``unopened`` stands as that."""
    names: dict[int, str] = {}
    for pk, seq, line in rows:
        if pk not in names:
            names[pk] = session_id(conn, pk)
        try:
            yield pk, seq, sealer.open_text("entry", names[pk], seq, line, where="entries")
        except CorruptSessionError:
            if unopened is None:
                raise
            yield pk, seq, unopened


def forget(conn: Connection, pk: int, lines: Iterable[str | bytes] | None) -> None:
    """Delete the index rows of a plain session's own entries, whose lines
    are ``lines`` (an erase's body, before the entries go; None when they
    cannot be read: a damaged session's). A sealed store's go with the
    re-key of their bucket (`wordkeys.rekey`).

    SQLite: each word of those lines is deleted for the session, through
    the index; when a line does not decode, or rows were made with another
    word rule, every row of the session is found by reading the index."""
    if conn.dialect.name == "postgresql":
        DELETE_VECTORS.many(conn, [{"pk": pk}])
        return
    keys: set[str] = set()
    whole = lines is None or MARK_RULE.first(conn)[0] != RULE
    for line in lines or ():
        if whole:
            break
        entry = _decoded(line)
        if entry is None:
            whole = True  # what its words were when it was indexed is unknown now
        elif isinstance(entry, MessageEntry) and (found := indexed(entry)) is not None:
            keys.update(found.hits)
    if whole:
        DELETE_ALL_WORDS.many(conn, [{"pk": pk}])
    elif keys:
        keys.add(LENGTHS)  # the row of the messages' lengths
        DELETE_WORDS.many(conn, [{"word": key, "pk": pk} for key in sorted(keys)])


def lower_mark(conn: Connection) -> None:
    """SQLite, after entries were deleted: SQLite gives a new row the rowid
    after the greatest one left, so the mark goes no higher than that."""
    if conn.dialect.name == "sqlite":
        LOWER_MARK.many(conn, [{}])
