"""`SqlStore.search`: the word index's answer, ranked, expanded to forks, paged.

One read transaction (one snapshot) answers a page:

1. **Ranked rows.** The stored rows (session key, ``seq``) whose message
   holds every word, best first by ``(score descending, session key,
   seq)``: from the index (`sessionstore.backends.sql.wordindex`) in
   pages of that order, merged with the messages the index does not hold,
   read and matched here: on SQLite the backlog past the index's mark
   (fewer than `wordindex.BACKLOG` entries but for one write's worth), on
   PostgreSQL the rare message too large for a ``tsvector``. Both compute
   the same score (`wordindex.score`), so a row keeps its place when the
   backlog is indexed between two pages.
2. **Sessions holding each row.** A fork shares its source's rows (see
   `sessionstore.backends.sql.lineage`): a row is in its own session, in
   each fork whose ``base_pk`` is that session and ``base_seq`` reaches the
   row, and in every fork of those (a fork's base always holds its last
   shared entry, so a fork of a fork shares all its base shares). Its
   ``seq`` is the same in each. The owner filter reads each session's
   header.
3. **Hits** in order of ``(score, session key, seq, session id)``, the
   cursor's key; the snippet from the row's line.

Only the rows of a page, and of the sessions they reach, are read: a word
held by a few messages is found in milliseconds however many sessions the
database holds.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, NamedTuple, TypeVar

from sqlalchemy import ARRAY, BigInteger, Connection, bindparam, select, text
from sqlalchemy.types import Text

from sessionstore.backends.base import search_hit
from sessionstore.backends.cursors import Cursor
from sessionstore.backends.sql import queries as Q
from sessionstore.backends.sql import wordkeys
from sessionstore.backends.sql.lineage import END
from sessionstore.backends.sql.postings import LENGTHS, unpack
from sessionstore.backends.sql.query import Query
from sessionstore.backends.sql.sealing import open_header
from sessionstore.backends.sql.tables import search_mark, sessions
from sessionstore.backends.sql.wordindex import (
    BACKLOG_MESSAGES,
    indexed,
    message_of,
    opened_rows,
    score,
    word_key,
)
from sessionstore.errors import (
    CorruptSessionError,
    EncryptionKeyError,
    InvalidCursorError,
    InvalidRecordError,
)
from sessionstore.models import MessageEntry
from sessionstore.store import SearchHit
from sessionstore.wire.stored import read_stored_meta

if TYPE_CHECKING:
    from sessionstore.encryption.sealer import Sealer

__all__ = ["KEY_PARTS", "StaleKeys", "Start", "search", "snapshot", "start_of"]

_T = TypeVar("_T")

KEY_PARTS = 4
"""Parts of a search cursor's key: score, session key, seq, session id."""


class Start(NamedTuple):
    """Where a page starts: after the hit of this key."""

    score: float
    pk: int
    seq: int
    session_id: str


def start_of(cursor: str, kind: str) -> Start:
    """The key a `SearchHit.cursor` holds.

    Raises:
        InvalidCursorError: not a cursor of this search, or edited.
    """
    key = Cursor.decode(cursor, kind, length=KEY_PARTS).key
    try:
        found = float(key[0])
    except ValueError:
        found = math.nan
    if not (math.isfinite(found) and found > 0 and key[1].isdigit() and key[2].isdigit()):
        raise InvalidCursorError(f"not a cursor: {cursor!r}")
    return Start(found, int(key[1]), int(key[2]), key[3])


# A ranked row: (-score, session key, seq, its message when already read).
_Row = tuple[float, int, int, MessageEntry | None]

# Rows asked of the index at first, then eight times more each time: a page
# the owner filter thins out re-reads (and re-ranks) the rows a few times.
_FIRST_PAGE = 32
_LARGEST_PAGE = 131072
_PROBE = 4096  # index rows weighed at most, to find a query's rarest word
_KEYSET = (
    "WHERE score < :score OR (score = :score AND (session_pk, seq) > (:pk, :seq)) "
    "ORDER BY score DESC, session_pk, seq LIMIT :size"
)


_SQLITE_PROBE = Query(
    text(
        "SELECT coalesce(sum(length(postings)), 0) FROM (SELECT postings FROM search_postings "
        f"WHERE word = :word LIMIT {_PROBE})"
    )
)
"""SQLite: about how many messages hold a word (the bytes of its rows, up to a bound)."""


