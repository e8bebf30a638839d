"""Word keys: a sealed store's word tokens, under a key per bucket of sessions.

A sealed store's word index holds, for each word of a session's messages,
its keyed hash under the store's index key (`Sealer.word`) enciphered by
the *word key* of the session's bucket (`cipher.WordKey`): the sessions of
keys ``pk`` in ``[b * BUCKET, (b + 1) * BUCKET)`` make bucket ``b``, and a
token names its bucket first (``b.``), so that a bucket's rows are one
range of the index's key (SQLite: of the words; PostgreSQL: of
``session_pk``). The keyring
keeps each word key (scope ``words``, named by its bucket), the table
``word_keys`` the id of the current one (migration 0012); the row of
bucket `CONVERTED` says every bucket's tokens are under word keys.

* **Indexing** (`Tokens`, in the write transaction that indexes): a
  bucket's key is read from ``word_keys``, on PostgreSQL ``FOR SHARE``, so
  that an erase re-keying the bucket waits for the transaction, and it for
  the erase; a bucket without one is given a new key.
* **Erase** (`rekey`, in the erase's transaction, after the session's rows
  went): the bucket's rows are moved under a new word key, token by token
  (no message is read), ``word_keys`` names it, and the old key is doomed,
  destroyed after the commit (`sealing.sweep` ends one a crash left
  doomed: the row no longer names it). A copy of the index taken before
  the erase then holds the erased session's tokens under a key that is
  gone.
* **Search** (`current`): a word's token is made under each bucket's key
  named in the snapshot read: one AES block per word and bucket. On
  PostgreSQL, whose reads take a snapshot per statement, the keys are read
  again after the index: changed (an erase committed meanwhile), the
  search is run again.
* **Conversion** of a store sealed before 0012, whose tokens are the index
  key's hashes alone: `sessionstore.backends.sql.wordconvert`.

Plain stores have no word keys and no row here.
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

__all__ = [
    "BUCKET",
    "CONVERTED",
    "Change",
    "Tokens",
    "bucket_of",
    "converted",
    "current",
    "doomed_key_ended",
    "insert_postings",
    "key_of",
    "keys_of",
    "mark_converted",
    "moved_vectors",
    "name_key",
    "named",
    "rekey",
    "sealed_hits",
]

BUCKET = 256
"""Sessions in a bucket at most (by ``pk``). A search makes a word's token
once per bucket; an erase re-keys the rows of its bucket's other sessions."""

CONVERTED = -1
"""The bucket whose row (with no key) says every bucket is under word keys."""

_PAGE = 500  # PostgreSQL vectors re-keyed per statement


def bucket_of(pk: int) -> int:
    """The bucket of the session of key ``pk``."""
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
    """What makes the tokens the word index holds for the messages a write
    transaction indexes: the word key of each session's bucket, read (or
    made) once per transaction.

    Args:
        conn: the write transaction.
        sealer: the store's.
    """

    def __init__(self, conn: Connection, sealer: Sealer) -> None:
        self._conn = conn
        self._sealer = sealer
        self._keys: dict[int, WordKey] = {}

    def key(self, pk: int) -> WordKey:
        """The word key of the bucket of session ``pk``; made if it has none."""
        bucket = bucket_of(pk)
        found = self._keys.get(bucket)
        if found is None:
            found = self._keys[bucket] = _bucket_key(self._conn, self._sealer, bucket)
        return found

    def sealed(self, pk: int, hits: Mapping[str, int]) -> dict[str, int]:
        """A message's ``hits`` (by word) as the index holds them in session ``pk``."""
        return sealed_hits(self._sealer, self.key(pk), hits)


def sealed_hits(sealer: Sealer, key: WordKey, hits: Mapping[str, int]) -> dict[str, int]:
    """``hits`` by word, by the words' tokens under ``key``."""
    tokens = key.tokens([sealer.word(word) for word in hits])
    return dict(zip(tokens, hits.values(), strict=True))


def _bucket_key(conn: Connection, sealer: Sealer, bucket: int) -> WordKey:
    """The bucket's word key, its row held shared until the commit
    (PostgreSQL); a new one kept first when it has none. Of two
    transactions giving one bucket a key at once, one's row stays; the
    other's key, never used, is destroyed."""
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
    """Each bucket and the id of its word key, as ``word_keys`` names them."""
    return [(int(bucket), bytes(key_id)) for bucket, key_id in _KEYS.all(conn)]


def current(
    conn: Connection, sealer: Sealer, *, missing: list[str] | None = None
) -> list[tuple[int, WordKey]]:
    """Each bucket and its word key, as the transaction's snapshot names
    them (`keys_of` what `named` reads)."""
    return keys_of(sealer, named(conn), missing=missing)


def keys_of(
    sealer: Sealer, rows: list[tuple[int, bytes]], *, missing: list[str] | None = None
) -> list[tuple[int, WordKey]]:
    """The word keys of ``rows`` (`named`'s), by bucket.

    Args:
        missing: where to say why a key does not unwrap (its bucket then
            left out) instead of raising.

    Raises:
        EncryptionKeyError: the keyring lacks one (destroyed by an erase
            that committed after the rows were read: search again), or it
            does not unwrap.
    """
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
"""Tokens as another key makes them (None: no token of the key, kept as it is)."""


def _moved_postings(conn: Connection, bucket: int, change: Change, *, drop: int) -> int:
    """SQLite: change every token of the bucket's rows, those of session
    ``drop`` deleted instead; how many rows were moved."""
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
    """PostgreSQL: change every token of the vectors of the bucket's
    sessions, a page at a time; how many vectors."""
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
    """Delete the index rows of session ``pk``, and move the rest of its
    bucket under a new word key, dooming the old one (an erase's body,
    before its commit); the old key's id, to destroy after the commit, or
    None when the bucket has none (nothing of it was indexed)."""
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
    """Whether a doomed word key is no longer its bucket's (its erase
    committed): `sealing.sweep` destroys it then. A key still named is an
    erase cut short before its commit: it stays."""
    row = _KEY_OF.first(conn, bucket=bucket)
    return row is None or bytes(row[0]) != key_id


def mark_converted(conn: Connection) -> None:
    """Record that every bucket's tokens are under word keys (a new sealed
    store's, or one converted; in a write transaction)."""
    _NEW_KEY.many(conn, [{"bucket": CONVERTED, "key_id": b""}])


def converted(conn: Connection) -> bool:
    """Whether every bucket's tokens are under word keys (`mark_converted`)."""
    return _KEY_OF.first(conn, bucket=CONVERTED) is not None


def key_of(conn: Connection, bucket: int) -> bytes | None:
    """The id of the bucket's word key, None when it has none."""
    row = _KEY_OF.first(conn, bucket=bucket)
    return None if row is None else bytes(row[0])


def name_key(conn: Connection, bucket: int, key_id: bytes) -> None:
    """Name the word key of a bucket that has none."""
    _NEW_KEY.many(conn, [{"bucket": bucket, "key_id": key_id}])


def insert_postings(conn: Connection, rows: list[tuple[str, int, int, bytes]]) -> None:
    """SQLite: rows ``(word, session_pk, batch, postings)`` into the index."""
    _SQLITE_INSERT.many_in_order(conn, _POSTING_COLUMNS, rows)
