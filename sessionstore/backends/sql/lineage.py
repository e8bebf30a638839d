"""Where a session's entries live: its own rows, and those a fork shares
(docs/sql.md, Forks), and how many rows a read or an import takes at a time.

A fork's row names a base (``base_pk``), the session holding its entry
``base_seq`` as its own row, and its own rows start past it: following the
bases up gives its spans, each a run of ``seq`` held by one session. A
history is read a page, not a span, per statement (`page`, `lines`),
whatever its depth. Nothing here changes once written.
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

from sessionstore.backends.sql import queries as Q
from sessionstore.backends.sql.database import SessionRow, find_session, insert_session, last_seq
from sessionstore.backends.sql.query import Query, Utf8Bytes
from sessionstore.backends.sql.tables import entries, sessions
from sessionstore.errors import CorruptSessionError, EntryNotFoundError
from sessionstore.models import SessionMeta

END = 2**62  # a seq past every entry: the end of a session's own span

# A page of a streamed session: at most ROWS rows and about BYTES of lines
# (tools' outputs of 64 KB: ROWS of them held at once would be 128 MB). A
# read, which cannot count the bytes first, asks for as many rows as the
# lines of the page before say would fit, starting from FIRST.
ROWS = 2000
BYTES = 1 << 20
FIRST = 64


def next_rows(rows: int, size: int) -> int:
    """The rows of the next page, after one of ``rows`` holding ``size`` bytes."""
    return max(1, min(ROWS, rows * BYTES // max(size, 1)))


def _broken_at(pk: int) -> str:
    return f"its chain of bases is broken at session key {pk}"


def _unheld(pk: int, base_pk: int | None, after: int, end: int) -> str | None:
    """Why ``pk``, holding its own rows past ``after``, cannot hold ``after < seq <= end``."""
    if not after < end or (base_pk is not None and after == 0):
        what = f"session key {pk} cannot hold entries {after + 1}..{end} as its own"
        return f"its chain of bases is broken: {what}"
    return None


class Span(NamedTuple):
    """A run of ``seq`` held by one session: ``after < seq <= end`` of ``pk``."""

    pk: int
    after: int
    end: int


@dataclass(frozen=True)
class Lineage:
    """The spans of a session's history, oldest first (the last its own),
    how many entries it shares, and the id of each base by key."""

    pk: int
    shared: int
    spans: tuple[Span, ...]
    names: Mapping[int, str] = field(default_factory=dict)

    def within(self, after: int, end: int) -> Iterator[Span]:
        """The spans clipped to ``after < seq <= end``, empty ones left out."""
        for span in self.spans:
            low, high = max(span.after, after), min(span.end, end)
            if low < high:
                yield Span(span.pk, low, high)

    def holder(self, seq: int) -> int:
        """The key of the session holding entry ``seq`` (at least 1) as its own row."""
        return next(span.pk for span in self.spans if span.after < seq <= span.end)


def _up(chain: Any) -> tuple[Any, Any, Any]:
    """The next step of a recursive walk down a chain of bases: the base's
    ``(pk, base_pk, base_seq)``. Correlated lookups, not a join, which
    PostgreSQL would scan the table for at each step; the smaller key (a base
    is older than its fork) ends any loop a raw writer could make."""
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


# One statement over every span ``after < seq <= end`` overlaps, ``pk``
# holding entry ``end`` (keep the range short: its rows are sorted).
SPAN_LINES = _span_lines(Utf8Bytes(entries.c.line))
_SPAN_TEXT = _span_lines(entries.c.line)


def lineage(conn: Connection, session_id: str, row: SessionRow) -> Lineage:
    """The spans of a session's history (one query, only for a fork)."""
    if row.base_pk is None:
        return Lineage(row.pk, 0, (Span(row.pk, 0, END),))
    rows = _ANCESTRY.all(conn, pk=row.base_pk)
    bases = {pk: (base_pk, base_seq) for pk, base_pk, base_seq, _ in rows}
    names = {pk: name for pk, _, _, name in rows}
    spans = [Span(row.pk, row.base_seq or 0, END)]
    pk, end = row.base_pk, row.base_seq or 0
    while pk is not None:
        if pk not in bases or len(spans) > len(bases):
            raise CorruptSessionError(session_id, _broken_at(pk))
        base_pk, base_seq = bases[pk]
        after = base_seq or 0
        if (broken := _unheld(pk, base_pk, after, end)) is not None:
            raise CorruptSessionError(session_id, broken)
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

_FIRST_WITH_ID = Query(
    select(func.min(entries.c.seq)).select_from(
        _walk.join(entries, and_(_in_span, entries.c.entry_id == bindparam("id")))
    )
)


def branch(
    conn: Connection,
    *,
    source_id: str,
    at: str | None,
    meta: SessionMeta,
    header: str | bytes,
) -> int:
    """Insert the fork ``meta`` of ``source_id`` sharing its entries up to the
    first whose id is ``at`` (all when None); its key. Its base is the
    session holding the last shared entry as its own row, so no chain of
    bases grows longer than needed."""
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
    """Up to ``size`` rows ``(seq, line)`` of the history past ``after``, up to
    ``end``, in one statement: ``seq`` has no gaps, so only the spans
    ``after < seq <= after + size`` overlaps are read."""
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
    """The rows ``(seq, line bytes)`` of ``after < seq <= end``, one at a time:
    a long span streamed by one statement, each run of shorter ones read by
    one more. Close it if it may be left unfinished (`Query.each`)."""
    run: list[Span] = []
    for span in spans.within(after, end):
        if run and span.end - run[0].after > ROWS:
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
    """The chains of bases above many sessions, read once for them all (for
    one survey): each base is read once, and what its chain says (broken,
    compacted) worked out once, from the oldest, so that a family of ``d``
    sessions costs ``d`` steps, not ``d * d``."""

    def __init__(self) -> None:
        self._bases: dict[int, _Base] = {}
        self._broken: dict[int, str | None] = {}  # the chain below a base
        self._compacted: dict[int, bool] = {}  # entries 1..base_seq of a base

    def read(self, conn: Connection, pks: Sequence[int]) -> None:
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
            self._broken[pk] = _broken_at(base_pk)
            return
        self._broken[pk] = self._step(base_pk, shared) or self._broken[base_pk]
        self._compacted[pk] = self._broken[pk] is None and self.compacted(base_pk, shared)

    def _step(self, base_pk: int, end: int) -> str | None:
        base = self._bases[base_pk]
        return _unheld(base_pk, base.base_pk, base.base_seq, end)

    def broken(self, base_pk: int, base_seq: int) -> str | None:
        """Why the chain of a fork of ``base_pk`` sharing ``base_seq`` entries
        is broken (`lineage` says the same), or None."""
        if base_pk not in self._bases:
            return _broken_at(base_pk)
        return self._step(base_pk, base_seq) or self._broken[base_pk]

    def compacted(self, base_pk: int, base_seq: int) -> bool:
        """Whether the first ``base_seq`` entries of the history of ``base_pk``
        (as a fork of it shares them) hold a compaction; its chain is sound."""
        first = self._bases[base_pk].first_compaction
        return (first is not None and first <= base_seq) or self._compacted[base_pk]
