"""The SQL store's `load_context`: read from the last compaction, then kept.

A context is built from the last compaction on, through indexes, and
cached with the last ``seq`` it read; the next call reads what was appended
since (``seq`` has no gaps). A cached context names its session by key,
which only an erasure can take from the id, so it also notes the newest
erasure (`Stamp`), checked in the same statement: anything erased since,
it is built again. docs/sql.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, NamedTuple

from sqlalchemy import Connection

from sessionstore.backends.contexts import BuiltContext, ContextCache
from sessionstore.backends.records import decode_stored_entries
from sessionstore.backends.sql import queries as Q
from sessionstore.backends.sql import sealing
from sessionstore.backends.sql.database import Database, find_session
from sessionstore.backends.sql.lineage import Lineage, lineage
from sessionstore.backends.sql.query import Query
from sessionstore.backends.sql.runner import Kind
from sessionstore.context import moves_start
from sessionstore.errors import CorruptSessionError, SessionNotFoundError
from sessionstore.models import CompactionEntry, SessionEntry

DECODED_ON_THE_LOOP = 256
"""Most rows a context decodes on the event loop: more (a first call on a
long session, many rows appended by another process) are decoded in the
transaction's thread, which the loop's thread takes turns with (the GIL
hands over every few milliseconds), instead of in one long step."""


class Stamp(NamedTuple):
    """What a context was built from: its session's spans, and the newest erasure then."""

    spans: Lineage
    erased: int


_Built = BuiltContext[Stamp]


@dataclass(frozen=True)
class _Read:
    """What one transaction read: all that is needed, or what is new."""

    stamp: Stamp
    last: int
    new_rows: list[Any] | None = None  # (seq, entry_id, line, type) after the built context
    marker: Any = None  # the last compaction's (seq, line, first_kept_id, entry_id)
    rows: list[Any] | None = None  # (seq, entry_id, line): the messages the context holds
    last_id: str = ""  # the id of entry ``last`` ("" for none), when built afresh
    holder: Callable[[int], str] | None = None  # in a sealed store (`sealing.holders`)