def _sqlite_rows(others: int) -> Query:
    """SQLite: the rows of the word ``driver`` (``session_pk``, ``batch``,
    ``postings``), each with the lengths of its batch and the rows of the
    ``others`` words ``w1``, ``w2``... at its key, a batch lacking one left
    out: SQLite looks them up, not a statement each. CROSS JOIN keeps the
    driver first."""
    joined = ["lengths", *(f"w{n}" for n in range(1, others + 1))]
    on = " ".join(
        f"AND {alias}.word = :{alias} AND {alias}.session_pk = d.session_pk "
        f"AND {alias}.batch = d.batch"
        for alias in joined
    )
    return Query(
        text(
            "SELECT d.session_pk, d.batch, d.postings, "
            + ", ".join(f"{alias}.postings" for alias in joined)
            + " FROM search_postings AS d "
            + " ".join(f"CROSS JOIN search_postings AS {alias}" for alias in joined)
            + f" WHERE d.word = :driver {on} ORDER BY d.session_pk, d.batch"
        )
    )


_SQLITE_ROWS = tuple(_sqlite_rows(others) for others in range(8))
"""`_sqlite_rows` of up to seven other words; a longer query makes its own."""

_MARK = Query(select(search_mark.c.indexed))

_POSTGRES_HITS = Query(
    text(
        "SELECT session_pk, seq, score FROM ("
        "SELECT v.session_pk, v.seq, CAST(h.hits * h.hits AS float8) / v.length AS score "
        "FROM search_vectors AS v CROSS JOIN LATERAL ("
        "SELECT sum(cardinality(u.positions)) AS hits FROM unnest(v.words) AS u "
        "WHERE u.lexeme = ANY(:keys)) AS h "
        "WHERE v.words @@ CAST(:query AS tsquery)"
        f") AS hit {_KEYSET}"
    ).bindparams(bindparam("keys", type_=ARRAY(Text)))
)
"""PostgreSQL: the ranked rows whose vector holds every word (the GIN index
answers ``@@``), scored from the positions of the words in it."""

_POSTGRES_UNINDEXED = Query(
    text(
        "SELECT e.session_pk, e.seq, e.line FROM search_vectors AS v "
        "JOIN entries AS e ON e.session_pk = v.session_pk AND e.seq = v.seq "
        "WHERE v.words IS NULL"
    )
)
"""PostgreSQL: the messages too large for a vector, through a partial index."""

_SESSION = Query(select(sessions.c.id, sessions.c.header).where(sessions.c.pk == bindparam("pk")))
_FORKS = Query(
    select(sessions.c.pk, sessions.c.id, sessions.c.header, sessions.c.base_seq).where(
        sessions.c.base_pk == bindparam("pk")
    )
)


def search(
    conn: Connection,
    *,
    wanted: Sequence[str],
    owner: str | None,
    limit: int,
    start: Start | None,
    kind: str,
    sealer: Sealer | None = None,
) -> list[SearchHit]:
    """A page of hits (a read transaction's body); see the module doc. In a
    sealed store the index is asked for the words' tokens in each bucket
    of sessions, and the lines and headers read are opened."""
    keys = list(dict.fromkeys(map(word_key, wanted)))
    named = None if sealer is None else wordkeys.named(conn)
    hits = _page(conn, wanted, keys, owner, limit, start, kind, sealer, named)
    if named is not None and conn.dialect.name == "postgresql" and wordkeys.named(conn) != named:
        # A statement a snapshot of its own: the tokens asked for were
        # those of the keys named before, which an erase changed meanwhile.
        raise StaleKeys("the word keys changed while the search read the index")
    return hits


