"""`SqlStore.search`: the word index's answer, expanded to forks, ranked, paged.

Hits come in `words.rank_key` order, the cursor holding that key. One read
(one snapshot) answers a page: the stored rows holding every word, from
the index and from the messages it does not hold (SQLite's backlog, a
PostgreSQL message too large for a ``tsvector``), scored alike; then each
session holding each row (a fork shares its base's rows up to ``base_seq``,
and so do its forks); then the owner filter and snippets, reading only the
page's lines and headers. docs/sql.md, Search.
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
    word_key,
)
from sessionstore.backends.words import HITS_PER_WORD, hits, score
from sessionstore.errors import (
    CorruptSessionError,
    EncryptionKeyError,
    InvalidRecordError,
)
from sessionstore.models import MessageEntry
from sessionstore.store import SearchHit
from sessionstore.wire.stored import read_stored_meta

if TYPE_CHECKING:
    from sessionstore.encryption.sealer import Sealer

_T = TypeVar("_T")

_Key = tuple[float, str, int]  # a `rank_key`: (-score, session id, seq)
# A hit: its `rank_key` (-score, session id, seq), then the key of the
# session whose rows hold its message, that of the session it is in, and
# its message when already read.
_Hit = tuple[float, str, int, int, int, MessageEntry | None]
# A stored row: (-score, session key, seq, its message when already read).
_Row = tuple[float, int, int, MessageEntry | None]

# Rows asked of the index at first, then eight times more each time: a page
# the owner filter thins out re-reads (and re-ranks) the rows a few times.
_FIRST_PAGE = 32
_LARGEST_PAGE = 131072
_PROBE = 4096  # index rows weighed at most, to find a query's rarest word


_SQLITE_PROBE = Query(
    text(
        "SELECT coalesce(sum(length(postings)), 0) FROM (SELECT postings FROM search_postings "
        f"WHERE word = :word LIMIT {_PROBE})"
    )
)
# SQLite: about how many messages hold a word (the bytes of its rows, up to a bound).


def _sqlite_rows(others: int) -> Query:
    """SQLite: the rows of the word ``driver``, each with its session's id and
    whether it has forks, its batch's lengths and the rows of the ``others``
    words ``w1``, ``w2``... at its key (a batch lacking one left out), in one
    statement. CROSS JOIN keeps the driver first."""
    joined = ["lengths", *(f"w{n}" for n in range(1, others + 1))]
    on = " ".join(
        f"AND {alias}.word = :{alias} AND {alias}.session_pk = d.session_pk "
        f"AND {alias}.batch = d.batch"
        for alias in joined
    )
    return Query(
        text(
            "SELECT d.session_pk, s.id, EXISTS (SELECT 1 FROM sessions AS f "
            "WHERE f.base_pk = d.session_pk), d.batch, d.postings, "
            + ", ".join(f"{alias}.postings" for alias in joined)
            + " FROM search_postings AS d "
            + " ".join(f"CROSS JOIN search_postings AS {alias}" for alias in joined)
            + " LEFT JOIN sessions AS s ON s.pk = d.session_pk"
            + f" WHERE d.word = :driver {on} ORDER BY d.session_pk, d.batch"
        )
    )


_SQLITE_ROWS = tuple(_sqlite_rows(others) for others in range(8))

_MARK = Query(select(search_mark.c.indexed))

_POSTGRES_HITS = Query(
    text(
        "WITH RECURSIVE hit AS ("
        "SELECT v.session_pk AS pk, v.seq, CAST(h.hits * h.hits AS float8) / v.length AS score "
        "FROM search_vectors AS v CROSS JOIN LATERAL ("
        "SELECT sum(cardinality(u.positions)) AS hits FROM unnest(v.words) AS u "
        "WHERE u.lexeme = ANY(:keys)) AS h "
        "WHERE v.words @@ CAST(:query AS tsquery)"
        "), holder AS ("
        "SELECT hit.pk AS row_pk, hit.seq, hit.score, s.pk, s.id FROM hit "
        "JOIN sessions AS s ON s.pk = hit.pk "
        "UNION ALL SELECT holder.row_pk, holder.seq, holder.score, f.pk, f.id FROM holder "
        "JOIN sessions AS f ON f.base_pk = holder.pk AND f.base_seq >= holder.seq "
        "AND f.pk > holder.pk"
        ") SELECT score, id, seq, row_pk, pk FROM holder "
        'WHERE score < :score OR (score = :score AND (id COLLATE "C", seq) > (:id, :seq)) '
        'ORDER BY score DESC, id COLLATE "C", seq LIMIT :size'
    ).bindparams(bindparam("keys", type_=ARRAY(Text)))
)

_POSTGRES_UNINDEXED = Query(
    text(
        "SELECT e.session_pk, e.seq, e.line FROM search_vectors AS v "
        "JOIN entries AS e ON e.session_pk = v.session_pk AND e.seq = v.seq "
        "WHERE v.words IS NULL"
    )
)

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
    start: _Key | None,
    kind: str,
    sealer: Sealer | None = None,
) -> list[SearchHit]:
    """A page of hits; sealed, the index is asked for each bucket's tokens."""
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
    start: _Key | None,
    kind: str,
    sealer: Sealer | None,
    named: list[tuple[int, bytes]] | None,
) -> list[SearchHit]:
    holders = _Holders(conn, sealer)
    found: list[SearchHit] = []
    ranked = _ranked(conn, holders, wanted, keys, start, sealer, named)
    # Hits taken a few at a time, as many as are still wanted: on
    # PostgreSQL their sessions and lines are then read in one statement
    # each, not one per hit.
    while chunk := list(itertools.islice(ranked, limit - len(found))):
        holders.read_ahead(chunk)
        for negated, session_id, seq, pk, holder, entry in chunk:
            if owner is not None and holders.owner(holder) != owner:
                continue
            entry = entry or holders.message_at(pk, seq)
            if entry is None:  # no longer decodes: no words to show
                continue
            key = (repr(-negated), session_id, str(seq))
            found.append(search_hit(session_id, seq, entry, wanted, kind, key))
            if len(found) == limit:
                return found
    return found


