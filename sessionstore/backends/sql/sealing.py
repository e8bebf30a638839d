"""Encryption at rest on the SQL store: which stores are sealed, and their rows.

A store is sealed from its first open with ``keys=`` (docs/encryption.md):
its database then holds the one row of ``sealing`` (migration 0008),
naming the store's id, which its keyring serves. Sealed, the store keeps
in place of each text that says what a session holds its sealed form
(`Sealer`, base64 in text columns, bytes in ``journal_lines``):

* ``sessions.header``, ``entries.line``, ``titles.title``,
  ``journal_lines.line``: sealed, each bound to its session (or journal)
  and position;
* ``listing.owner``: a keyed token (`Sealer.owner`), equal for equal owners;
* the word index's words: tokens equal for equal words within a bucket of
  sessions, under the bucket's word key (`sessionstore.backends.sql.wordkeys`);
* ids, ``seq``, timestamps, entry types, ``first_kept_id``, lengths, heads
  and erasure records: clear, as the store's structure needs them.

Digests chain what is stored: the sealed texts.

The helpers here seal what a write stores and open what a read finds;
every other module of the package passes them its rows and never sees
the cipher.
"""

from __future__ import annotations

import asyncio
import bisect
import os
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import Connection, bindparam, func, insert, select, text, union_all

from sessionstore.backends.sql import wordconvert, wordkeys
from sessionstore.backends.sql.database import find_session
from sessionstore.backends.sql.database import session_id as stored_id
from sessionstore.backends.sql.engine import describe, is_sqlite
from sessionstore.backends.sql.query import Query
from sessionstore.backends.sql.runner import Kind
from sessionstore.backends.sql.tables import erasures, heads, journal_lines, sealing, sessions
from sessionstore.errors import ConfigurationError, CorruptSessionError, EncryptionKeyError
from sessionstore.models import SessionMeta

if TYPE_CHECKING:
    from sessionstore.backends.sql.database import Database
    from sessionstore.backends.sql.lineage import Lineage
    from sessionstore.encryption.keyring import Keyring
    from sessionstore.encryption.keys import Key
    from sessionstore.encryption.sealer import DataKey, Sealer

__all__ = [
    "KEYRING_SUFFIX",
    "SCHEME",
    "holders",
    "key_id_of",
    "listed_meta",
    "new_header",
    "open_header",
    "open_lines",
    "seal_line",
    "session_key_id",
    "start",
    "sweep",
]

_T = TypeVar("_T")

SCHEME = "aes-256-gcm/1"
"""The cipher scheme a sealed store's row names (`sessionstore.encryption.cipher`)."""

KEYRING_SUFFIX = ".keys"
"""A SQLite store's default keyring: a file beside the database, this added to its name."""

_ROW = Query(select(sealing.c.store_id, sealing.c.scheme))
_ANYTHING = Query(
    union_all(
        select(func.count()).select_from(select(sessions.c.pk).limit(1).subquery()),
        select(func.count()).select_from(select(journal_lines.c.seq).limit(1).subquery()),
        select(func.count()).select_from(select(heads.c.seq).limit(1).subquery()),
    )
)


async def start(
    database: Database,
    keys: Key | Iterable[Key] | None,
    keyring: Keyring | str | os.PathLike[str] | None,
) -> Sealer | None:
    """The sealer of the store in ``database``, or None for a plain one.

    Raises:
        EncryptionKeyError: a sealed store opened without keys, a plain one
            that holds anything opened with them, keys that do not open it,
            a keyring without keys, or none for PostgreSQL.
        ConfigurationError: no cryptography package.
    """
    found = await database.transaction(Kind.READ, None, _sealing_row)
    if keys is None:
        if keyring is not None:
            raise EncryptionKeyError("keyring= is given without keys=: give both, or neither")
        if found is not None:
            raise EncryptionKeyError(
                f"{database.where} is encrypted: open it with keys= (and its keyring)",
                needs_keys=True,
            )
        return None
    if found is None and await database.transaction(Kind.READ, None, _holds_anything):
        # Sealed meanwhile by another process (its row commits before its
        # first session), or plain: refused before any keyring is made.
        found = await database.transaction(Kind.READ, None, _sealing_row)
        if found is None:
            raise _plain()
    from sessionstore.encryption.keys import MasterKeys

    try:
        from sessionstore.encryption.sealer import Sealer  # cryptography loads only now
    except ImportError as exc:
        raise ConfigurationError(
            f"encryption at rest needs the cryptography package: "
            f"pip install 'sessionstore[encryption]' ({exc})"
        ) from None

    master = MasterKeys(keys)
    ring = _keyring(database, keyring)
    as_text = not is_sqlite(database.runner.url)  # SQLite keeps the sealed bytes as they are
    try:
        if found is not None:
            start = partial(Sealer.start, master, ring, found[0], new=False, as_text=as_text)
            sealer = await _in_thread(start)
            await sweep(database, sealer)
            await wordconvert.convert(database, sealer)
            return sealer
        # Bound first, then named in the database: a process that finds the
        # row finds its keyring ready. Another process naming its own first
        # wins; ours is left unused.
        store_id = uuid.uuid4().hex
        start = partial(Sealer.start, master, ring, store_id, new=True, as_text=as_text)
        sealer = await _in_thread(start)
        seal = partial(_seal_store, store_id=store_id)
        named = await database.transaction(Kind.DURABLE_WRITE, None, seal)
        if named == store_id:
            return sealer
        return await _in_thread(
            partial(Sealer.start, master, ring, named, new=False, as_text=as_text)
        )
    except BaseException:
        ring.close()
        raise


