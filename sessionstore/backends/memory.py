"""`MemoryStore`: the reference backend, kept in the memory of one process.

It enforces every rule the persistent backends do, and keeps each record as
the line they would store, decoded again on every load: what a caller gets
back never shares state with what is stored. Contexts are cached as the
other stores cache them (`ContextCache`), and shared from one call to the
next as theirs are.
"""

from __future__ import annotations

import asyncio
import bisect
import builtins
import threading
from collections.abc import AsyncIterable, AsyncIterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from types import EllipsisType
from typing import Any

from sessionstore.backends.base import StoreBase
from sessionstore.backends.checks import (
    JournalDurability,
    check_expectations,
    check_head,
    check_journal_durability,
    check_last,
    check_unchanged,
)
from sessionstore.backends.contexts import BuiltContext, ContextCache
from sessionstore.backends.cursors import Cursor
from sessionstore.backends.memory_journal import MemoryJournal, MemoryJournals, yielding
from sessionstore.backends.records import (
    current_title,
    decode_stored_entries,
    decode_stored_meta,
    entry_lines,
    erasure_of,
    fork_point,
    header_line,
    imported_entry,
    imported_header,
    lines_block,
)
from sessionstore.errors import (
    DuplicateSessionError,
    InvalidCursorError,
    SessionConflictError,
    SessionNotFoundError,
    validate_session_id,
)
from sessionstore.models import (
    CompactionEntry,
    Erasure,
    HeadMove,
    SessionEntry,
    SessionMeta,
    TitleChange,
)
from sessionstore.store import Capability, Order, SessionSummary
from sessionstore.timestamps import now_rfc3339
from sessionstore.wire.stored import read_stored_entry

__all__ = ["MemoryStore"]

DECODED_AT_ONCE = 256
"""Lines decoded between two turns of the event loop (about a millisecond):
a long session read whole keeps no other task waiting for all of it."""


async def _decoded(
    session_id: str, lines: Sequence[str], first: int = 1
) -> builtins.list[SessionEntry]:
    """``lines`` decoded (the first is entry number ``first``), in steps."""
    entries: builtins.list[SessionEntry] = []
    for start in range(0, len(lines), DECODED_AT_ONCE):
        if start:
            await asyncio.sleep(0)
        part = enumerate(lines[start : start + DECODED_AT_ONCE], first + start)
        entries += decode_stored_entries(session_id, part, path=None)
    return entries


@dataclass
class _Session:
    header: str
    lines: builtins.list[str] = field(default_factory=builtins.list)
    # The tick of each write; the first is its creation's, which no other
    # session object of the store has: what its cached context is stamped with.
    ticks: builtins.list[int] = field(default_factory=builtins.list)
    active_at: str = ""  # the time of the last write
    titles: builtins.list[TitleChange] = field(default_factory=builtins.list)
    # The position (from 1) of its first compaction: a summary reads no line
    # but the last, so a family of forks is summarised in a step a session.
    first_compaction: int | None = None

    def extend(self, entries: Sequence[SessionEntry], lines: Sequence[str]) -> None:
        if self.first_compaction is None:
            found = (
                number
                for number, entry in enumerate(entries, len(self.lines) + 1)
                if isinstance(entry, CompactionEntry)
            )
            self.first_compaction = next(found, None)
        self.lines.extend(lines)


