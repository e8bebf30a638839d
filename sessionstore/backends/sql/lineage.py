"""Where a session's entries live: its own rows, and those a fork shares.

A fork made by `SqlStore.fork` stores no copy of the history it branched
from. Its ``sessions`` row names a base (``base_pk``) and how many entries
it shares (``base_seq``): its entries ``seq`` 1..``base_seq`` are the
base's, and its own rows start at ``base_seq + 1``. The base is always the
session that holds entry ``base_seq`` as its own row, so following the
bases up gives a chain of spans, each a run of ``seq`` held by one session,
that together are the fork's whole history in order. A read runs its query
once per span, the oldest first; a session that is no fork has one span.

Nothing here changes once written (bases are set when a session is created,
and rows are never rewritten), so a `Lineage` read once stays true.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

from sqlalchemy import Connection

from sessionstore.backends.sql import queries as Q
from sessionstore.backends.sql.database import SessionRow, find_session, insert_session, last_seq
from sessionstore.errors import CorruptSessionError, EntryNotFoundError
from sessionstore.models import SessionMeta

__all__ = ["END", "Lineage", "Span", "branch", "lineage"]

END = 2**62
"""A ``seq`` past every entry: the end of a session's own span."""


class Span(NamedTuple):
    """A run of ``seq`` held by one session: ``after < seq <= end`` of ``pk``."""

    pk: int
    after: int
    end: int


@dataclass(frozen=True)
class Lineage:
    """The spans of a session's history, oldest first; the last is its own.

    Attributes:
        pk: the session's key.
        shared: how many entries it shares with its base (0 when none).
        spans: every span, oldest first.
    """

    pk: int
    shared: int
    spans: tuple[Span, ...]

    def within(self, after: int, end: int) -> Iterator[Span]:
        """The spans clipped to ``after < seq <= end``, oldest first, empty ones left out."""
        for span in self.spans:
            low, high = max(span.after, after), min(span.end, end)
            if low < high:
                yield Span(span.pk, low, high)

    def holder(self, seq: int) -> int:
        """The key of the session holding entry ``seq`` (at least 1) as its own row."""
        return next(span.pk for span in self.spans if span.after < seq <= span.end)


def lineage(conn: Connection, session_id: str, row: SessionRow) -> Lineage:
    """The spans of a session's history (one query, only for a fork).

    Raises:
        CorruptSessionError: the chain of bases is broken (a row written
            behind the store's back).
    """
    if row.base_pk is None:
        return Lineage(row.pk, 0, (Span(row.pk, 0, END),))
    bases = {
        pk: (base_pk, base_seq) for pk, base_pk, base_seq in Q.ANCESTRY.all(conn, pk=row.base_pk)
    }
    spans = [Span(row.pk, row.base_seq or 0, END)]
    pk, end = row.base_pk, row.base_seq or 0
    while pk is not None:
        if pk not in bases or len(spans) > len(bases):
            raise CorruptSessionError(
                session_id, f"its chain of bases is broken at session key {pk}"
            )
        base_pk, base_seq = bases[pk]
        after = base_seq or 0
        if not after < end or (base_pk is not None and after == 0):
            what = f"session key {pk} cannot hold entries {after + 1}..{end} as its own"
            raise CorruptSessionError(session_id, f"its chain of bases is broken: {what}")
        spans.append(Span(pk, after, end))
        pk, end = base_pk, after
    return Lineage(row.pk, row.base_seq or 0, tuple(reversed(spans)))


def branch(
    conn: Connection, *, source_id: str, at: str | None, meta: SessionMeta, header: str
) -> int:
    """Insert the fork ``meta`` of ``source_id`` sharing its entries up to the
    first whose id is ``at`` (all when None): a row, whatever the length.

    The base recorded is the session holding the last shared entry as its
    own row, so a fork of a fork branching inside what it inherited points
    past it, and no chain of bases grows longer than needed.

    Returns:
        The fork's key.

    Raises:
        SessionNotFoundError: no session ``source_id``.
        EntryNotFoundError: it holds no entry ``at``.
        DuplicateSessionError: ``meta.id`` exists.
    """
    # Locked: an erase of the source waits for the fork, or the fork for the
    # erase and then finds no source (PostgreSQL; SQLite has one writer).
    row = find_session(conn, source_id, lock=True)
    spans = lineage(conn, source_id, row)
    point = last_seq(conn, row)
    if at is not None:
        found = (
            Q.FIRST_ENTRY_WITH_ID.scalar(conn, pk=pk, after=after, end=end, id=at)
            for pk, after, end in spans.within(0, point)
        )
        point = next((seq for seq in found if seq is not None), 0)
        if point == 0:
            raise EntryNotFoundError(source_id, at)
    if point == 0:
        return insert_session(conn, meta, header)
    holder = spans.holder(point)
    digest = Q.ENTRY_DIGEST.first(conn, pk=holder, seq=point)
    if digest is None or digest[0] is None:
        raise CorruptSessionError(source_id, f"entry {point} has no digest to chain from")
    return insert_session(conn, meta, header, base=(holder, point, bytes(digest[0])))
