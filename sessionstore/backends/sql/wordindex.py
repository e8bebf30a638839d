"""The word index behind `SqlStore.search`: what it holds, and keeping it.

A message's words are `sessionstore.backends.words`'s, a word longer than
`LONG_WORD` bytes kept as its digest (`word_key`); each message has its
``length`` and each word its ``hits``, what `words.score` ranks by. SQLite
keeps ``search_postings`` (`postings`), indexing the backlog past
``search_mark`` once it holds `BACKLOG` entries, in a transaction of its
own; PostgreSQL keeps a ``tsvector`` per message, written in the append's
transaction (NULL past its 1 MB limit). docs/sql.md, Search.
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

BACKLOG = 256  # SQLite: entries past the index's mark before a write indexes them

LONG_WORD = 64  # bytes of the longest word kept as it is

# The word rule the index is built with: words depend on Python's Unicode tables.
RULE = f"words 1, unicode {unicodedata.unidata_version}"

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
    """A message's words as the index keeps them: each word's key and how
    often it occurs, and how many words it holds."""

    hits: Mapping[str, int]
    length: int


def message_of(line: str | bytes) -> MessageEntry | None:
    """The message a stored line holds; None for another entry, or a line that does not decode."""
    entry = _decoded(line)
    return entry if isinstance(entry, MessageEntry) else None


def _decoded(line: str | bytes) -> SessionEntry | None:
    try:
        entry = trusted_entry(line)
        return entry if entry is not None else decode_entry(line)
    except InvalidRecordError:
        return None


def indexed(
    entry: MessageEntry, seal: Callable[[Mapping[str, int]], dict[str, int]] | None = None
) -> Indexed | None:
    """A message's words, as the index keeps them (``seal`` makes them tokens);
    None when it has none."""
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
    """PostgreSQL: the ``tsvector`` literal of a message's words, a position per
    occurrence (256 at most); None past PostgreSQL's size limit."""
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

MARK_RULE = Query(select(search_mark.c.rule))

BACKLOG_MESSAGES = Query(
    select(entries.c.session_pk, entries.c.seq, entries.c.line)
    .where(_rowid > bindparam("after"), _rowid <= bindparam("upto"), _MESSAGE)
    .order_by(_rowid)
)

INSERT_POSTINGS = Query(insert(search_postings).prefix_with("OR REPLACE"))

SET_MARK = Query(update_(search_mark).values(indexed=bindparam("indexed"), rule=bindparam("rule")))

LOWER_MARK = Query(update_(search_mark).values(indexed=func.min(search_mark.c.indexed, _top)))

DELETE_ALL_WORDS = Query(
    delete(search_postings).where(search_postings.c.session_pk == bindparam("pk"))
)

DELETE_WORDS = Query(
    delete(search_postings).where(
        search_postings.c.word == bindparam("word"),
        search_postings.c.session_pk == bindparam("pk"),
    )
)

INSERT_VECTORS = Query(
    insert(search_vectors).values(
        session_pk=bindparam("session_pk"),
        seq=bindparam("seq"),
        words=cast(bindparam("words"), TsVector()),
        length=bindparam("length"),
    )
)

DELETE_VECTORS = Query(delete(search_vectors).where(search_vectors.c.session_pk == bindparam("pk")))


# ---------------------------------------------------------------- keeping it


def index_rows(
    conn: Connection, rows: Iterable[tuple[int, int, str | bytes]], sealer: Sealer | None = None
) -> None:
    """Index the messages of ``(session_pk, seq, line)`` rows, lines as written."""
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


TEXT = "text"  # a sealed row's line as written, beside its sealed ``line``


def keep_up(
    conn: Connection, inserted: Sequence[Mapping[str, Any]], sealer: Sealer | None = None
) -> bool:
    """After ``inserted`` entry rows went in: PostgreSQL indexes them now;
    SQLite says whether the backlog is due for `catch_up`."""
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
    """SQLite: index the backlog once it holds `BACKLOG` entries."""
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
    """Rows ``(session_pk, seq, line)`` with their lines opened (one that does
    not stands as ``unopened``, when given)."""
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
    """Delete the index rows of a plain session's own entries, of ``lines``
    (None: unreadable). SQLite deletes each of their words for the session,
    or, when a line does not decode or another rule made the rows, reads
    the whole index for them."""
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
    """SQLite, after a delete: new rows take the rowid after the greatest
    left, so the mark goes no higher."""
    if conn.dialect.name == "sqlite":
        LOWER_MARK.many(conn, [{}])
