"""Erasing a session or journal: transaction bodies, and the record kept.

An erase is one durable write: the session's row locked (appends and forks
wait), refused while forks share its rows, its bytes digested as
`raw_blocks` gives them, the `Erasure` inserted, then its rows deleted,
which the DELETE triggers allow only beside that record. A sealed store's
erase also destroys the data key (doomed first, destroyed after the
commit; `sealing.sweep` ends one a crash left doomed). docs/sql.md, Erasure.
"""

from __future__ import annotations

import asyncio
import base64
import builtins
from collections.abc import Iterator
from contextlib import closing
from functools import partial
from typing import TYPE_CHECKING

from sqlalchemy import Connection, bindparam, delete, func, insert, select

from sessionstore.backends.checks import check_unchanged
from sessionstore.backends.keyed import dropped
from sessionstore.backends.records import erasure_of
from sessionstore.backends.sql import journalkeys, sealing, wordindex, wordkeys
from sessionstore.backends.sql import queries as Q
from sessionstore.backends.sql.database import Database, SessionRow, find_session, last_seq
from sessionstore.backends.sql.lineage import END, lineage, lines
from sessionstore.backends.sql.query import Query
from sessionstore.backends.sql.runner import Kind
from sessionstore.backends.sql.tables import activity, listing, spent_ticks, titles
from sessionstore.errors import CorruptSessionError, SessionConflictError
from sessionstore.models import Erasure

if TYPE_CHECKING:
    from sessionstore.encryption.sealer import Sealer

# What is kept beside a session's log (``pk``): its rows go before its own.
_DELETE_BESIDE = [
    Query(delete(table).where(table.c.session_pk == bindparam("pk")))
    for table in (titles, listing, activity)
]
# SQLite: the session's last tick, kept when no tick kept is greater, so
# that no later write takes it again (see `activity.NextTick`).
_SPEND_TICK = Query(
    insert(spent_ticks).from_select(
        ["tick"],
        select(listing.c.tick).where(
            listing.c.session_pk == bindparam("pk"),
            listing.c.tick
            > select(func.coalesce(func.max(spent_ticks.c.tick), 0)).scalar_subquery(),
        ),
    )
)


async def erase_sealed(
    database: Database, session_id: str, reason: str, digest: str | None
) -> Erasure:
    sealer = database.sealer
    assert sealer is not None
    # Checked before any key is doomed: the header opens as this session's
    # under the key the keyring keeps for it. A header moved from another
    # session (a raw writer) names that session's key, which a doom here
    # would let the next open destroy: such a session is erased as damaged.
    key_id = await database.transaction(
        Kind.READ, session_id, partial(sealing.session_key_id, session_id=session_id)
    )
    opens = partial(_opens, sealer=sealer, session_id=session_id)
    own = await database.transaction(Kind.READ, session_id, opens)
    if own:
        await asyncio.to_thread(sealer.keyring.doom, key_id)
    rekeyed: list[bytes] = []  # the bucket's old word key, doomed by the transaction
    body = partial(
        erase_session,
        session_id=session_id,
        reason=reason,
        digest=digest,
        sealer=sealer,
        sealed=key_id if own else None,
        rekeyed=rekeyed,
    )
    try:
        record = await database.erase(session_id, body)
    except CorruptSessionError:  # a row does not open: erased as it is stored
        rekeyed.clear()
        record = await database.erase(session_id, partial(body, damaged=True))
    if own:
        await asyncio.to_thread(sealer.destroy, key_id)
    if rekeyed:
        await asyncio.to_thread(sealer.destroy, rekeyed[-1])
    return record


def _opens(conn: Connection, *, sealer: Sealer, session_id: str) -> bool:
    try:
        sealing.session_key_id(conn, session_id=session_id, sealer=sealer)
    except CorruptSessionError:
        return False
    return True


async def erase_journal_of(database: Database, name: str, reason: str) -> Erasure | None:
    sealer = database.sealer
    found = (
        None if sealer is None else await asyncio.to_thread(sealer.keyring.find, "journal", name)
    )
    if sealer is not None and found is not None:
        await asyncio.to_thread(sealer.keyring.doom, found.key_id)
    key_id = None if found is None else found.key_id
    record = await database.erase(
        name, partial(erase_journal, name=name, reason=reason, sealer=sealer, sealed=key_id)
    )
    if sealer is not None and found is not None:
        await asyncio.to_thread(sealer.destroy, found.key_id)
    return record


