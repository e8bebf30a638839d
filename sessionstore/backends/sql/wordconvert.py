"""Converting a store sealed before word keys (migration 0012), whose tokens
are the index key's hashes alone: its first open with the keys moves each
under its bucket's word key (`CHUNK` rows per transaction on SQLite, a
bucket on PostgreSQL), reading no message. A row moved already names its
bucket, so an open killed midway goes on at the next; the mark is last.
"""

from __future__ import annotations

from functools import partial
from itertools import groupby
from typing import TYPE_CHECKING

from sqlalchemy import Connection, bindparam, select, text

from sessionstore.backends.sql import wordkeys
from sessionstore.backends.sql.query import Query
from sessionstore.backends.sql.runner import Kind
from sessionstore.backends.sql.tables import sessions
from sessionstore.backends.sql.wordkeys import (
    Change,
    Tokens,
    bucket_of,
    converted,
    insert_postings,
    key_of,
    moved_vectors,
    name_key,
)

if TYPE_CHECKING:
    from sessionstore.backends.sql.database import Database
    from sessionstore.encryption.cipher import WordKey
    from sessionstore.encryption.sealer import Sealer

CHUNK = 20000  # SQLite: rows of the index a transaction moves at most

_SQLITE_OLD = Query(
    text(
        "SELECT word, session_pk, batch, postings FROM search_postings "
        "WHERE (word, session_pk, batch) > (:word, :pk, :batch) "
        "ORDER BY word, session_pk, batch LIMIT :most"
    )
)
_SQLITE_FORGET = Query(
    text("DELETE FROM search_postings WHERE word = :word AND session_pk = :pk AND batch = :batch")
)


def _old_to(key: WordKey) -> Change:
    """Tokens of the scheme before word keys as ``key`` makes them."""
    from sessionstore.encryption.cipher import old_digest

    def change(tokens: list[str]) -> list[str | None]:
        digests = [old_digest(token) for token in tokens]
        made = iter(key.tokens([raw for raw in digests if raw is not None]))
        return [None if raw is None else next(made) for raw in digests]

    return change


def _convert_chunk(
    conn: Connection, *, sealer: Sealer, after: tuple[str, int, int]
) -> tuple[str, int, int] | None:
    """SQLite: move the old tokens of up to `CHUNK` rows after the key
    ``after``; the key of the last row read, None at the end."""
    rows = _SQLITE_OLD.all(conn, word=after[0], pk=after[1], batch=after[2], most=CHUNK)
    if not rows:
        return None
    tokens = Tokens(conn, sealer)
    old = sorted((row for row in rows if row[0] and "." not in row[0]), key=lambda row: row[1])
    moved: list[tuple[str, tuple[str, int, int, bytes]]] = []  # (the new token, the row)
    for _, group in groupby(old, key=lambda row: bucket_of(row[1])):
        found = list(group)
        made = _old_to(tokens.key(found[0][1]))([row[0] for row in found])
        moved += [(new, row) for row, new in zip(found, made, strict=True) if new is not None]
    if moved:
        gone = [{"word": row[0], "pk": row[1], "batch": row[2]} for _, row in moved]
        _SQLITE_FORGET.many(conn, gone)
        insert_postings(conn, sorted((new, *row[1:]) for new, row in moved))
    last = rows[-1]
    return str(last[0]), int(last[1]), int(last[2])


def _convert_bucket(conn: Connection, *, sealer: Sealer, bucket: int) -> None:
    """PostgreSQL: give the bucket a word key, moving its vectors' tokens under it."""
    conn.execute(text("LOCK TABLE word_keys IN EXCLUSIVE MODE"))
    if key_of(conn, bucket) is not None:
        return
    new = sealer.new_word_key(bucket)
    moved_vectors(conn, bucket, _old_to(new))
    name_key(conn, bucket, new.key_id)


_BUCKETS = Query(
    select((sessions.c.pk / bindparam("size")).label("bucket")).distinct().order_by(text("bucket"))
)


def _buckets(conn: Connection) -> list[int]:
    return [int(bucket) for (bucket,) in _BUCKETS.all(conn, size=wordkeys.BUCKET)]


async def convert(database: Database, sealer: Sealer) -> int:
    """Convert the store, if it is not; how many transactions moved tokens."""
    if await database.transaction(Kind.READ, None, converted):
        return 0
    done = 0
    if database.runner.url.get_backend_name() == "postgresql":
        for bucket in await database.transaction(Kind.READ, None, _buckets):
            body = partial(_convert_bucket, sealer=sealer, bucket=bucket)
            await database.transaction(Kind.DURABLE_WRITE, None, body)
            done += 1
    else:
        after: tuple[str, int, int] | None = ("", -1, -1)
        while after is not None:
            chunk = partial(_convert_chunk, sealer=sealer, after=after)
            after = await database.transaction(Kind.DURABLE_WRITE, None, chunk)
            done += 1
    await database.transaction(Kind.DURABLE_WRITE, None, wordkeys.mark_converted)
    return done