def _page(
    conn: Connection,
    wanted: Sequence[str],
    keys: list[str],
    owner: str | None,
    limit: int,
    start: Start | None,
    kind: str,
    sealer: Sealer | None,
    named: list[tuple[int, bytes]] | None,
) -> list[SearchHit]:
    holders = _Holders(conn, sealer)
    hits: list[SearchHit] = []
    ranked = _ranked(conn, wanted, keys, start, sealer, named)
    # Rows taken a few at a time, as many as hits are still wanted (a row
    # gives one hit or more): on PostgreSQL their sessions, forks and lines
    # are then read in one statement each, not one per row.
    while chunk := list(itertools.islice(ranked, limit - len(hits))):
        holders.read_ahead(chunk)
        for negated, pk, seq, entry in chunk:
            found = -negated
            for session_id, header in holders.of(pk, seq):
                if start is not None and (found, pk, seq) == start[:3] and session_id <= start[3]:
                    continue
                if owner is not None and holders.owner(session_id, header) != owner:
                    continue
                entry = entry or holders.message_at(pk, seq)
                if entry is None:  # no longer decodes: no words to show
                    break
                key = (repr(found), str(pk), str(seq), session_id)
                hits.append(search_hit(session_id, seq, entry, wanted, kind, key))
                if len(hits) == limit:
                    return hits
    return hits


class StaleKeys(Exception):
    """The word keys a search read changed (an erase committed since), or
    one is destroyed: search again. `SqlStore` catches it and searches
    again, the last time in one snapshot; there, a key gone for good is
    the `EncryptionKeyError` it raises."""


def snapshot(body: Callable[[Connection], _T], conn: Connection) -> _T:
    """``body`` in one snapshot (PostgreSQL: REPEATABLE READ; a SQLite read
    transaction is one): a sealed search reads the word keys, then the
    tokens made under them."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
    return body(conn)


def _ranked(
    conn: Connection,
    wanted: Sequence[str],
    keys: list[str],
    start: Start | None,
    sealer: Sealer | None,
    named: list[tuple[int, bytes]] | None,
) -> Iterator[_Row]:
    """Every row holding every word, best first, from ``start``'s row on."""
    first = (-start.score, start.pk, start.seq) if start is not None else None
    unindexed = sorted(
        row for row in _unindexed(conn, wanted, keys, sealer) if first is None or row[:3] >= first
    )
    groups = [keys] if sealer is None or named is None else _tokens(keys, sealer, named)
    return heapq.merge(_from_index(conn, groups, start), unindexed, key=lambda row: row[:3])


def _tokens(keys: list[str], sealer: Sealer, named: list[tuple[int, bytes]]) -> list[list[str]]:
    """Sealed: the query's words as the index holds them in each bucket of
    sessions (`wordkeys`), a list of tokens per bucket."""
    digests = [sealer.word(key) for key in keys]
    try:
        current = wordkeys.keys_of(sealer, named)
    except EncryptionKeyError as exc:
        raise StaleKeys(str(exc)) from None
    return [key.tokens(digests) for _, key in current]


def _from_index(conn: Connection, groups: list[list[str]], start: Start | None) -> Iterator[_Row]:
    """The index's rows holding every word of one of ``groups`` (the
    query's words as each bucket holds them), best first, from ``start``'s
    row on, page by page."""
    # After (score, pk, seq - 1): the start's own row comes again, for the
    # forks holding it that the last page did not reach.
    after = (start.score, start.pk, start.seq - 1) if start is not None else (math.inf, 0, 0)
    if not groups:
        return
    if conn.dialect.name != "postgresql":
        yield from _from_postings(conn, groups, after)
        return

    def quoted(key: str) -> str:
        return "'" + key.replace("\\", "\\\\").replace("'", "''") + "'"

    query = " | ".join("(" + " & ".join(map(quoted, group)) + ")" for group in groups)
    given: dict[str, object] = {"keys": [key for group in groups for key in group], "query": query}
    size = _FIRST_PAGE
    while True:
        rows = _POSTGRES_HITS.all(
            conn, **given, score=after[0], pk=after[1], seq=after[2], size=size
        )
        for pk, seq, found in rows:
            yield -found, pk, seq, None
        if len(rows) < size:
            return
        after = (rows[-1][2], rows[-1][0], rows[-1][1])
        size = min(size * 8, _LARGEST_PAGE)