class StaleKeys(Exception):
    """The word keys a search read changed (an erase committed since), or one
    is destroyed: search again (`SqlStore`: the last time in one snapshot)."""


def snapshot(body: Callable[[Connection], _T], conn: Connection) -> _T:
    """``body`` in one snapshot (PostgreSQL: REPEATABLE READ; SQLite's reads are)."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
    return body(conn)


def _ranked(
    conn: Connection,
    holders: _Holders,
    wanted: Sequence[str],
    keys: list[str],
    start: _Key | None,
    sealer: Sealer | None,
    named: list[tuple[int, bytes]] | None,
) -> Iterator[_Hit]:
    past = start
    unindexed = sorted(
        (negated, session_id, seq, pk, holder, entry)
        for negated, pk, seq, entry in _unindexed(conn, wanted, keys, sealer)
        for holder, session_id in holders.of(pk, seq)
        if past is None or (negated, session_id, seq) > past
    )
    groups = [keys] if sealer is None or named is None else _tokens(keys, sealer, named)
    index = _from_index(conn, holders, groups, past)
    return heapq.merge(index, unindexed, key=lambda hit: hit[:3])


def _tokens(keys: list[str], sealer: Sealer, named: list[tuple[int, bytes]]) -> list[list[str]]:
    """Sealed: the query's words as each bucket holds them, a list per bucket."""
    digests = [sealer.word(key) for key in keys]
    try:
        current = wordkeys.keys_of(sealer, named)
    except EncryptionKeyError as exc:
        raise StaleKeys(str(exc)) from None
    return [key.tokens(digests) for _, key in current]