async def sweep(database: Database, sealer: Sealer) -> int:
    """Destroy the keys an erase doomed and then died before destroying:
    those an erasure record names (its transaction committed). A doomed key
    no record names is an erase cut short before its commit (or refused):
    it still opens, and erasing again ends it. A doomed word key is
    destroyed once ``word_keys`` no longer names it (`wordkeys.rekey`).
    How many were destroyed."""
    destroyed = 0
    for key in await _in_thread(sealer.keyring.doomed):
        if key.scope == "words":
            ended = partial(wordkeys.doomed_key_ended, key_id=key.key_id, bucket=int(key.name))
        else:
            ended = partial(_erased, key_id=key.key_id, scope=key.scope, name=key.name)
        erased = await database.transaction(Kind.READ, None, ended)
        if erased:
            await _in_thread(partial(sealer.destroy, key.key_id))
            destroyed += 1
    return destroyed


_ERASED = Query(
    select(erasures.c.seq)
    .where(
        erasures.c.kind == bindparam("kind"),
        erasures.c.name == bindparam("name"),
        erasures.c.key == bindparam("key"),
    )
    .limit(1)
)


def _erased(conn: Connection, *, key_id: bytes, scope: str, name: str) -> bool:
    """Whether an erasure of the session (or journal) ``name`` names ``key_id``
    as the key it destroys: never true of a key its session still holds, nor
    of another session's key."""
    return _ERASED.first(conn, kind=scope, name=name, key=key_id.hex()) is not None


def _keyring(database: Database, keyring: Keyring | str | os.PathLike[str] | None) -> Keyring:
    from sessionstore.backends.sql.keyring import SqlKeyring, keyring_url, same_database
    from sessionstore.encryption.keyring import Keyring

    if isinstance(keyring, Keyring):
        return keyring
    url = database.runner.url
    if keyring is not None:
        if same_database(keyring_url(keyring), url):
            raise EncryptionKeyError(
                f"keyring {describe(keyring_url(keyring))} is the store's own database "
                f"({database.where}): a copy of the data would then open it; keep the "
                "keyring apart (a file, another database's URL, or a Keyring)"
            )
        return SqlKeyring(keyring)
    if not is_sqlite(url) or url.database is None:
        raise EncryptionKeyError(
            f"{database.where}: a PostgreSQL store's keyring must live apart from its data: "
            "give keyring= (a file, another database's URL, or a Keyring)"
        )
    return SqlKeyring(Path(url.database).with_name(Path(url.database).name + KEYRING_SUFFIX))


async def _in_thread(call: Callable[[], _T]) -> _T:
    """A keyring's blocking call (at open only), off the event loop."""
    return await asyncio.to_thread(call)


_SEAL = Query(insert(sealing).values(id=1, scheme=SCHEME, store_id=bindparam("store_id")))


def _sealing_row(conn: Connection) -> tuple[str, str] | None:
    row = _ROW.first(conn)
    if row is not None and row[1] != SCHEME:
        raise EncryptionKeyError(f"the store is sealed by {row[1]!r}, not {SCHEME!r}")
    return None if row is None else (row[0], row[1])


def _holds_anything(conn: Connection) -> bool:
    """Whether the store holds a session, a journal line or a head."""
    return any(count for (count,) in _ANYTHING.all(conn))


def _plain() -> EncryptionKeyError:
    return EncryptionKeyError(
        "this store holds plain sessions, journals or heads: keys= seals a new store "
        "from its first open (export this one and import it into a store opened with keys)"
    )


