"""Encryption at rest on the SQL store: which stores are sealed, and their rows.

A store sealed from its first open with ``keys=`` holds the one row of
``sealing`` naming its id, which its keyring serves; which columns it
keeps sealed, and which clear: docs/encryption.md. The helpers here seal
what a write stores and open what a read finds; the other modules pass
them rows and never see the cipher.
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

_T = TypeVar("_T")

SCHEME = "aes-256-gcm/1"

KEYRING_SUFFIX = ".keys"  # a SQLite store's default keyring: the file beside it

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
    """The sealer of the store in ``database``, or None for a plain one."""
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
    started = partial(Sealer.start, master, ring, as_text=as_text)
    try:
        if found is not None:
            sealer = await asyncio.to_thread(started, found[0], new=False)
            await sweep(database, sealer)
            await wordconvert.convert(database, sealer)
            return sealer
        # Bound first, then named in the database: a process that finds the
        # row finds its keyring ready. Another process naming its own first
        # wins; ours is left unused.
        store_id = uuid.uuid4().hex
        sealer = await asyncio.to_thread(started, store_id, new=True)
        seal = partial(_seal_store, store_id=store_id)
        named = await database.transaction(Kind.DURABLE_WRITE, None, seal)
        if named == store_id:
            return sealer
        return await asyncio.to_thread(started, named, new=False)
    except BaseException:
        ring.close()
        raise


async def sweep(database: Database, sealer: Sealer) -> int:
    """Destroy the doomed keys an erase committed and then died before
    destroying (an erasure record names them; a word key, once ``word_keys``
    no longer does); how many. A doomed key of an erase cut short before its
    commit still opens, and erasing again ends it."""
    destroyed = 0
    for key in await asyncio.to_thread(sealer.keyring.doomed):
        if key.scope == "words":
            ended = partial(wordkeys.doomed_key_ended, key_id=key.key_id, bucket=int(key.name))
        else:
            ended = partial(_erased, key_id=key.key_id, scope=key.scope, name=key.name)
        erased = await database.transaction(Kind.READ, None, ended)
        if erased:
            await asyncio.to_thread(partial(sealer.destroy, key.key_id))
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
    """Whether an erasure of the session (or journal) ``name`` destroys ``key_id``."""
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


_SEAL = Query(insert(sealing).values(id=1, scheme=SCHEME, store_id=bindparam("store_id")))


def _sealing_row(conn: Connection) -> tuple[str, str] | None:
    row = _ROW.first(conn)
    if row is not None and row[1] != SCHEME:
        raise EncryptionKeyError(f"the store is sealed by {row[1]!r}, not {SCHEME!r}")
    return None if row is None else (row[0], row[1])


def _holds_anything(conn: Connection) -> bool:
    return any(count for (count,) in _ANYTHING.all(conn))


def _plain() -> EncryptionKeyError:
    return EncryptionKeyError(
        "this store holds plain sessions, journals or heads: keys= seals a new store "
        "from its first open (export this one and import it into a store opened with keys)"
    )


def _seal_store(conn: Connection, *, store_id: str) -> str:
    """Name the store sealed; the id named. Locked on PostgreSQL: of workers
    opening a new store at once, one names it, and the others find its row."""
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
    """A new session's header as its row keeps it, and its new data key (the
    line and None, when plain); the key is destroyed again if the block fails."""
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
    if sealer is None:
        return stored
    return sealer.open_text("header", session_id, 0, stored, where=where)


def key_id_of(value: str | bytes) -> bytes | None:
    """The id of the data key a sealed value names; None if it is not sealed."""
    from sessionstore.encryption.cipher import Sealed, sealed_key_id, stored

    try:
        return sealed_key_id(stored(value))
    except Sealed:
        return None


def session_key_id(conn: Connection, *, session_id: str, sealer: Sealer | None = None) -> bytes:
    """The id of a sealed session's data key; with ``sealer``, checked: the
    header opens as its own, and the keyring holds the key for this session."""
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


def holders(conn: Connection, session_id: str, spans: Lineage) -> Callable[[int], str]:
    """The id of the session holding each ``seq`` of a history as its own row."""
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
    """Rows ``(seq, stored line, ...)`` with their lines opened (UTF-8 bytes
    with ``as_bytes``), each as sealed by the session ``holder(seq)``."""
    if sealer is None or holder is None:
        return iter(rows)
    opened = sealer.open_rows("entry", holder, rows, where)
    if as_bytes:
        return opened
    return ((row[0], row[1].decode(), *row[2:]) for row in opened)


def listed_meta(sealer: Sealer | None, meta: SessionMeta) -> SessionMeta:
    if sealer is None or meta.owner is None:
        return meta
    return meta.model_copy(update={"owner": sealer.owner(meta.owner)})
