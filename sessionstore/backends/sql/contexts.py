"""The SQL store's `load_context`: read from the last compaction, then kept.

A context is built from the last compaction on: the compaction and the
messages it keeps are read through indexes, so the cost does not grow
with the history before the cut. An agent asks for its context every turn,
after adding a message or two: the store keeps the contexts it built
(the last `KEPT_SESSIONS` of them, `KEPT_MESSAGES` messages in all), and the
next call reads only the session's last ``seq`` and, when it grew, the
entries after the one the context was built to. The log only grows and
``seq`` has no gaps, so that is exact: new messages extend the context; a
new compaction, or a new message carrying the id a compaction keeps from
when no message had it before, means building it again. That next call,
when at most `QUICK_ROWS` entries are new, is a quick read: on SQLite it
runs on the event loop, sparing the hop to a thread (see `ThreadRunner`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection

from sessionstore.backends._common import decode_stored_entries
from sessionstore.backends.sql import queries as Q
from sessionstore.context import summary_message
from sessionstore.errors import CorruptSessionError
from sessionstore.models import CompactionEntry, Message, MessageEntry

if TYPE_CHECKING:
    from sessionstore.backends.sql.store import SqlStore

__all__ = ["Contexts"]

QUICK_ROWS = 16
"""New entries a kept context may read on the event loop (`Runner.run`'s ``quick``)."""

KEPT_SESSIONS = 256
KEPT_MESSAGES = 20_000  # a few megabytes of messages at most, besides the callers' own


@dataclass(frozen=True)
class _Built:
    """A context as built up to ``last``."""

    pk: int
    last: int
    messages: tuple[Message, ...]
    waiting_for: str | None  # the kept id no message had yet: one arriving changes the cut


@dataclass(frozen=True)
class _Read:
    """What one transaction read: all that is needed, or what is new."""

    pk: int
    last: int
    new_rows: list[Any] | None = None  # (seq, entry_id, line, type) after the built context
    marker: Any = None  # the last compaction's (seq, line, first_kept_id)
    rows: list[Any] | None = None  # (seq, entry_id, line): the messages the context holds


class Contexts:
    """Builds and keeps the contexts of one `SqlStore`."""

    def __init__(self, store: SqlStore) -> None:
        self._store = store
        self._built: OrderedDict[str, _Built] = OrderedDict()
        self._messages = 0  # in the kept contexts

    async def load(self, session_id: str) -> list[Message]:
        built = self._built.get(session_id)
        transaction = self._store._transaction
        read = None
        if built is not None:  # most turns: nothing or a few messages new
            probe = partial(self._read, session_id=session_id, built=built, most=QUICK_ROWS)
            read = await transaction(session_id, probe, quick=True)
        if read is None:
            read = await transaction(
                session_id, partial(self._read, session_id=session_id, built=built), lean=True
            )
            assert read is not None
        if built is not None and read.rows is None:
            if read.new_rows:
                messages = self._decode(session_id, read.new_rows)
                built = _Built(read.pk, read.last, built.messages + messages, built.waiting_for)
        else:
            built = self._build(session_id, read)
        self._keep(session_id, built)
        return list(built.messages)

    def _read(
        self, conn: Connection, *, session_id: str, built: _Built | None, most: int | None = None
    ) -> _Read | None:
        """What `load` needs, read in one transaction; with ``most``, no more
        than that many new entries (None when the context needs more)."""
        pk = self._store._find(conn, session_id)[0] if built is None else built.pk
        last = self._store._last_seq(conn, pk)
        if built is not None and last == built.last:
            return _Read(pk, last, new_rows=[])
        if built is not None and built.last < last <= built.last + (most or last):
            new = Q.ENTRIES_AFTER.all(conn, pk=pk, after=built.last, end=last)
            if all(kind == "message" and id_ != built.waiting_for for _, id_, _, kind in new):
                return _Read(pk, last, new_rows=new)
        if most is not None:
            return None
        marker = Q.LAST_COMPACTION.first(conn, pk=pk, end=last)
        if marker is None:
            return _Read(pk, last, rows=Q.MESSAGES.all(conn, pk=pk, end=last))
        seq, _, kept = marker
        rows = Q.KEPT_MESSAGES.all(conn, pk=pk, kept=kept, after=seq + 1, end=last)
        return _Read(pk, last, marker=marker, rows=rows)

    def _build(self, session_id: str, read: _Read) -> _Built:
        assert read.rows is not None
        messages = self._decode(session_id, read.rows)
        if read.marker is None:
            return _Built(read.pk, read.last, messages, None)
        seq, line, kept = read.marker
        compaction = decode_stored_entries(session_id, [(seq, line)], path=self._where)[0]
        if not isinstance(compaction, CompactionEntry):
            raise CorruptSessionError(
                session_id,
                "row typed 'compaction' holds another entry",
                path=self._where,
                line=seq + 1,
            )
        found = bool(read.rows) and read.rows[0][1] == kept
        return _Built(
            read.pk, read.last, (summary_message(compaction), *messages), None if found else kept
        )

    def _decode(self, session_id: str, rows: Sequence[Any]) -> tuple[Message, ...]:
        entries = decode_stored_entries(
            session_id, [(row[0], row[2]) for row in rows], path=self._where
        )
        return tuple(e.message for e in entries if isinstance(e, MessageEntry))

    def _keep(self, session_id: str, built: _Built) -> None:
        held = self._built.get(session_id)
        if held is not None and held.last > built.last:
            return  # a newer one was kept meanwhile
        if held is not None:
            self._messages -= len(self._built.pop(session_id).messages)
        if len(built.messages) > KEPT_MESSAGES:
            return
        self._built[session_id] = built
        self._messages += len(built.messages)
        while len(self._built) > KEPT_SESSIONS or self._messages > KEPT_MESSAGES:
            self._messages -= len(self._built.popitem(last=False)[1].messages)

    @property
    def _where(self) -> str:
        return f"{self._store._where} entries"