def _from_postings(
    conn: Connection, groups: list[list[str]], after: tuple[float, int, int]
) -> Iterator[_Row]:
    """SQLite: the index's rows after ``after`` (score, pk, seq), best first,
    a page at a time: each page ranks every message holding the words
    again, keeping only the page's best (`_holding`)."""
    drivers = []
    for keys in groups:
        driver = _rarest(conn, keys)
        if driver is not None:
            drivers.append((driver, [key for key in keys if key != driver]))
    if not drivers:
        return
    size = _FIRST_PAGE
    while True:
        past = (-after[0], after[1], after[2])
        held = (row for driver, others in drivers for row in _holding(conn, driver, others))
        rows = heapq.nsmallest(size, (row for row in held if row > past))
        for negated, pk, seq in rows:
            yield negated, pk, seq, None
        if len(rows) < size:
            return
        after = (-rows[-1][0], rows[-1][1], rows[-1][2])
        size = min(size * 8, _LARGEST_PAGE)


def _holding(conn: Connection, driver: str, others: list[str]) -> Iterator[tuple[float, int, int]]:
    """SQLite: ``(-score, pk, seq)`` of each message holding ``driver`` and
    every word of ``others``: the driver's rows, each with the rows of the
    others and the lengths at its key."""
    statement = _SQLITE_ROWS[len(others)] if len(others) < 8 else _sqlite_rows(len(others))
    given = {f"w{n}": word for n, word in enumerate(others, 1)}
    for pk, batch, blob, lengths, *held in statement.all(
        conn, driver=driver, lengths=LENGTHS, **given
    ):
        found = dict(unpack(blob, batch))
        for row in held:
            hits = dict(unpack(row, batch))
            found = {seq: count + hits[seq] for seq, count in found.items() if seq in hits}
        sizes = dict(unpack(lengths, batch))
        for seq, count in found.items():
            if sizes.get(seq):  # a length of 0 or none: no message of words
                yield -score(count, sizes[seq]), pk, seq


def _rarest(conn: Connection, keys: list[str]) -> str | None:
    """SQLite: the word held by the fewest messages; None when one is held by
    none. One word is its own (a sealed search asks once per bucket)."""
    if len(keys) == 1:
        return keys[0]
    counts = [(_SQLITE_PROBE.scalar(conn, word=key), key) for key in keys]
    fewest, key = min(counts)
    return key if fewest else None


def _unindexed(
    conn: Connection, wanted: Sequence[str], keys: list[str], sealer: Sealer | None
) -> Iterator[_Row]:
    """The messages the index does not hold that hold every word, read here."""
    if conn.dialect.name == "postgresql":
        rows = _POSTGRES_UNINDEXED.each(conn)
    else:
        rows = BACKLOG_MESSAGES.each(conn, after=_MARK.scalar(conn), upto=END)
    lines = rows if sealer is None else opened_rows(conn, sealer, rows)
    try:
        for pk, seq, line in lines:
            if _lacks(line, wanted):
                continue
            entry = message_of(line)
            if entry is None or _lacks(entry.message.text(), wanted, raw=False):
                continue
            found = indexed(entry)
            if found is not None and all(key in found.hits for key in keys):
                hits = sum(found.hits[key] for key in keys)
                yield -score(hits, found.length), pk, seq, entry
    finally:
        rows.close()


def _lacks(text: str, wanted: Sequence[str], *, raw: bool = True) -> bool:
    """Whether ``text`` surely lacks a wanted word, told without finding its
    words (which costs several times more). Some texts show their words as
    they are: ASCII text (NFC and lower case leave ASCII), and a stored line
    all ASCII with no ``\\u`` escape (an escape stands for no letter or
    digit but there) and no ``"text"`` (whose content is then one string, or
    none: the text of a list of parts joins them, and a word with them)."""
    if not text.isascii() or (raw and ("\\u" in text or '"text"' in text)):
        return False
    lower = text.lower()
    return not all(word in lower for word in wanted)


_POSTGRES_SESSIONS = Query(
    text("SELECT pk, id, header FROM sessions WHERE pk = ANY(:pks)").bindparams(
        bindparam("pks", type_=ARRAY(BigInteger))
    )
)
_POSTGRES_FORKS = Query(
    text(
        "SELECT base_pk, pk, id, header, base_seq FROM sessions WHERE base_pk = ANY(:pks)"
    ).bindparams(bindparam("pks", type_=ARRAY(BigInteger)))
)
_POSTGRES_LINES = Query(
    text(
        "SELECT e.session_pk, e.seq, e.line FROM unnest(:pks, :seqs) AS k(pk, seq) "
        "JOIN entries AS e ON e.session_pk = k.pk AND e.seq = k.seq"
    ).bindparams(
        bindparam("pks", type_=ARRAY(BigInteger)), bindparam("seqs", type_=ARRAY(BigInteger))
    )
)
"""PostgreSQL, where each statement is a round trip: what `_Holders.read_ahead`
reads for many rows at once."""


