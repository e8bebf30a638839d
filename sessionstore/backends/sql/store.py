"""`SqlStore`: sessions in SQLite (WAL) or PostgreSQL; docs/sql.md says how.

Every record is kept as its line, verbatim; entries carry ``seq`` 1, 2, 3...
without gaps within their session, assigned in the write that inserts them.
"""

from __future__ import annotations

import asyncio
import builtins
import dataclasses
import os
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Sequence
from functools import partial
from operator import itemgetter
from types import EllipsisType
from typing import TYPE_CHECKING, Any, Literal

from sqlalchemy import Connection, select

from sessionstore.backends.base import StoreBase
from sessionstore.backends.checks import (
    Durability,
    JournalDurability,
    check_expectations,
    check_journal_durability,
    check_slice,
)
from sessionstore.backends.contexts import BuiltContext
from sessionstore.backends.cursors import Cursor
from sessionstore.backends.records import (
    decode_stored_entries,
    decode_stored_meta,
    entry_lines,
    header_line,
    imported_entry,
    imported_header,
)
from sessionstore.backends.sql import (
    activity,
    browse,
    erase,
    heads,
    journalkeys,
    sealing,
    search,
    slices,
    survey,
    titles,
    wordindex,
)
from sessionstore.backends.sql import queries as Q
from sessionstore.backends.sql.contexts import Contexts, Stamp
from sessionstore.backends.sql.database import (
    Database,
    find_session,
    last_seq,
)
from sessionstore.backends.sql.digests import entry_digest
from sessionstore.backends.sql.engine import DEFAULT_BUSY_TIMEOUT, is_sqlite
from sessionstore.backends.sql.group import (
    GroupCommit,
    entry_row,
    expect_import,
    imported_session,
    new_session,
)
from sessionstore.backends.sql.journal import SqlJournal
from sessionstore.backends.sql.journalkeys import KeyOrders
from sessionstore.backends.sql.lineage import BYTES, END, FIRST, ROWS, Lineage, lineage, next_rows
from sessionstore.backends.sql.lineage import lines as history_lines
from sessionstore.backends.sql.lineage import page as history_page
from sessionstore.backends.sql.listing import Listing
from sessionstore.backends.sql.runner import Kind
from sessionstore.backends.sql.tables import journal_lines
from sessionstore.effects import EFFECTS_SUFFIX
from sessionstore.errors import (
    CorruptSessionError,
    EncryptionKeyError,
    validate_session_id,
)
from sessionstore.models import (
    Erasure,
    HeadMove,
    SessionEntry,
    SessionMeta,
    TitleChange,
)
from sessionstore.store import Capability, EntrySlice, Order, SearchHit, SessionSummary

if TYPE_CHECKING:
    from sessionstore.encryption.archive import ArchiveSealer
    from sessionstore.encryption.keyring import Keyring, WrappedKey
    from sessionstore.encryption.keys import Key
    from sessionstore.encryption.sealer import DataKey, Sealer