class Contexts:
    """Builds the contexts of one database's sessions, and caches them."""

    def __init__(self, database: Database) -> None:
        self._database = database
        self.cache: ContextCache[Stamp] = ContextCache()

    async def load(self, session_id: str) -> _Built:
        built = self.cache.get(session_id)
        body = partial(self._read_built, session_id=session_id, built=built)
        try:
            read, made = await self._database.transaction(Kind.READ, session_id, body)
        except SessionNotFoundError:
            self.cache.discard(session_id)  # erased by another store object
            raise
        built = self._made(session_id, read, built) if made is None else made
        self.cache.put(session_id, built)
        return built

    def _read_built(
        self, conn: Connection, *, session_id: str, built: _Built | None
    ) -> tuple[_Read, _Built | None]:
        """`_read`, and the context made of it when it has many rows to decode."""
        read = self._read(conn, session_id=session_id, built=built)
        rows = read.rows if read.new_rows is None else read.new_rows
        if rows is not None and len(rows) > DECODED_ON_THE_LOOP:
            return read, self._made(session_id, read, built)
        return read, None

    def _made(self, session_id: str, read: _Read, built: _Built | None) -> _Built:
        """The context of what ``read`` read: built afresh, or ``built`` extended."""
        if read.new_rows is None:
            return self._build(session_id, read)
        # rows that leave the cut where it is (`_read` checked their columns)
        assert built is not None
        new = self._entries(session_id, read.new_rows, read.holder)
        extended = built.extended(read.last, new)
        if extended is None:
            raise CorruptSessionError(
                session_id,
                "an entry's line disagrees with its row's type or id",
                path=self._where,
            )
        return extended

    def _read(self, conn: Connection, *, session_id: str, built: _Built | None) -> _Read:
        """The new rows of ``built``, or those of a context built afresh."""
        if built is not None:
            stamp = built.stamp
            erased, last = Q.CONTEXT_PROBE.first(conn, pk=stamp.spans.pk)
            if erased != stamp.erased:  # its key may name another session now
                built = None
        if built is None:
            erased = int(Q.ERASURE_MARK.scalar(conn))  # first: a later erasure shows
            stamp = Stamp(lineage(conn, session_id, find_session(conn, session_id)), erased)
            last = Q.LAST_SEQ.scalar(conn, pk=stamp.spans.pk)
        spans = stamp.spans
        # A fork's own rows start past what it shares, so its last seq is theirs.
        last = int(last) or spans.shared
        if built is not None and last == built.extent:
            return _Read(stamp, last, new_rows=[])
        holder = None
        if self._database.sealer is not None:
            holder = sealing.holders(conn, session_id, spans)
        if built is not None and built.extent < last:
            new = _each(conn, Q.ENTRIES_AFTER, spans, built.extent, last)
            cut = built.waiting_for
            if not any(moves_start(kind, id_, cut) for _, id_, _, kind in new):
                return _Read(stamp, last, new_rows=new, holder=holder)
        # Built afresh: a first call, or rows that move the cut.
        marker = next(
            filter(None, (Q.LAST_COMPACTION.first(conn, **s) for s in _spans(spans, 0, last, -1))),
            None,
        )
        if marker is None:
            rows = _each(conn, Q.MESSAGES, spans, 0, last)
            last_id = _last_id(conn, session_id, spans, last, rows)
            return _Read(stamp, last, rows=rows, last_id=last_id, holder=holder)
        seq, _, kept, _ = marker
        if len(spans.spans) == 1:
            bounds = {"pk": spans.pk, "kept": kept, "after": seq + 1, "end": last}
            rows = Q.KEPT_MESSAGES.all(conn, **bounds)
        else:
            found = (
                Q.FIRST_MESSAGE_WITH_ID.scalar(conn, id=kept, **s) for s in _spans(spans, 0, last)
            )
            start = next((first for first in found if first is not None), seq + 1)
            rows = _each(conn, Q.MESSAGES, spans, start - 1, last)
        last_id = _last_id(conn, session_id, spans, last, rows, marker)
        return _Read(stamp, last, marker=marker, rows=rows, last_id=last_id, holder=holder)

    def _build(self, session_id: str, read: _Read) -> _Built:
        assert read.rows is not None
        entries = self._entries(session_id, read.rows, read.holder)
        if read.marker is not None:
            seq, line, _, _ = read.marker
            marked = self._opened(read.holder, [(seq, line)])
            compaction = decode_stored_entries(session_id, marked, path=self._where)[0]
            if not isinstance(compaction, CompactionEntry):
                raise CorruptSessionError(
                    session_id,
                    "row typed 'compaction' holds another entry",
                    path=self._where,
                    line=seq + 1,
                )
            entries.insert(0, compaction)
        return _Built.of(read.stamp, read.last, entries, read.last_id)

    def _entries(
        self, session_id: str, rows: Sequence[Any], holder: Callable[[int], str] | None
    ) -> list[SessionEntry]:
        lines = self._opened(holder, [(row[0], row[2]) for row in rows])
        return decode_stored_entries(session_id, lines, path=self._where)

    def _opened(self, holder: Callable[[int], str] | None, rows: list[Any]) -> list[Any]:
        sealer = self._database.sealer
        if sealer is None or holder is None:
            return rows
        return list(sealing.open_lines(sealer, holder, rows, self._where, as_bytes=True))

    @property
    def _where(self) -> str:
        return self._database.entries_at


def _spans(spans: Lineage, after: int, end: int, step: int = 1) -> list[dict[str, int]]:
    """The bounds of each span of ``after < seq <= end``, as query parameters."""
    return [{"pk": pk, "after": low, "end": high} for pk, low, high in spans.within(after, end)][
        ::step
    ]


def _last_id(
    conn: Connection,
    session_id: str,
    spans: Lineage,
    last: int,
    rows: list[Any],
    marker: Any = None,
) -> str:
    """The id of entry ``last``: of a row read, else looked up."""
    if last == 0:
        return ""
    if rows and rows[-1][0] == last:
        return str(rows[-1][1])
    if marker is not None and marker[0] == last:
        return str(marker[3])
    found = Q.ENTRY_ID_AT.first(conn, pk=spans.holder(last), seq=last)
    if found is None:  # a row deleted behind the store's back
        raise CorruptSessionError(session_id, f"entry {last} is missing")
    return str(found[0])


def _each(conn: Connection, query: Query, spans: Lineage, after: int, end: int) -> list[Any]:
    return [row for bounds in _spans(spans, after, end) for row in query.all(conn, **bounds)]