@yielding
class MemoryStore(StoreBase):
    """A non-persistent store; see `SessionStore` for the contract."""

    capabilities = frozenset(Capability)  # every one

    def __init__(self) -> None:
        self._sessions: dict[str, _Session] = {}
        self._heads: dict[str, builtins.list[HeadMove]] = {}
        self._erasures: builtins.list[Erasure] = []
        self._journals = MemoryJournals(self._erasures)
        self._tick = 0  # counts writes to sessions: the order of last activity
        # A store object may be shared by threads, each running its own loop:
        # a conditional write checks and writes under this lock (never awaited).
        self._writing = threading.Lock()
        self._contexts: ContextCache[int] = ContextCache()

    def _touch(self, session: _Session) -> None:
        self._tick += 1
        session.ticks.append(self._tick)
        session.active_at = now_rfc3339()

    def __repr__(self) -> str:
        return f"MemoryStore(sessions={len(self._sessions)})"

    def _session(self, session_id: str) -> _Session:
        self._check(session_id)
        session = self._sessions.get(session_id)
        if session is None:
            raise SessionNotFoundError(session_id)
        return session

    async def create(self, meta: SessionMeta) -> str:
        line = header_line(meta)
        self._check_open(meta.id)
        if meta.id in self._sessions:
            raise DuplicateSessionError(meta.id)
        self._sessions[meta.id] = session = _Session(line)
        self._touch(session)
        return meta.id

    async def append_many(
        self,
        session_id: str,
        entries: Sequence[SessionEntry],
        *,
        expect_last: str | None = None,
        expect_head: str | None = None,
    ) -> None:
        check_expectations(expect_last, expect_head, session_id=session_id)
        self._check(session_id)
        lines = entry_lines(session_id, entries)
        # A second turn of the loop, between the encoding and the write: a
        # pass of the loop then runs half an append of each task waiting.
        # The session is looked up after it: it may be erased meanwhile.
        await asyncio.sleep(0)
        session = self._session(session_id)
        with self._writing:  # checked and written in one step, whatever thread calls
            if expect_last is not None:
                check_last(session_id, expect_last, self._last(session))
            if expect_head is not None:
                check_head(expect_head, session_id, self._head_now(expect_head), by="append")
            if lines:
                session.extend(entries, lines)
                self._touch(session)

    def _last(self, session: _Session) -> str:
        return read_stored_entry(session.lines[-1]).id if session.lines else ""

    def _head_now(self, name: str) -> str | None:
        moves = self._heads.get(name)
        return moves[-1].session_id if moves else None

    async def load(self, session_id: str) -> builtins.list[SessionEntry]:
        session = self._session(session_id)
        return await _decoded(session_id, session.lines[:])

    async def _built_context(self, session_id: str) -> BuiltContext[int]:
        # Only the lines appended since the cached context was built are
        # decoded (a session's lines only grow; an erased one is a new object).
        session = self._session(session_id)
        count, stamp = len(session.lines), session.ticks[0]
        built = self._contexts.get(session_id)
        if built is not None and built.stamp == stamp and built.extent <= count:
            new = await _decoded(session_id, session.lines[built.extent : count], built.extent + 1)
            built = built.extended(count, new)
        else:
            built = None
        if built is None:
            entries = await _decoded(session_id, session.lines[:count])
            built = BuiltContext.of(stamp, count, entries, entries[-1].id if entries else "")
        self._contexts.put(session_id, built)
        return built

    def drop_caches(self) -> None:
        """Forget the contexts built (and what the adapters keep)."""
        super().drop_caches()
        self._contexts.clear()

    async def list(self) -> builtins.list[SessionMeta]:
        self._check_open()
        return [
            decode_stored_meta(session_id, session.header, path=None, line_no=1)
            for session_id, session in self._sessions.items()
        ]

    async def raw_lines(self, session_id: str) -> AsyncIterator[str]:
        session = self._session(session_id)
        yield session.header
        for line in session.lines[: len(session.lines)]:
            yield line

    async def import_session(
        self, header: str, entries: AsyncIterable[str], *, after: int | None = None
    ) -> int:
        meta = imported_header(header)
        self._check(meta.id)
        lines: builtins.list[str] = []
        decoded: builtins.list[SessionEntry] = []
        async for line in entries:
            decoded.append(imported_entry(meta.id, (after or 0) + len(lines) + 1, line))
            lines.append(line)
        # Checked only now, with no await left before the change.
        session = self._sessions.get(meta.id)
        if after is None:
            if session is not None:
                raise DuplicateSessionError(meta.id)
            self._sessions[meta.id] = session = _Session(header)
        elif session is None:
            raise SessionNotFoundError(meta.id)
        elif session.header != header:
            raise SessionConflictError(meta.id, "the stored header line differs")
        elif len(session.lines) != after:
            raise SessionConflictError(meta.id, f"holds {len(session.lines)} entries, not {after}")
        if lines or after is None:
            session.extend(decoded, lines)
            self._touch(session)
        return len(lines)

    async def _fork(self, source_id: str, at: str | None, meta: SessionMeta, header: str) -> None:
        source = self._session(source_id)
        ids = (read_stored_entry(line).id for line in source.lines)
        count = fork_point(source_id, at, ids) if at is not None else len(source.lines)
        if meta.id in self._sessions:
            raise DuplicateSessionError(meta.id)
        self._sessions[meta.id] = fork = _Session(header, source.lines[:count])
        if source.first_compaction is not None and source.first_compaction <= count:
            fork.first_compaction = source.first_compaction
        self._touch(fork)

    async def _erase(self, session_id: str, reason: str, digest: str | None) -> Erasure:
        session = self._session(session_id)
        data = lines_block([session.header, *session.lines])
        record = erasure_of("session", session_id, reason, [data], len(session.lines))
        check_unchanged(record, digest)
        del self._sessions[session_id]  # forks hold their own copies of the lines
        self._contexts.discard(session_id)
        self._erasures.append(record)
        return record

    async def _summaries(
        self, owner: str | None, order: Order, limit: int | None, after: str | None, kind: str
    ) -> builtins.list[SessionSummary]:
        # Last activity: each write takes the next tick, and a listing stands
        # on the tick it started at (its mark): a session's key is its last
        # tick up to the mark, so one written to meanwhile keeps its place.
        mark = "" if order == "created" else str(self._tick)
        start: tuple[Any, ...] | None = None
        if after is not None:
            cursor = Cursor.decode(after, kind, length=2 if order == "created" else 1)
            mark, start = cursor.mark, cursor.key
            if order == "last_activity":
                if not (mark.isdigit() and cursor.key[0].isdigit()):
                    raise InvalidCursorError(f"not a cursor: {after!r}")
                start = (int(cursor.key[0]),)
        found: builtins.list[tuple[tuple[Any, ...], SessionMeta]] = []
        for session_id, session in self._sessions.items():
            meta = decode_stored_meta(session_id, session.header, path=None, line_no=1)
            if owner is not None and meta.owner != owner:
                continue
            if order == "created":
                key: tuple[Any, ...] = (meta.created_at, session_id)
            else:
                at = bisect.bisect_right(session.ticks, int(mark))
                if not at:  # created after the listing started
                    continue
                key = (session.ticks[at - 1],)
            if start is None or key < start:
                found.append((key, meta))
        found.sort(key=lambda item: item[0], reverse=True)
        result = []
        for key, meta in found[:limit]:
            session = self._sessions[meta.id]
            last = read_stored_entry(session.lines[-1]) if session.lines else None
            result.append(
                SessionSummary(
                    meta=meta,
                    entries=len(session.lines),
                    last_timestamp=None if last is None else last.timestamp,
                    compacted=session.first_compaction is not None,
                    title=current_title(meta, session.titles),
                    last_activity=session.active_at,
                    cursor=Cursor(kind, mark, tuple(str(part) for part in key)).encode(),
                )
            )
        return result

    async def _set_title(self, session_id: str, change: TitleChange) -> None:
        self._session(session_id).titles.append(change)

    async def _titles(self, session_id: str) -> builtins.list[TitleChange]:
        return builtins.list(self._session(session_id).titles)

    async def _import_titles(
        self, session_id: str, changes: builtins.list[TitleChange], after: int
    ) -> int:
        held = self._session(session_id).titles
        if len(held) != after:
            return 0
        held.extend(changes)
        return len(changes)

    async def erasures(self) -> builtins.list[Erasure]:
        self._check_open()
        return builtins.list(self._erasures)

    async def _set_head(
        self,
        name: str,
        move: HeadMove,
        expect: str | EllipsisType | None,
        expect_last: str | None,
    ) -> None:
        self._session(move.session_id)
        with self._writing:
            if expect_last is not None:
                assert isinstance(expect, str)
                check_last(expect, expect_last, self._last(self._session(expect)), by="move")
            check_head(name, expect, self._head_now(name))
            self._heads.setdefault(name, []).append(move)

    async def _import_head(self, name: str, moves: builtins.list[HeadMove], after: int) -> None:
        held = len(self._heads.get(name, ()))
        if held != after:
            raise SessionConflictError(name, f"holds {held} positions, not {after}", "head")
        if moves:  # a head is listed once set, never by an empty import
            self._heads.setdefault(name, []).extend(moves)

    async def _head_history(self, name: str) -> builtins.list[HeadMove]:
        return builtins.list(self._heads.get(name, ()))

    async def heads(self) -> builtins.list[str]:
        self._check_open()
        return builtins.list(self._heads)

    def journal(self, name: str, *, durability: JournalDurability = "full") -> MemoryJournal:
        """The journal called ``name`` (one per agent), kept in this store's
        memory: it ends with the process, whatever ``durability`` (checked,
        and what it raises, as `SessionStore.journal` says)."""
        check_journal_durability(durability)
        validate_session_id(name)
        self._check_open(name)
        return self._journals.journal(name, partial(self._check_open, name))

    async def journals(self) -> builtins.list[str]:
        self._check_open()
        return self._journals.names()  # a journal holding only effects too
