"""Where a session's entries live: its own rows, and those a fork shares.

A fork made by `SqlStore.fork` stores no copy of the history it branched
from. Its ``sessions`` row names a base (``base_pk``) and how many entries
it shares (``base_seq``): its entries ``seq`` 1..``base_seq`` are the
base's, and its own rows start at ``base_seq + 1``. The base is always the
session that holds entry ``base_seq`` as its own row, so following the
bases up gives a chain of spans, each a run of ``seq`` held by one session,
that together are the fork's whole history in order; a session that is no
fork has one span.

A fork of a fork of a fork ... has as many spans as forks above it, often
of an entry or two each, so its history is never read a statement per
span: `page` reads a page of the history in one statement, walking only
the spans the page overlaps (`SPAN_LINES`), and `lines` streams a long
span with one statement and reads each run of short ones with one more.
Reading a history costs statements in proportion to its pages, whatever
its depth.

Nothing here changes once written (bases are set when a session is created,
and rows are never rewritten), so a `Lineage` read once stays true.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from sqlalchemy import (
    BigInteger,
    Connection,
    and_,
    bindparam,
    case,
    cast,
    func,
    literal_column,
    select,
)

from sessionstore.backends.sql import paging
from sessionstore.backends.sql import queries as Q
from sessionstore.backends.sql.database import SessionRow, find_session, insert_session, last_seq
from sessionstore.backends.sql.query import Query, Utf8Bytes
from sessionstore.backends.sql.tables import entries, sessions
from sessionstore.errors import CorruptSessionError, EntryNotFoundError
from sessionstore.models import SessionMeta

__all__ = ["END", "SPAN_LINES", "Family", "Lineage", "Span", "branch", "lineage", "lines", "page"]

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
        names: the id of each base holding a span, by key (a sealed store
            opens a row as the session holding it sealed it).
    """

    pk: int
    shared: int
    spans: tuple[Span, ...]
    names: Mapping[int, str] = field(default_factory=dict)

    def within(self, after: int, end: int) -> Iterator[Span]:
        """The spans clipped to ``after < seq <= end``, oldest first, empty ones left out."""
        for span in self.spans:
            low, high = max(span.after, after), min(span.end, end)
            if low < high:
                yield Span(span.pk, low, high)

    def holder(self, seq: int) -> int:
        """The key of the session holding entry ``seq`` (at least 1) as its own row."""
        return next(span.pk for span in self.spans if span.after < seq <= span.end)


def _up(chain: Any) -> tuple[Any, Any, Any]:
    """The next step of a recursive walk down a chain of bases: the base's
    ``(pk, base_pk, base_seq)``, each found by its key. Correlated lookups,
    not a join: PostgreSQL would otherwise scan the sessions table at every
    step of a deep chain. A base was stored before its fork: the smaller key
    also ends any loop a row written behind the store's back could make; a
    base that is missing ends the walk."""
    base = sessions.alias("base")
    found = base.c.pk == chain.c.base_pk
    return (
        chain.c.base_pk,
        select(base.c.base_pk).where(found).scalar_subquery(),
        select(func.coalesce(base.c.base_seq, 0)).where(found).scalar_subquery(),
    )


def _continues(chain: Any) -> Any:
    base = sessions.alias("held")
    exists = select(base.c.pk).where(base.c.pk == chain.c.base_pk).exists()
    return and_(chain.c.base_pk < chain.c.pk, exists)


# The spans of a history overlapping ``after < seq <= end``, from the holder
# of ``end`` (``pk``) down its chain of bases while earlier rows are wanted.
_after = bindparam("after", type_=BigInteger)
_start = select(
    sessions.c.pk,
    sessions.c.base_pk,
    func.coalesce(sessions.c.base_seq, 0).label("low"),
    cast(bindparam("end", type_=BigInteger), BigInteger).label("high"),
).where(sessions.c.pk == bindparam("pk"))
_walk = _start.cte("walk", recursive=True)
_walk = _walk.union_all(
    select(*_up(_walk), _walk.c.low).where(_continues(_walk), _walk.c.low > _after)
)
# One lower bound a row, so that each span is one range of the primary key.
_from = case((_walk.c.low > _after, _walk.c.low), else_=_after)
_in_span = and_(
    entries.c.session_pk == _walk.c.pk, entries.c.seq > _from, entries.c.seq <= _walk.c.high
)