def erase_session(
    conn: Connection,
    *,
    session_id: str,
    reason: str,
    digest: str | None = None,
    sealer: Sealer | None = None,
    sealed: bytes | None = None,
    damaged: bool = False,
    rekeyed: builtins.list[bytes] | None = None,
) -> Erasure:
    """Erase ``session_id`` whole and record it.

    Args:
        sealed: a sealed session's data key id (doomed by `erase_sealed`),
            which its header must still name; None when it does not open.
        damaged: its rows do not all open: digest them as stored.
        rekeyed: gets the id of the word key its bucket's re-key doomed
            (`wordkeys.rekey`), for the caller to destroy after the commit.
    """
    row = find_session(conn, session_id, lock="erase")
    forks = [fork for (fork,) in Q.FORKS_OF.all(conn, pk=row.pk)]
    if forks:
        raise SessionConflictError(
            session_id, f"forks share its entries: {', '.join(forks)}; erase them first"
        )
    if sealed is not None and sealing.key_id_of(row.header) != sealed:
        raise SessionConflictError(session_id, "it was erased and created again: erase it again")
    blocks = (_stored_bytes if damaged else _session_bytes)(conn, session_id, row, sealer)
    record = erasure_of("session", session_id, reason, blocks, last_seq(conn, row))
    check_unchanged(record, digest)
    if sealed is not None:
        record = record.model_copy(update={"key": sealed.hex()})
    if rekeyed is None:
        rekeyed = []
    seq = _record(conn, record)
    if conn.dialect.name == "sqlite":
        _SPEND_TICK.many(conn, [{"pk": row.pk}])
    for rows in _DELETE_BESIDE:
        rows.many(conn, [{"pk": row.pk}])
    if sealer is None:
        with closing(Q.LINES.each(conn, pk=row.pk, after=row.base_seq or 0, end=END)) as own:
            lines = None if damaged else (line for _, line, *_ in own)
            wordindex.forget(conn, row.pk, lines)
    else:  # its rows go, and the rest of its bucket is moved under a new word key
        old = wordkeys.rekey(conn, sealer, row.pk)
        if old is not None:
            rekeyed.append(old)
    Q.DELETE_ENTRIES.many(conn, [{"pk": row.pk}])
    Q.DELETE_SESSION.many(conn, [{"pk": row.pk}])
    wordindex.lower_mark(conn)
    _done(conn, seq)
    return record


def erase_journal(
    conn: Connection,
    *,
    name: str,
    reason: str,
    sealer: Sealer | None = None,
    sealed: bytes | None = None,
) -> Erasure | None:
    """Erase the journal ``name`` whole, its history included, and record it;
    None when it holds no row. ``sealed``: its data key's id, if any."""
    if conn.dialect.name == "postgresql":
        Q.LOCK_JOURNAL.first(conn, name=name)
    if Q.JOURNAL_LAST_ROW.first(conn, name=name) is None:
        return None
    count = 0

    def blocks() -> Iterator[bytes]:
        nonlocal count
        for seq, line in Q.JOURNAL_HISTORY.each(conn, name=name):
            count += 1
            if sealer is not None:
                line = sealer.open("journal", name, seq, line, where="journal_lines")
            yield bytes(line) + b"\n"

    digested = erasure_of("journal", name, reason, blocks(), 0)
    update: dict[str, object] = {"lines": count}
    if sealed is not None:
        update["key"] = sealed.hex()
    record = digested.model_copy(update=update)
    seq = _record(conn, record)
    journalkeys.delete_journal(conn, name)
    Q.DELETE_JOURNAL.many(conn, [{"name": name}])
    _done(conn, seq)
    return record


def drop_journal_keys(
    conn: Connection,
    *,
    name: str,
    keys: builtins.list[str],
    reason: str,
    sealer: Sealer | None = None,
) -> Erasure | None:
    """Delete every line the journal holds under ``keys`` (before a clear too)
    and record it (``keys``: how many had lines); None when none has one.
    A sealed journal's data key stays: its other lines need it."""
    if conn.dialect.name == "postgresql":
        Q.LOCK_JOURNAL.first(conn, name=name)
    found = sorted(journalkeys.history_under(conn, name, keys, sealer), key=lambda row: row[1])
    if not found:
        return None
    named = sorted({key for key, _, _ in found})
    record = dropped(name, reason, [line for _, _, line in found], len(named))
    seq = _record(conn, record)
    journalkeys.forget_lines(conn, name, named, [seq for _, seq, _ in found], sealer)
    _done(conn, seq)
    return record


def erasures(conn: Connection) -> builtins.list[Erasure]:
    fields = ("kind", "name", "at", "reason", "lines", "digest", "key", "keys")
    return [Erasure(**dict(zip(fields, row, strict=True))) for row in Q.ERASURES.all(conn)]


def _session_bytes(
    conn: Connection, session_id: str, row: SessionRow, sealer: Sealer | None
) -> Iterator[bytes]:
    """The session's file as `raw_blocks` gives it, a line at a time."""
    yield sealing.open_header(sealer, session_id, row.header, "sessions").encode() + b"\n"
    spans = lineage(conn, session_id, row)
    rows = lines(conn, spans, 0, END)
    holder = sealing.holders(conn, session_id, spans) if sealer is not None else None
    try:
        for _, line in sealing.open_lines(sealer, holder, rows, "entries", as_bytes=True):
            yield bytes(line) + b"\n"
    finally:
        rows.close()


def _stored_bytes(
    conn: Connection, session_id: str, row: SessionRow, sealer: Sealer | None
) -> Iterator[bytes]:
    """A damaged session's own rows as stored, the base64 of each a line."""
    from sessionstore.encryption.cipher import Sealed, stored

    with closing(Q.LINES.each(conn, pk=row.pk, after=row.base_seq or 0, end=END)) as own:
        for value in (row.header, *(line for _, line in own)):
            try:
                data = stored(value)
            except Sealed:
                data = value.encode() if isinstance(value, str) else bytes(value)
            yield base64.b64encode(data) + b"\n"


def _record(conn: Connection, record: Erasure) -> int:
    """Insert the record; its ``seq``. On SQLite, named as the erasure under way."""
    seq: int = Q.INSERT_ERASURE.scalar(conn, **record.model_dump())
    if conn.dialect.name == "sqlite":
        Q.INSERT_ERASING.many(conn, [{"erasure": seq}])
    return seq


def _done(conn: Connection, seq: int) -> None:
    """SQLite: the erasure is no longer under way (the triggers let it go only
    once all it names is gone, and never let it be named again: 0007)."""
    if conn.dialect.name == "sqlite":
        Q.CLOSE_ERASING.many(conn, [{"erasure": seq}])
