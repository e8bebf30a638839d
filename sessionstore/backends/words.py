"""The words of full-text search, the ranking of its hits and the snippet a hit shows.

One rule for every backend (docs/browse.md, "Search"): a message's words are
the maximal runs of letters and digits of its NFC text, in lower case, found
in its first `INDEXED_CHARS` characters; a message matches when each word of
the query is one of its words. Hits rank by `rank_key`, from `score`. SQL
backends index these words and compute the same score; the others read
every message (`scan_search`).
"""

from __future__ import annotations

import contextlib
import heapq
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from sessionstore.backends.cursors import Cursor
from sessionstore.errors import CorruptSessionError, InvalidCursorError, SessionNotFoundError
from sessionstore.models import MessageEntry
from sessionstore.store import CoreStore, SearchHit

__all__ = [
    "HITS_PER_WORD",
    "INDEXED_CHARS",
    "SNIPPET_WIDTH",
    "Snippet",
    "hits",
    "indexed_text",
    "matches",
    "message_score",
    "message_words",
    "rank_key",
    "scan_search",
    "score",
    "search_hit",
    "search_start",
    "snippet",
    "words",
]

INDEXED_CHARS = 1_000_000
"""Characters of a message's text search finds words in (the first ones): a
word past them is not found, and indexing a huge message costs no more."""

_WORD = re.compile(r"[^\W_]+")
# ASCII text's words, in lower case, by ``str.translate`` then ``split``:
# every ASCII character but a letter or a digit becomes a space, and a
# capital its small letter (three times quicker than a regular expression).
_ASCII_WORDS = str.maketrans(
    {code: chr(code).lower() if chr(code).isalnum() else " " for code in range(128)}
)
_SPACE = re.compile(r"\s")
SNIPPET_WIDTH = 200  # characters of message text a snippet holds at most, about
_BEFORE = 60  # characters shown before the first match, about


def _normal(text: str) -> str:
    return unicodedata.normalize("NFC", text)


def words(text: str) -> list[str]:
    """The words of ``text``, in order, lower case (repeats kept)."""
    if text.isascii():  # NFC leaves it as it is, and lower case keeps letters letters
        return text.translate(_ASCII_WORDS).split()
    return [word.lower() for word in _WORD.findall(_normal(text))]


def message_words(text: str) -> list[str]:
    """The words of a message's first `INDEXED_CHARS` characters."""
    return words(indexed_text(text))


def indexed_text(text: str) -> str:
    return text[:INDEXED_CHARS] if len(text) > INDEXED_CHARS else text


def matches(found: Iterable[str], wanted: Iterable[str]) -> bool:
    have = set(found)
    return all(word in have for word in wanted)


HITS_PER_WORD = 256  # occurrences of a word a score counts (PostgreSQL's tsvector keeps 256)


def hits(counts: Mapping[str, int], wanted: Iterable[str]) -> int:
    """The occurrences of the (distinct) ``wanted`` words among ``counts``,
    each counted `HITS_PER_WORD` times at most."""
    return sum(min(counts.get(word, 0), HITS_PER_WORD) for word in wanted)


def score(hits: int, length: int) -> float:
    """How well a message of ``length`` words answers a query whose words occur
    ``hits`` times in it: hits over the square root of the length, squared
    (the same order). One correctly rounded division of two integers, so
    Python, SQLite and PostgreSQL compute the same float."""
    return hits * hits / length


def message_score(found: list[str], wanted: Iterable[str]) -> float:
    """The `score` of a message whose words are ``found`` (repeats kept)."""
    return score(hits(Counter(found), wanted), len(found)) if found else 0.0


def rank_key(score: float, session_id: str, seq: int) -> tuple[float, str, int]:
    """Where a hit ranks, the smaller first: best score, session id, ``seq``."""
    return -score, session_id, seq


@dataclass(frozen=True)
class Snippet:
    """A stretch of a message's text around what matched.

    Attributes:
        text: the stretch, whitespace shown as spaces, ``…`` where cut.
        highlights: ``(start, end)`` of each matched word in ``text``.
    """

    text: str
    highlights: tuple[tuple[int, int], ...]