def _seal_store(conn: Connection, *, store_id: str) -> str:
    """Name the store sealed (a write transaction's body); the id named.
    On PostgreSQL the table is locked first: of workers opening a new store
    at once, one names it, and the others then find its row."""
    if conn.dialect.name == "postgresql":
        conn.execute(text("LOCK TABLE sealing IN EXCLUSIVE MODE"))
    found = _sealing_row(conn)
    if found is not None:
        return found[0]
    if _holds_anything(conn):
        raise _plain()
    _SEAL.many(conn, [{"store_id": store_id}])
    wordkeys.mark_converted(conn)  # its words are under word keys from the first
    return store_id


# ---------------------------------------------------------------- rows


@contextmanager
def new_header(
    sealer: Sealer | None, session_id: str, header: str
) -> Iterator[tuple[str | bytes, DataKey | None]]:
    """A new session's header line as its row keeps it, and the session's
    new data key (the line itself and None, when plain). The key is kept in
    the keyring before anything is sealed with it, and destroyed again if
    the block fails (a duplicate id, say)."""
    if sealer is None:
        yield header, None
        return
    key = sealer.new_key("session", session_id)
    try:
        yield sealer.seal_text(key, "header", session_id, 0, header), key
    except BaseException:
        sealer.destroy(key.key_id)
        raise


def open_header(sealer: Sealer | None, session_id: str, stored: str, where: str) -> str:
    """The header line ``sessions.header`` holds."""
    if sealer is None:
        return stored
    return sealer.open_text("header", session_id, 0, stored, where=where)


def key_id_of(value: str | bytes) -> bytes | None:
    """The id of the data key a stored (sealed) value names; None if it is
    no sealed value."""
    from sessionstore.encryption.cipher import Sealed, sealed_key_id, stored

    try:
        return sealed_key_id(stored(value))
    except Sealed:
        return None


def session_key_id(conn: Connection, *, session_id: str, sealer: Sealer | None = None) -> bytes:
    """The id of the data key of a session of a sealed store (a read
    transaction's body). With ``sealer``, checked: the header opens as this
    session's header, and the keyring holds that key for this session.

    Raises:
        SessionNotFoundError: no such session.
        CorruptSessionError: its header names no key, or (checked) does not
            open as its own, or its key is kept for something else.
    """
    header = find_session(conn, session_id).header
    found = key_id_of(header)
    if found is None:
        raise CorruptSessionError(session_id, "its header is not sealed", path="sessions")
    if sealer is not None:
        sealer.open_text("header", session_id, 0, header, where="sessions")
        kept = sealer.keyring.get(found)
        if kept is None or (kept.scope, kept.name) != ("session", session_id):
            held = "no session" if kept is None else f"{kept.scope} {kept.name!r}"
            raise CorruptSessionError(
                session_id,
                f"its header is sealed by data key {found.hex()}, which the keyring holds "
                f"for {held}",
                path="sessions",
            )
    return found


def seal_line(sealer: Sealer, key: DataKey, session_id: str, seq: int, line: str) -> str | bytes:
    """What ``entries.line`` holds for entry ``seq`` of a session."""
    return sealer.seal_text(key, "entry", session_id, seq, line)


def holders(conn: Connection, session_id: str, spans: Lineage) -> Callable[[int], str]:
    """The id of the session holding each ``seq`` of a history as its own
    row: the session itself, or for what a fork shares, its bases (read
    once, here)."""
    if len(spans.spans) == 1:
        return lambda seq: session_id
    names = {**spans.names, spans.pk: session_id}
    for span in spans.spans:
        if span.pk not in names:  # read with no names (a lineage made by hand)
            names[span.pk] = stored_id(conn, span.pk)
    # Spans run in order without gaps: the holder of seq is found by bisection.
    ends = [span.end for span in spans.spans]
    holding = [names[span.pk] for span in spans.spans]
    return lambda seq: holding[bisect.bisect_left(ends, seq)]


def open_lines(
    sealer: Sealer | None,
    holder: Callable[[int], str] | None,
    rows: Iterable[Any],
    where: str,
    *,
    as_bytes: bool = False,
) -> Iterator[Any]:
    """The rows ``(seq, stored line, ...)`` of a history with their lines
    opened (as text, or UTF-8 bytes with ``as_bytes``), the rest of each row
    as it was. Each line is opened as the session ``holder(seq)``, which
    holds it as its own row, sealed it (`holders`)."""
    if sealer is None or holder is None:
        return iter(rows)
    opened = sealer.open_rows("entry", holder, rows, where)
    if as_bytes:
        return opened
    return ((row[0], row[1].decode(), *row[2:]) for row in opened)


def listed_meta(sealer: Sealer | None, meta: SessionMeta) -> SessionMeta:
    """The header as the listing keeps it: its owner a token when sealed."""
    if sealer is None or meta.owner is None:
        return meta
    return meta.model_copy(update={"owner": sealer.owner(meta.owner)})
