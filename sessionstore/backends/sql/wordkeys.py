"""Word keys: a sealed store's word tokens, under a key per bucket of sessions.

Each word's keyed hash (`Sealer.word`) is enciphered by the word key of
its session's bucket (``pk // BUCKET``), and a token names its bucket first
(``b.``), so a bucket's rows are one range of the index. ``word_keys``
names each bucket's current key (kept in the keyring). Indexing reads it
``FOR SHARE`` (`Tokens`); an erase moves the bucket's rows under a new
key and dooms the old (`rekey`); a search makes each word's token per
bucket, on PostgreSQL reading the keys again after the index (changed:
search again). docs/encryption.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from itertools import groupby
from typing import TYPE_CHECKING

from sqlalchemy import Connection, bindparam, insert, select, text, update

from sessionstore.backends.sql.query import Query
from sessionstore.backends.sql.tables import search_postings, word_keys

if TYPE_CHECKING:
    from sessionstore.encryption.cipher import WordKey
    from sessionstore.encryption.sealer import Sealer

BUCKET = 256  # sessions in a bucket at most (by pk)

CONVERTED = -1  # the bucket whose row says every bucket is under word keys

_PAGE = 500  # PostgreSQL vectors re-keyed per statement


def bucket_of(pk: int) -> int:
    return pk // BUCKET


_KEY_OF = Query(select(word_keys.c.key_id).where(word_keys.c.bucket == bindparam("bucket")))
_KEY_SHARED = Query(
    select(word_keys.c.key_id)
    .where(word_keys.c.bucket == bindparam("bucket"))
    .with_for_update(read=True)
)
_KEY_LOCKED = Query(
    select(word_keys.c.key_id).where(word_keys.c.bucket == bindparam("bucket")).with_for_update()
)
_KEYS = Query(
    select(word_keys.c.bucket, word_keys.c.key_id)
    .where(word_keys.c.bucket >= 0)
    .order_by(word_keys.c.bucket)
)
_NEW_KEY = Query(
    text("INSERT INTO word_keys (bucket, key_id) VALUES (:bucket, :key_id) ON CONFLICT DO NOTHING")
)
_SET_KEY = Query(
    update(word_keys)
    .where(word_keys.c.bucket == bindparam("bucket"))
    .values(key_id=bindparam("key_id"))
)


class Tokens:
    """The tokens a write transaction indexes: each bucket's word key, read
    (or made) once per transaction."""

    def __init__(self, conn: Connection, sealer: Sealer) -> None:
        self._conn = conn
        self._sealer = sealer
        self._keys: dict[int, WordKey] = {}

    def key(self, pk: int) -> WordKey:
        bucket = bucket_of(pk)
        found = self._keys.get(bucket)
        if found is None:
            found = self._keys[bucket] = _bucket_key(self._conn, self._sealer, bucket)
        return found

    def sealed(self, pk: int, hits: Mapping[str, int]) -> dict[str, int]:
        return sealed_hits(self._sealer, self.key(pk), hits)


def sealed_hits(sealer: Sealer, key: WordKey, hits: Mapping[str, int]) -> dict[str, int]:
    tokens = key.tokens([sealer.word(word) for word in hits])
    return dict(zip(tokens, hits.values(), strict=True))


def _bucket_key(conn: Connection, sealer: Sealer, bucket: int) -> WordKey:
    """The bucket's word key, its row held shared (PostgreSQL); made when it
    has none (of two made at once, the one not kept is destroyed)."""
    row = _KEY_SHARED.first(conn, bucket=bucket)
    if row is not None:
        return sealer.word_key(bytes(row[0]), bucket)
    made = sealer.new_word_key(bucket)
    _NEW_KEY.many(conn, [{"bucket": bucket, "key_id": made.key_id}])
    kept = bytes(_KEY_SHARED.first(conn, bucket=bucket)[0])
    if kept == made.key_id:
        return made
    sealer.destroy(made.key_id)
    return sealer.word_key(kept, bucket)


def named(conn: Connection) -> list[tuple[int, bytes]]:
    return [(int(bucket), bytes(key_id)) for bucket, key_id in _KEYS.all(conn)]


def current(
    conn: Connection, sealer: Sealer, *, missing: list[str] | None = None
) -> list[tuple[int, WordKey]]:
    return keys_of(sealer, named(conn), missing=missing)


def keys_of(
    sealer: Sealer, rows: list[tuple[int, bytes]], *, missing: list[str] | None = None
) -> list[tuple[int, WordKey]]:
    """The word keys of ``rows`` (`named`'s); one that does not unwrap raises
    `EncryptionKeyError`, or with ``missing`` is left out, saying why there."""
    from sessionstore.errors import EncryptionKeyError

    found = []
    for bucket, key_id in rows:
        try:
            found.append((bucket, sealer.word_key(key_id, bucket)))
        except EncryptionKeyError as exc:
            if missing is None:
                raise
            missing.append(str(exc))
    return found


# ---------------------------------------------------------------- moving tokens

# SQLite: a bucket's tokens are the words from "<bucket>." to "<bucket>/"
# ("/" follows "."): one range of the index's key, its pages together.
_SQLITE_ROWS = Query(
    text(
        "SELECT word, session_pk, batch, postings FROM search_postings "
        "WHERE word >= :low AND word < :high"
    )
)
_SQLITE_DELETE = Query(text("DELETE FROM search_postings WHERE word >= :low AND word < :high"))
_SQLITE_INSERT = Query(insert(search_postings))
_POSTING_COLUMNS = ("word", "session_pk", "batch", "postings")
_SQLITE_LENGTHS = Query(
    text("DELETE FROM search_postings WHERE word = '' AND session_pk = :pk")
)  # the rows of a session's messages' lengths (`postings.LENGTHS`)
_POSTGRES_WORDS = Query(
    text(
        "SELECT v.session_pk, v.seq, u.lexeme, coalesce(cardinality(u.positions), 1) "
        "FROM search_vectors AS v CROSS JOIN LATERAL unnest(v.words) AS u "
        "WHERE v.session_pk BETWEEN :low AND :high AND v.words IS NOT NULL "
        "ORDER BY v.session_pk, v.seq"
    )
)
_POSTGRES_SET = text(
    "UPDATE search_vectors AS v SET words = CAST(x.words AS tsvector) "
    "FROM unnest(CAST(:pks AS bigint[]), CAST(:seqs AS bigint[]), CAST(:words AS text[])) "
    "AS x(pk, seq, words) WHERE v.session_pk = x.pk AND v.seq = x.seq"
)
_POSTGRES_DELETE = Query(text("DELETE FROM search_vectors WHERE session_pk = :pk"))

Change = Callable[[list[str]], list[str | None]]


def _moved_postings(conn: Connection, bucket: int, change: Change, *, drop: int) -> int:
    """SQLite: change every token of the bucket's rows but ``drop``'s, deleted."""
    _SQLITE_LENGTHS.many(conn, [{"pk": drop}])
    bounds = {"low": f"{bucket}.", "high": f"{bucket}/"}
    rows = [row for row in _SQLITE_ROWS.all(conn, **bounds)]
    if not rows:
        return 0
    _SQLITE_DELETE.many(conn, [bounds])
    kept = [row for row in rows if row[1] != drop]
    made = change([row[0] for row in kept])
    moved = sorted(
        (new if new is not None else word, pk, batch, postings)
        for (word, pk, batch, postings), new in zip(kept, made, strict=True)
    )
    insert_postings(conn, moved)
    return len(moved)


def moved_vectors(conn: Connection, bucket: int, change: Change) -> int:
    """PostgreSQL: change every token of the bucket's vectors; how many."""
    from sessionstore.backends.sql.wordindex import vector

    count = 0
    page: list[tuple[int, int, str | None]] = []
    low, high = bucket * BUCKET, bucket * BUCKET + BUCKET - 1
    rows = _POSTGRES_WORDS.all(conn, low=low, high=high)
    for (pk, seq), group in groupby(rows, key=lambda row: (row[0], row[1])):
        found = list(group)
        made = change([row[2] for row in found])
        hits = {
            new if new is not None else row[2]: row[3] for row, new in zip(found, made, strict=True)
        }
        page.append((pk, seq, vector(hits)))
        if len(page) == _PAGE:
            count += _set_vectors(conn, page)
            page = []
    return count + _set_vectors(conn, page)


def _set_vectors(conn: Connection, page: list[tuple[int, int, str | None]]) -> int:
    if page:
        pks, seqs, words = (list(column) for column in zip(*page, strict=True))
        conn.execute(_POSTGRES_SET, {"pks": pks, "seqs": seqs, "words": words})
    return len(page)


def rekey(conn: Connection, sealer: Sealer, pk: int) -> bytes | None:
    """Delete session ``pk``'s index rows, and move the rest of its bucket
    under a new word key, dooming the old; its id, to destroy after the
    commit (None: the bucket has none)."""
    bucket = bucket_of(pk)
    postgres = conn.dialect.name == "postgresql"
    row = _KEY_LOCKED.first(conn, bucket=bucket)  # appends to the bucket wait (PostgreSQL)
    if postgres:
        _POSTGRES_DELETE.many(conn, [{"pk": pk}])
    if row is None:
        if not postgres:
            _SQLITE_LENGTHS.many(conn, [{"pk": pk}])
        return None
    old = sealer.word_key(bytes(row[0]), bucket)
    new = sealer.new_word_key(bucket)
    sealer.keyring.doom(old.key_id)
    change = partial(old.rekey, new=new)
    if postgres:
        moved_vectors(conn, bucket, change)
    else:
        _moved_postings(conn, bucket, change, drop=pk)
    _SET_KEY.many(conn, [{"bucket": bucket, "key_id": new.key_id}])
    return old.key_id


def doomed_key_ended(conn: Connection, *, key_id: bytes, bucket: int) -> bool:
    """Whether a doomed word key is no longer its bucket's (its erase committed)."""
    row = _KEY_OF.first(conn, bucket=bucket)
    return row is None or bytes(row[0]) != key_id


def mark_converted(conn: Connection) -> None:
    _NEW_KEY.many(conn, [{"bucket": CONVERTED, "key_id": b""}])


def converted(conn: Connection) -> bool:
    return _KEY_OF.first(conn, bucket=CONVERTED) is not None


def key_of(conn: Connection, bucket: int) -> bytes | None:
    row = _KEY_OF.first(conn, bucket=bucket)
    return None if row is None else bytes(row[0])


def name_key(conn: Connection, bucket: int, key_id: bytes) -> None:
    _NEW_KEY.many(conn, [{"bucket": bucket, "key_id": key_id}])


def insert_postings(conn: Connection, rows: list[tuple[str, int, int, bytes]]) -> None:
    _SQLITE_INSERT.many_in_order(conn, _POSTING_COLUMNS, rows)