class _Fork(NamedTuple):
    pk: int
    id: str
    header: str
    base_seq: int


class _Holders:
    """The sessions holding each row, and their owners, read once per page."""

    def __init__(self, conn: Connection, sealer: Sealer | None) -> None:
        self._conn = conn
        self._sealer = sealer
        self._sessions: dict[int, tuple[str, str] | None] = {}
        self._forks: dict[int, list[_Fork]] = {}
        self._owners: dict[str, str | None] = {}
        self._lines: dict[tuple[int, int], str | bytes] = {}

    def read_ahead(self, rows: Sequence[_Row]) -> None:
        """PostgreSQL: read the sessions, forks and lines of ``rows`` at once
        (on SQLite, in the process, a statement per row costs less)."""
        if self._conn.dialect.name != "postgresql":
            return
        pks = sorted({pk for _, pk, _, _ in rows} - self._sessions.keys())
        if pks:
            self._sessions.update(dict.fromkeys(pks))
            for pk, id_, header in _POSTGRES_SESSIONS.all(self._conn, pks=pks):
                self._sessions[pk] = (id_, header)
            self._forks.update({pk: [] for pk in pks})
            for base, fork, id_, header, base_seq in _POSTGRES_FORKS.all(self._conn, pks=pks):
                if fork > base:  # as `_forks_of`
                    self._forks[base].append(_Fork(fork, id_, header, base_seq or 0))
        wanted = [(pk, seq) for _, pk, seq, entry in rows if entry is None]
        if wanted:
            given = {"pks": [pk for pk, _ in wanted], "seqs": [seq for _, seq in wanted]}
            for pk, seq, line in _POSTGRES_LINES.all(self._conn, **given):
                self._lines[pk, seq] = line

    def message_at(self, pk: int, seq: int) -> MessageEntry | None:
        """The message of row ``(pk, seq)``; None when it does not decode
        (or, sealed, does not open)."""
        line = self._lines.pop((pk, seq), None)
        if line is None:
            row = Q.LINES.first(self._conn, pk=pk, after=seq - 1, end=seq)
            line = row[1] if row is not None else None
        if line is not None and self._sealer is not None:
            own = self._sessions.get(pk)
            try:
                line = self._sealer.open("entry", own[0] if own else f"#{pk}", seq, line)
            except CorruptSessionError:
                return None
        return message_of(line) if line is not None else None

    def of(self, pk: int, seq: int) -> list[tuple[str, str]]:
        """``(id, header)`` of each session holding row ``(pk, seq)``, by id."""
        if pk not in self._sessions:
            self._sessions[pk] = _SESSION.first(self._conn, pk=pk)
        own = self._sessions[pk]
        found = [] if own is None else [(own[0], own[1])]
        heirs = [fork for fork in self._forks_of(pk) if fork.base_seq >= seq]
        while heirs:
            fork = heirs.pop()
            found.append((fork.id, fork.header))
            heirs.extend(self._forks_of(fork.pk))  # they share all their base shares
        return sorted(found)

    def _forks_of(self, pk: int) -> list[_Fork]:
        if pk not in self._forks:
            rows = _FORKS.all(self._conn, pk=pk)
            # A base is older than its fork: a row written behind the
            # store's back cannot make a loop here.
            self._forks[pk] = [
                _Fork(fork, id_, header, base or 0) for fork, id_, header, base in rows if fork > pk
            ]
        return self._forks[pk]

    def owner(self, session_id: str, header: str) -> str | None:
        """The owner a session's header names (None if it does not decode)."""
        if session_id not in self._owners:
            try:
                header = open_header(self._sealer, session_id, header, "sessions")
                self._owners[session_id] = read_stored_meta(header).owner
            except (InvalidRecordError, CorruptSessionError):
                self._owners[session_id] = None
        return self._owners[session_id]