class SqlStore(StoreBase):
    """Sessions in a SQL database; open one with `SqlStore.open` or
    `open_store("sqlite:///path.db")`."""

    capabilities = frozenset(Capability)  # every one

    def __init__(self, database: Database) -> None:
        self._database = database
        self._group = GroupCommit(database)
        self._contexts = Contexts(database)
        self._listing = Listing(database)
        self._key_orders = KeyOrders()

    def __repr__(self) -> str:
        return f"SqlStore({self._database.where!r})"

    @classmethod
    async def open(
        cls,
        target: str,
        *,
        durability: Durability = "normal",
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
        keys: Key | Iterable[Key] | None = None,
        keyring: Keyring | str | os.PathLike[str] | None = None,
    ) -> SqlStore:
        """Open the store in a database, creating its schema when it is empty.

        Args:
            target: ``sqlite:///path.db``, ``sqlite+aiosqlite:///path.db``, a
                path ending in ``.db``, ``.sqlite`` or ``.sqlite3``, or
                ``postgresql://...`` (with the ``postgres`` extra).
            durability: ``"normal"`` (a committed append survives a process
                crash) or ``"full"`` (it survives a power loss).
            busy_timeout: seconds a writer waits for another process's lock.
            keys: encryption at rest (docs/encryption.md): a master key, or a
                list, the newest first. A store first opened with keys is
                sealed for good; one opened without them stays plain.
            keyring: where a sealed store's data keys are kept: a file, a
                database URL, or a `Keyring` (by default, for SQLite, the file
                ``<database>.keys`` beside it; PostgreSQL needs one named).

        Raises:
            ConfigurationError: the target or an option is not valid.
            EncryptionKeyError: keys missing, wrong, or given to a plain store.
            SchemaOutdatedError: the schema is older; migrate it first.
            SchemaTooNewError: the schema comes from a newer sessionstore.
            StorageError: the database cannot be opened.
        """
        database = await Database.open(target, durability=durability, busy_timeout=busy_timeout)
        try:
            database.sealer = await sealing.start(database, keys, keyring)
            if database.sealer is not None:  # its journals a migration could not index
                await journalkeys.index_unindexed(database)
        except BaseException:
            await database.close()
            raise
        return cls(database)

    @property
    def database(self) -> Database:
        """The database the store runs on (for tools: its runner, its name)."""
        return self._database

    @property
    def encrypted(self) -> bool:
        """Whether the store is sealed by encryption at rest (docs/encryption.md)."""
        return self._database.sealer is not None

    async def rotate_keys(self) -> int:
        """Rewrap every data key of a sealed store under the first of the keys
        it was opened with (``keys=[new, old]``); how many were rewrapped.
        Stopped anywhere, the store opens with both keys; once it returns,
        with the new alone (docs/encryption.md).

        Raises:
            EncryptionKeyError: the store is not sealed, the keys are not
                newest first (the first was retired by an earlier rotation,
                the current key is not given, or the new key is listed after
                it), or a data key is wrapped by a master key not given.
        """
        sealer = self._sealer("no key to rotate")
        return await asyncio.to_thread(sealer.rotate)

    async def keyring_report(self) -> dict[str, int]:
        """How many data keys each master key (by fingerprint) wraps, and
        ``"doomed"``, how many an erase is destroying; empty for a plain store."""
        sealer = self._database.sealer
        if sealer is None:
            return {}
        report: dict[str, int] = {}
        for key in await asyncio.to_thread(sealer.keyring.all_keys):
            report[key.master] = report.get(key.master, 0) + 1
            if key.doomed:
                report["doomed"] = report.get("doomed", 0) + 1
        return report

    def archive_sealer(self) -> ArchiveSealer:
        """What seals an encrypted archive of this sealed store, and opens one.

        Raises:
            EncryptionKeyError: the store is not sealed.
        """
        from sessionstore.encryption.archive import ArchiveSealer

        sealer = self._sealer("it has no keys")
        return ArchiveSealer(sealer.keys, sealer.keyring.get)

    async def data_key(
        self, scope: Literal["session", "journal"], name: str, *, create: bool = False
    ) -> WrappedKey | None:
        """The wrapped data key sealing a session's rows (or a journal's new
        lines); None for a journal that sealed nothing yet, unless ``create``.

        Raises:
            EncryptionKeyError: the store is not sealed.
            SessionNotFoundError: no such session.
            CorruptSessionError: the keyring no longer holds the session's key.
        """
        sealer = self._sealer("it has no keys")
        if scope == "journal":
            if create:
                await asyncio.to_thread(sealer.journal_key, name)
            return await asyncio.to_thread(sealer.keyring.find, "journal", name)
        key_id = await self._database.transaction(
            Kind.READ, name, partial(sealing.session_key_id, session_id=name)
        )
        found = await asyncio.to_thread(sealer.keyring.get, key_id)
        if found is None:
            sealer.key(key_id, what=("header", name))  # raises, naming the session
        return found

    def _sealer(self, lacking: str) -> Sealer:
        if self._database.sealer is None:
            raise EncryptionKeyError(f"{self._database.where} is not encrypted: {lacking}")
        return self._database.sealer

    def drop_caches(self) -> None:
        super().drop_caches()
        self._contexts.cache.clear()
        self._listing.clear()
        self._key_orders.drop()

    async def close(self) -> None:
        self._closed = True
        await self._database.close()

    def journal(self, name: str, *, durability: JournalDurability = "full") -> SqlJournal:
        check_journal_durability(durability)
        validate_session_id(name)
        self._check_open(name)
        return SqlJournal(self._database, name, self._key_orders, synced=durability == "full")

    async def journals(self) -> builtins.list[str]:
        self._check_open()

        def body(conn: Connection) -> builtins.list[str]:
            query = select(journal_lines.c.journal).distinct().order_by(journal_lines.c.journal)
            names = (name.removesuffix(EFFECTS_SUFFIX) for name in conn.execute(query).scalars())
            return builtins.list(dict.fromkeys(names))  # one holding only effects too

        return await self._database.transaction(Kind.READ, None, body)

    # ------------------------------------------------------------ the contract

    async def create(self, meta: SessionMeta) -> str:
        line = header_line(meta)
        self._check_open(meta.id)
        sealer = self._database.sealer
        insert = partial(new_session, meta=meta, header=line, sealer=sealer)
        await self._database.transaction(Kind.WRITE, meta.id, insert)
        return meta.id

    async def append_many(
        self,
        session_id: str,
        new: Sequence[SessionEntry],
        *,
        expect_last: str | None = None,
        expect_head: str | None = None,
    ) -> None:
        check_expectations(expect_last, expect_head, session_id=session_id)
        self._check(session_id)
        rows = [
            entry_row(entry, line)
            for entry, line in zip(new, entry_lines(session_id, new), strict=True)
        ]
        await self._group.submit((session_id, rows, expect_last, expect_head))

    def _locations(self, session_id: str) -> tuple[str, str]:
        return self._database.headers_at, self._database.entries_at

    async def _pages(self, session_id: str, *, raw: bool) -> AsyncIterator[builtins.list[Any]]:
        """The header line, then the entry lines in pages (UTF-8 bytes when ``raw``)."""
        self._check(session_id)

        sealer = self._database.sealer
        where = self._database.entries_at

        def start(conn: Connection) -> tuple[str, Lineage, int, Callable[[int], str] | None]:
            row = find_session(conn, session_id)
            spans = lineage(conn, session_id, row)
            header = sealing.open_header(sealer, session_id, row.header, self._database.headers_at)
            holder = sealing.holders(conn, session_id, spans) if sealer else None
            return header, spans, last_seq(conn, row), holder

        transaction = self._database.transaction
        header, spans, end, holder = await transaction(Kind.READ, session_id, start)
        yield [header]
        size, done = FIRST, 0
        while done < end:
            # Pages in their own short transactions: the log only grows, so
            # seq order makes them one consistent prefix of the session. A
            # page is one statement, however many spans of a fork it covers.
            read = partial(history_page, spans=spans, after=done, end=end, size=size, as_bytes=raw)
            rows = await transaction(Kind.READ, session_id, read)
            if not rows:  # seq said more rows exist: erased meanwhile, or corrupt
                # An erase since the first page: not found, as it is now.
                await transaction(
                    Kind.READ, session_id, partial(find_session, session_id=session_id)
                )
                reason = f"entry seq {done + 1} is missing (the last seq is {end})"
                raise CorruptSessionError(session_id, reason, path=where)
            done = rows[-1][0]
            opened = sealing.open_lines(sealer, holder, rows, where, as_bytes=raw)
            lines = builtins.list(map(itemgetter(1), opened))
            size = next_rows(len(lines), sum(map(len, lines)))
            yield lines

    async def raw_lines(self, session_id: str) -> AsyncIterator[str]:
        async for lines in self._pages(session_id, raw=False):
            for line in lines:
                yield line

    async def raw_blocks(self, session_id: str) -> AsyncIterator[bytes]:
        pages = self._pages(session_id, raw=True)
        async for (header,) in pages:
            yield header.encode() + b"\n"
            break
        async for lines in pages:
            lines.append(b"")  # for the last newline
            yield b"\n".join(lines)

    async def import_session(
        self, header: str, lines: AsyncIterable[str], *, after: int | None = None
    ) -> int:
        meta = imported_header(header)
        self._check(meta.id)
        sealer = self._database.sealer
        key: DataKey | None = None
        async with self._database.steps(meta.id) as step:
            if after is None:
                new = partial(imported_session, meta=meta, header=header, sealer=sealer)
                pk, digest, key = await step(new)
                count = 0
            else:
                pk, count, digest, key = await step(
                    partial(
                        expect_import, session_id=meta.id, header=header, count=after, sealer=sealer
                    )
                )
            batch: builtins.list[dict[str, Any]] = []
            held = 0  # characters of the batch's lines
            async for line in lines:
                count += 1
                row = entry_row(imported_entry(meta.id, count, line), line)
                if sealer is not None and key is not None:
                    sealed = sealer.seal_text(key, "entry", meta.id, count, line)
                    row = {**row, "line": sealed, wordindex.TEXT: line}
                digest = entry_digest(digest, row)
                batch.append({**row, "session_pk": pk, "seq": count, "digest": digest})
                held += len(line)
                if len(batch) == ROWS or held >= BYTES:
                    await step(partial(_insert, rows=batch[:], sealer=sealer))
                    batch.clear()
                    held = 0
            if batch:
                await step(partial(_insert, rows=batch, sealer=sealer))
            # Last: a listing's first page waits for this write (see `activity.mark`).
            if after is None:
                listed = sealing.listed_meta(sealer, meta)
                await step(partial(activity.listed, pk=pk, meta=listed))
            elif count > after:
                await step(partial(activity.touched, pks=[pk]))
        return count - (after or 0)

    async def _fork(self, source_id: str, at: str | None, meta: SessionMeta, header: str) -> None:
        sealer = self._database.sealer
        fork = partial(
            new_session, source_id=source_id, at=at, meta=meta, header=header, sealer=sealer
        )
        await self._database.transaction(Kind.WRITE, source_id, fork)

    async def _erase(self, session_id: str, reason: str, digest: str | None) -> Erasure:
        body = partial(erase.erase_session, session_id=session_id, reason=reason, digest=digest)
        try:
            if self._database.sealer is not None:
                return await erase.erase_sealed(self._database, session_id, reason, digest)
            return await self._database.erase(session_id, body)
        finally:  # even when the checkpoint after the commit failed
            self._contexts.cache.discard(session_id)
            self._listing.clear()

    async def erasures(self) -> builtins.list[Erasure]:
        self._check_open()
        return await self._database.transaction(Kind.READ, None, erase.erasures)

    async def _set_head(
        self,
        name: str,
        move: HeadMove,
        expect: str | EllipsisType | None,
        expect_last: str | None,
    ) -> None:
        body = partial(
            heads.move,
            name=name,
            to=move,
            expect=expect,
            expect_last=expect_last,
            sealer=self._database.sealer,
        )
        await self._database.transaction(Kind.WRITE, move.session_id, body)

    async def _import_head(self, name: str, moves: builtins.list[HeadMove], after: int) -> None:
        sealer = self._database.sealer
        body = partial(heads.extend, name=name, moves=moves, after=after, sealer=sealer)
        await self._database.transaction(Kind.WRITE, name, body)

    async def _head_history(self, name: str) -> builtins.list[HeadMove]:
        body = partial(heads.history, name=name, sealer=self._database.sealer)
        return await self._database.transaction(Kind.READ, name, body)

    async def head(self, name: str) -> str | None:
        validate_session_id(name)
        self._check_open(name)
        body = partial(heads.head, name=name, sealer=self._database.sealer)
        return await self._database.transaction(Kind.READ, name, body)

    async def heads(self) -> builtins.list[str]:
        self._check_open()
        return await self._database.transaction(Kind.READ, None, heads.names)

    async def seal_heads(self) -> int:
        """Seal every unsealed head position of a store sealed before
        migration 0010, trusting the heads as they stand; how many (0 when
        plain). Run it once after the upgrade (docs/encryption.md)."""
        self._check_open()
        sealer = self._database.sealer
        if sealer is None:
            return 0
        body = partial(heads.seal_all, sealer=sealer)
        return await self._database.transaction(Kind.WRITE, None, body)

    async def load(self, session_id: str) -> builtins.list[SessionEntry]:
        self._check(session_id)
        where = self._database.entries_at
        sealer = self._database.sealer

        def body(conn: Connection) -> builtins.list[SessionEntry]:
            # Decoded as the rows come, in the thread: the loop stays free,
            # and each row's line is dropped once decoded.
            row = find_session(conn, session_id)
            spans = lineage(conn, session_id, row)
            rows = history_lines(conn, spans, 0, END)
            try:
                if sealer is not None:
                    holder = sealing.holders(conn, session_id, spans)
                    opened = sealing.open_lines(sealer, holder, rows, where, as_bytes=True)
                    return decode_stored_entries(session_id, opened, path=where)
                return decode_stored_entries(session_id, rows, path=where)
            finally:
                rows.close()

        return await self._database.transaction(Kind.READ, session_id, body)

    async def load_slice(
        self,
        session_id: str,
        start: int = 0,
        stop: int | None = None,
        *,
        expect_head: str | None = None,
    ) -> EntrySlice:
        self._check(session_id)
        start, stop = check_slice(start, stop)
        check_expectations(None, expect_head, session_id=session_id)
        return await slices.load_slice(self._database, session_id, start, stop, expect_head)

    async def list(self) -> builtins.list[SessionMeta]:
        self._check_open()
        return await self._listing.list()

    async def _summaries(
        self, owner: str | None, order: Order, limit: int | None, after: str | None, kind: str
    ) -> builtins.list[SessionSummary]:
        transaction = self._database.transaction
        sealer = self._database.sealer
        if sealer is not None and owner is not None:
            owner = sealer.owner(owner)  # the listing holds owners' tokens
        begun = None if after is None else browse.start(after, kind, order)
        if begun is None and not is_sqlite(self._database.runner.url):
            # The mark's lock is held by a transaction of its own, not the page's.
            begun = await transaction(Kind.LOCKED_READ, None, activity.mark), ()
        body = partial(
            browse.page,
            owner=owner,
            order=order,
            limit=limit,
            begun=begun,
            where=self._database.headers_at,
            sealer=sealer,
        )
        mark, found = await transaction(Kind.LOCKED_READ, None, body)
        return [
            dataclasses.replace(summary, cursor=Cursor(kind, str(mark), key).encode())
            for summary, key in found
        ]

    async def _set_title(self, session_id: str, change: TitleChange) -> None:
        body = partial(titles.record, change=change, sealer=self._database.sealer)
        await self._database.transaction(Kind.WRITE, session_id, body)

    async def _titles(self, session_id: str) -> builtins.list[TitleChange]:
        body = partial(titles.changes, session_id=session_id, sealer=self._database.sealer)
        return await self._database.transaction(Kind.READ, session_id, body)

    async def _meta(self, session_id: str) -> SessionMeta:
        body = partial(find_session, session_id=session_id)
        row = await self._database.transaction(Kind.READ, session_id, body)
        where = self._database.headers_at
        header = sealing.open_header(self._database.sealer, session_id, row.header, where)
        return decode_stored_meta(session_id, header, path=where, line_no=1)

    async def _import_titles(
        self, session_id: str, changes: builtins.list[TitleChange], after: int
    ) -> int:
        body = partial(
            titles.extend,
            session_id=session_id,
            changes=changes,
            after=after,
            sealer=self._database.sealer,
        )
        return await self._database.transaction(Kind.WRITE, session_id, body)

    async def _search(
        self,
        wanted: builtins.list[str],
        owner: str | None,
        limit: int,
        start: tuple[float, str, int] | None,
        kind: str,
    ) -> builtins.list[SearchHit]:
        sealer = self._database.sealer
        body = partial(
            search.search,
            wanted=wanted,
            owner=owner,
            limit=limit,
            start=start,
            kind=kind,
            sealer=sealer,
        )
        if sealer is None:
            return await self._database.transaction(Kind.READ, None, body)
        # Sealed: the word keys an erase changed meanwhile, or destroyed,
        # have new ones at the next try; the last in one snapshot.
        for _ in range(2):
            try:
                return await self._database.transaction(Kind.READ, None, body)
            except search.StaleKeys:
                continue
        try:
            return await self._database.transaction(
                Kind.LOCKED_READ, None, partial(search.snapshot, body)
            )
        except search.StaleKeys as exc:
            raise EncryptionKeyError(str(exc)) from None

    async def integrity(self) -> builtins.list[str]:
        self._check_open()
        faults = partial(
            survey.faults, where=self._database.headers_at, sealer=self._database.sealer
        )
        return await self._database.transaction(Kind.LOCKED_READ, None, faults)

    async def _built_context(self, session_id: str) -> BuiltContext[Stamp]:
        return await self._contexts.load(session_id)


def _insert(conn: Connection, rows: builtins.list[dict[str, Any]], sealer: Sealer | None) -> None:
    """Imported rows, and the word index keeping up with them."""
    Q.INSERT_ENTRIES.many(conn, rows)
    if wordindex.keep_up(conn, rows, sealer):
        wordindex.catch_up(conn, sealer)