def _span_lines(line: Any) -> Query:
    return Query(
        select(entries.c.seq, line)
        .select_from(_walk.join(entries, _in_span))
        .order_by(entries.c.seq)
    )


SPAN_LINES = _span_lines(Utf8Bytes(entries.c.line))
"""The entry lines ``(seq, line bytes)`` of a history with ``after < seq <=
end``, in order, ``pk`` holding entry ``end``: one statement over every span
the range overlaps (keep the range short: its rows are sorted)."""

_SPAN_TEXT = _span_lines(entries.c.line)


def lineage(conn: Connection, session_id: str, row: SessionRow) -> Lineage:
    """The spans of a session's history (one query, only for a fork).

    Raises:
        CorruptSessionError: the chain of bases is broken (a row written
            behind the store's back).
    """
    if row.base_pk is None:
        return Lineage(row.pk, 0, (Span(row.pk, 0, END),))
    rows = _ANCESTRY.all(conn, pk=row.base_pk)
    bases = {pk: (base_pk, base_seq) for pk, base_pk, base_seq, _ in rows}
    names = {pk: name for pk, _, _, name in rows}
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
    return Lineage(row.pk, row.base_seq or 0, tuple(reversed(spans)), names)


_one = select(sessions.c.pk, sessions.c.base_pk, sessions.c.base_seq).where(
    sessions.c.pk == bindparam("pk")
)
_chain = _one.cte("chain", recursive=True)
_chain = _chain.union_all(select(*_up(_chain)).where(_continues(_chain)))
_named = select(sessions.c.id).where(sessions.c.pk == _chain.c.pk).scalar_subquery()
_ANCESTRY = Query(select(_chain.c.pk, _chain.c.base_pk, _chain.c.base_seq, _named))
"""``(pk, base_pk, base_seq, id)`` of a session (``pk``) and of each base down its chain."""

_FIRST_WITH_ID = Query(
    select(func.min(entries.c.seq)).select_from(
        _walk.join(entries, and_(_in_span, entries.c.entry_id == bindparam("id")))
    )
)
"""The ``seq`` of the first entry of a history whose id is ``id`` with
``after < seq <= end``, ``pk`` holding entry ``end`` (or NULL): one
statement through the index of entry ids, whatever the depth."""