def _from_index(
    conn: Connection,
    holders: _Holders,
    groups: list[list[str]],
    past: tuple[float, str, int] | None,
) -> Iterator[_Hit]:
    """The index's hits of every word of one of ``groups``, in rank order after ``past``."""
    if not groups:
        return
    if conn.dialect.name != "postgresql":
        yield from _from_postings(conn, holders, groups, past)
        return

    def quoted(key: str) -> str:
        return "'" + key.replace("\\", "\\\\").replace("'", "''") + "'"

    query = " | ".join("(" + " & ".join(map(quoted, group)) + ")" for group in groups)
    given: dict[str, object] = {"keys": [key for group in groups for key in group], "query": query}
    after = (math.inf, "", 0) if past is None else (-past[0], past[1], past[2])
    size = _FIRST_PAGE
    while True:
        rows = _POSTGRES_HITS.all(
            conn, **given, score=after[0], id=after[1], seq=after[2], size=size
        )
        for found, session_id, seq, pk, holder in rows:
            yield -found, session_id, seq, pk, holder, None
        if len(rows) < size:
            return
        after = tuple(rows[-1][:3])
        size = min(size * 8, _LARGEST_PAGE)


def _from_postings(
    conn: Connection,
    holders: _Holders,
    groups: list[list[str]],
    past: tuple[float, str, int] | None,
) -> Iterator[_Hit]:
    """SQLite: the index's hits after ``past``, a page at a time, each ranking
    every message holding the words again and keeping the page's best."""
    drivers = []
    for keys in groups:
        driver = _rarest(conn, keys)
        if driver is not None:
            drivers.append((driver, [key for key in keys if key != driver]))
    if not drivers:
        return
    size = _FIRST_PAGE
    while True:
        held = itertools.chain.from_iterable(_holding(conn, holders, *w) for w in drivers)
        page = heapq.nsmallest(size, held if past is None else (h for h in held if h[:3] > past))
        yield from page
        if len(page) < size:
            return
        past = page[-1][:3]
        size = min(size * 8, _LARGEST_PAGE)


def _holding(conn: Connection, holders: _Holders, driver: str, others: list[str]) -> Iterator[_Hit]:
    """SQLite: the hits of each message holding ``driver`` and all ``others``."""
    statement = _SQLITE_ROWS[len(others)] if len(others) < 8 else _sqlite_rows(len(others))
    given = {f"w{n}": word for n, word in enumerate(others, 1)}
    for pk, session_id, forked, batch, blob, lengths, *held in statement.all(
        conn, driver=driver, lengths=LENGTHS, **given
    ):
        found = _capped(dict(unpack(blob, batch)))
        for row in held:
            more = _capped(dict(unpack(row, batch)))
            found = {seq: count + more[seq] for seq, count in found.items() if seq in more}
        sizes = dict(unpack(lengths, batch))
        for seq, count in found.items():
            if not sizes.get(seq):  # a length of 0 or none: no message of words
                continue
            negated = -score(count, sizes[seq])
            if forked or session_id is None:
                for holder, holder_id in holders.of(pk, seq):
                    yield negated, holder_id, seq, pk, holder, None
            else:
                yield negated, session_id, seq, pk, pk, None


def _capped(postings: dict[int, int]) -> dict[int, int]:
    """A word's ``{seq: hits}``, each counted `HITS_PER_WORD` times at most."""
    if postings and max(postings.values()) > HITS_PER_WORD:
        return {seq: min(count, HITS_PER_WORD) for seq, count in postings.items()}
    return postings


def _rarest(conn: Connection, keys: list[str]) -> str | None:
    """SQLite: the word held by the fewest messages; None when one is held by none."""
    if len(keys) == 1:
        return keys[0]
    counts = [(_SQLITE_PROBE.scalar(conn, word=key), key) for key in keys]
    fewest, key = min(counts)
    return key if fewest else None


def _unindexed(
    conn: Connection, wanted: Sequence[str], keys: list[str], sealer: Sealer | None
) -> Iterator[_Row]:
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
                yield -score(hits(found.hits, keys), found.length), pk, seq, entry
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
_POSTGRES_LINES = Query(
    text(
        "SELECT e.session_pk, e.seq, e.line FROM unnest(:pks, :seqs) AS k(pk, seq) "
        "JOIN entries AS e ON e.session_pk = k.pk AND e.seq = k.seq"
    ).bindparams(
        bindparam("pks", type_=ARRAY(BigInteger)), bindparam("seqs", type_=ARRAY(BigInteger))
    )
)