def snippet(text: str, wanted: Iterable[str], width: int = SNIPPET_WIDTH) -> Snippet:
    """About ``width`` characters of ``text`` from a little before the first
    matched word, each matched word highlighted."""
    longer = len(text) > INDEXED_CHARS + width  # what matched is in its indexed part
    text = _normal(text[: INDEXED_CHARS + width] if longer else text)
    want = set(wanted)
    found = [m.span() for m in _WORD.finditer(text[:INDEXED_CHARS]) if m.group().lower() in want]
    first = found[0][0] if found else 0
    start = 0 if first <= _BEFORE else _start_near(text, first - _BEFORE)
    end = min(len(text), start + width)
    if end < len(text):
        space = text.rfind(" ", start + width // 2, end)
        end = space if space > 0 else end
    lead = "…" if start > 0 else ""
    body = _SPACE.sub(" ", text[start:end])
    shown = lead + body + ("…" if end < len(text) or longer else "")
    shift = len(lead) - start
    spans = tuple((a + shift, min(b, end) + shift) for a, b in found if start <= a < end)
    return Snippet(text=shown, highlights=spans)


def _start_near(text: str, at: int) -> int:
    space = text.find(" ", at, at + 20)
    return space + 1 if space >= 0 else at


def search_start(cursor: str, kind: str) -> tuple[float, str, int]:
    """The `rank_key` of the hit a search's ``cursor`` (of ``kind``) stands on.

    Raises:
        InvalidCursorError: it holds no hit's key.
    """
    key = Cursor.decode(cursor, kind, length=3).key
    try:
        found = float(key[0])
    except ValueError:
        found = math.nan
    if not (math.isfinite(found) and found > 0 and key[2].isdigit()):
        raise InvalidCursorError(f"not a cursor: {cursor!r}")
    return rank_key(found, key[1], int(key[2]))


async def scan_search(
    store: CoreStore,
    wanted: list[str],
    owner: str | None,
    limit: int,
    start: tuple[float, str, int] | None,
    kind: str,
) -> list[SearchHit]:
    """`SessionStore.search` of checked arguments by reading every message,
    after the hit of `rank_key` ``start``: a session that does not decode is
    searched up to its fault, one erased meanwhile is skipped."""
    found: list[tuple[float, str, int, MessageEntry]] = []
    for meta in await store.list():
        if owner is not None and meta.owner != owner:
            continue
        with contextlib.suppress(CorruptSessionError, SessionNotFoundError):
            async with contextlib.aclosing(store.iter_entries(meta.id)) as entries:
                seq = 0
                async for entry in entries:
                    seq += 1
                    if not isinstance(entry, MessageEntry):
                        continue
                    text_words = message_words(entry.message.text())
                    if matches(text_words, wanted):
                        hit = (*rank_key(message_score(text_words, wanted), meta.id, seq), entry)
                        if start is None or hit[:3] > start:
                            found.append(hit)
        found = heapq.nsmallest(limit, found, key=lambda hit: hit[:3])
    return [
        search_hit(session_id, seq, entry, wanted, kind, (repr(-negated), session_id, str(seq)))
        for negated, session_id, seq, entry in found
    ]


def search_hit(
    session_id: str,
    seq: int,
    entry: MessageEntry,
    wanted: Sequence[str],
    kind: str,
    key: tuple[str, ...],
) -> SearchHit:
    """A `SearchHit` for message ``entry``: its snippet around the ``wanted``
    words, and a cursor of ``kind`` standing on ``key`` (the backend's order)."""
    shown = snippet(entry.message.text(), wanted)
    return SearchHit(
        session_id=session_id,
        entry_id=entry.id,
        seq=seq,
        role=entry.message.role,
        snippet=shown.text,
        highlights=shown.highlights,
        cursor=Cursor(kind, "", key).encode(),
    )