def branch(
    conn: Connection,
    *,
    source_id: str,
    at: str | None,
    meta: SessionMeta,
    header: str | bytes,
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
        holder = spans.holder(point) if point else row.pk
        point = _FIRST_WITH_ID.scalar(conn, pk=holder, after=0, end=point, id=at) or 0
        if point == 0:
            raise EntryNotFoundError(source_id, at)
    if point == 0:
        return insert_session(conn, meta, header)
    holder = spans.holder(point)
    digest = Q.ENTRY_DIGEST.first(conn, pk=holder, seq=point)
    if digest is None or digest[0] is None:
        raise CorruptSessionError(source_id, f"entry {point} has no digest to chain from")
    return insert_session(conn, meta, header, base=(holder, point, bytes(digest[0])))


def page(
    conn: Connection, spans: Lineage, after: int, end: int, size: int, *, as_bytes: bool = False
) -> list[Any]:
    """Up to ``size`` rows ``(seq, line)`` of the history after ``after``, up
    to ``end``, in one statement however many spans they lie in; each line
    as stored text, or its UTF-8 bytes with ``as_bytes``.

    ``seq`` runs without gaps through a history, so the page is the rows
    ``after < seq <= after + size``: only the spans it overlaps are read.
    """
    upto = min(end, after + size)
    overlapped = list(spans.within(after, upto))
    if not overlapped:
        return []
    if len(overlapped) == 1:
        pk, low, high = overlapped[0]
        query = Q.PAGE_BYTES if as_bytes else Q.PAGE
        return query.all(conn, pk=pk, after=low, end=high, size=size)
    query = SPAN_LINES if as_bytes else _SPAN_TEXT
    return query.all(conn, pk=overlapped[-1].pk, after=after, end=upto)


def lines(conn: Connection, spans: Lineage, after: int, end: int) -> Generator[Any, None, None]:
    """The rows ``(seq, line bytes)`` of the history with ``after < seq <=
    end``, in order, one at a time.

    A span of `paging.ROWS` rows or more is streamed by one statement;
    each run of shorter spans between them is read by one statement too
    (`SPAN_LINES`), of about `paging.ROWS` rows at most. Close the iterator
    if it may be left unfinished (see `Query.each`).
    """
    run: list[Span] = []
    for span in spans.within(after, end):
        if run and span.end - run[0].after > paging.ROWS:
            yield from _run(conn, run)
            run = []
        run.append(span)
    yield from _run(conn, run)


def _run(conn: Connection, run: Sequence[Span]) -> Iterator[Any]:
    if len(run) == 1:
        pk, after, end = run[0]
        yield from Q.LINES.each(conn, pk=pk, after=after, end=end)
    elif run:
        yield from SPAN_LINES.each(conn, pk=run[-1].pk, after=run[0].after, end=run[-1].end)


_given = sessions.c.pk.in_(bindparam("pks", expanding=True))
_above = select(sessions.c.pk, sessions.c.base_pk, sessions.c.base_seq).where(_given)
_bases = _above.cte("bases", recursive=True)
# UNION, not UNION ALL: a base many sessions share is read once.
_bases = _bases.union(select(*_up(_bases)).where(_continues(_bases)))
_own_compactions = and_(
    entries.c.session_pk == _bases.c.pk, entries.c.type == literal_column("'compaction'")
)
_FAMILY = select(
    _bases.c.pk,
    _bases.c.base_pk,
    _bases.c.base_seq,
    select(func.min(entries.c.seq)).where(_own_compactions).scalar_subquery(),
)


class _Base(NamedTuple):
    base_pk: int | None
    base_seq: int
    first_compaction: int | None  # of its own rows


class Family:
    """The chains of bases above many sessions, read once for them all.

    Sessions of one family share most of their chains: a fork ``d`` deep
    has ``d`` bases, and so do its ``d`` ancestors but one each. `read`
    reads each base once however many sessions it is above, and what each
    chain says (whether it is broken, whether it holds a compaction) is
    worked out once per base, from the oldest, so that a family of ``d``
    sessions costs ``d`` steps, not ``d * d``. It holds what one survey
    read and is dropped with it.
    """

    def __init__(self) -> None:
        self._bases: dict[int, _Base] = {}
        self._broken: dict[int, str | None] = {}  # the chain below a base
        self._compacted: dict[int, bool] = {}  # entries 1..base_seq of a base

    def read(self, conn: Connection, pks: Sequence[int]) -> None:
        """Read the chains above the sessions ``pks`` (their bases), in one query."""
        wanted = sorted(set(pks) - self._bases.keys())
        if not wanted:
            return
        for pk, base_pk, base_seq, first_compaction in conn.execute(_FAMILY, {"pks": wanted}):
            self._bases[pk] = _Base(base_pk, base_seq or 0, first_compaction)
        for pk in sorted(self._bases.keys() - self._broken.keys()):  # a base before its forks
            self._settle(pk)

    def _settle(self, pk: int) -> None:
        """Whether the chain below ``pk`` is broken, and whether the entries
        ``pk`` shares hold a compaction; its base's are settled (a smaller key)."""
        base_pk, shared, _ = self._bases[pk]
        self._compacted[pk] = False
        if base_pk is None:
            self._broken[pk] = None
            return
        if base_pk >= pk or base_pk not in self._bases:  # as `lineage` walks it
            self._broken[pk] = f"its chain of bases is broken at session key {base_pk}"
            return
        self._broken[pk] = self._step(base_pk, shared) or self._broken[base_pk]
        self._compacted[pk] = self._broken[pk] is None and self.compacted(base_pk, shared)

    def _step(self, base_pk: int, end: int) -> str | None:
        base = self._bases[base_pk]
        after = base.base_seq
        if not after < end or (base.base_pk is not None and after == 0):
            what = f"session key {base_pk} cannot hold entries {after + 1}..{end} as its own"
            return f"its chain of bases is broken: {what}"
        return None

    def broken(self, base_pk: int, base_seq: int) -> str | None:
        """Why the chain of a fork of ``base_pk`` sharing ``base_seq`` entries
        is broken (`lineage` says the same), or None."""
        if base_pk not in self._bases:
            return f"its chain of bases is broken at session key {base_pk}"
        return self._step(base_pk, base_seq) or self._broken[base_pk]

    def compacted(self, base_pk: int, base_seq: int) -> bool:
        """Whether the first ``base_seq`` entries of the history of ``base_pk``
        (as a fork of it shares them) hold a compaction; its chain is sound."""
        first = self._bases[base_pk].first_compaction
        return (first is not None and first <= base_seq) or self._compacted[base_pk]