class _Fork(NamedTuple):
    pk: int
    id: str
    header: str
    base_seq: int


class _Holders:
    """The sessions holding each row, their headers and owners, and the
    messages of the rows, each read once per page."""

    def __init__(self, conn: Connection, sealer: Sealer | None) -> None:
        self._conn = conn
        self._sealer = sealer
        self._sessions: dict[int, tuple[str, str] | None] = {}
        self._forks: dict[int, list[_Fork]] = {}
        self._owners: dict[int, str | None] = {}
        self._lines: dict[tuple[int, int], str | bytes] = {}
        self._messages: dict[tuple[int, int], MessageEntry | None] = {}

    def read_ahead(self, hits: Sequence[_Hit]) -> None:
        """PostgreSQL, a round trip a statement: the sessions and lines of ``hits`` at once."""
        if self._conn.dialect.name != "postgresql":
            return
        pks = sorted({pk for hit in hits for pk in hit[3:5]} - self._sessions.keys())
        if pks:
            self._sessions.update(dict.fromkeys(pks))
            for pk, id_, header in _POSTGRES_SESSIONS.all(self._conn, pks=pks):
                self._sessions[pk] = (id_, header)
        rows = {(pk, seq) for _, _, seq, pk, _, entry in hits if entry is None}
        wanted = sorted(rows - self._messages.keys())
        if wanted:
            given = {"pks": [pk for pk, _ in wanted], "seqs": [seq for _, seq in wanted]}
            for pk, seq, line in _POSTGRES_LINES.all(self._conn, **given):
                self._lines[pk, seq] = line

    def message_at(self, pk: int, seq: int) -> MessageEntry | None:
        """The message of row ``(pk, seq)``; None when it does not decode (or open)."""
        if (pk, seq) not in self._messages:
            self._messages[pk, seq] = self._read_message(pk, seq)
        return self._messages[pk, seq]

    def _read_message(self, pk: int, seq: int) -> MessageEntry | None:
        line = self._lines.pop((pk, seq), None)
        if line is None:
            row = Q.LINES.first(self._conn, pk=pk, after=seq - 1, end=seq)
            line = row[1] if row is not None else None
        if line is not None and self._sealer is not None:
            own = self._session(pk)
            try:
                line = self._sealer.open("entry", own[0] if own else f"#{pk}", seq, line)
            except CorruptSessionError:
                return None
        return message_of(line) if line is not None else None

    def of(self, pk: int, seq: int) -> list[tuple[int, str]]:
        """``(key, id)`` of each session holding row ``(pk, seq)``, by id."""
        own = self._session(pk)
        found = [] if own is None else [(pk, own[0])]
        heirs = [fork for fork in self._forks_of(pk) if fork.base_seq >= seq]
        while heirs:
            fork = heirs.pop()
            found.append((fork.pk, fork.id))
            heirs.extend(self._forks_of(fork.pk))  # they share all their base shares
        return sorted(found, key=lambda holder: holder[1])

    def _session(self, pk: int) -> tuple[str, str] | None:
        if pk not in self._sessions:
            self._sessions[pk] = _SESSION.first(self._conn, pk=pk)
        return self._sessions[pk]

    def _forks_of(self, pk: int) -> list[_Fork]:
        if pk not in self._forks:
            rows = _FORKS.all(self._conn, pk=pk)
            # A base is older than its fork: a row written behind the
            # store's back cannot make a loop here.
            self._forks[pk] = [
                _Fork(fork, id_, header, base or 0) for fork, id_, header, base in rows if fork > pk
            ]
            for fork in self._forks[pk]:
                self._sessions.setdefault(fork.pk, (fork.id, fork.header))
        return self._forks[pk]

    def owner(self, pk: int) -> str | None:
        if pk not in self._owners:
            own = self._session(pk)
            self._owners[pk] = None
            if own is not None:
                try:
                    header = open_header(self._sealer, own[0], own[1], "sessions")
                    self._owners[pk] = read_stored_meta(header).owner
                except (InvalidRecordError, CorruptSessionError):
                    pass
        return self._owners[pk]
