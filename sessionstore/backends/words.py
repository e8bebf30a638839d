"""The words of full-text search, and the snippet a hit shows.

One rule for every backend, so that a search matches the same messages
everywhere: a message's text (`Message.text()`) is put in Unicode NFC form,
and its words are the maximal runs of letters and digits in it (an
underscore, a hyphen, an apostrophe or any other character separates them),
compared in lower case. A message matches when each word of the query is one
of its words. SQL backends index these words (`words`), never their
database's own idea of a word, and build the query from them too.

A message's words are those of the first `INDEXED_CHARS` characters of its
text (`message_words`): a word past them is not found, on any backend, and
indexing a message of hundreds of megabytes costs no more than one of a
few.

One ranking too, for every backend: hits come best `score` first, then by
session id (code point order), then by ``seq`` (`rank_key`, which a
search cursor holds). The scan backends compute it here; SQL ones from
their index, with the same `score`, and the contract suite checks their
order against this definition over random corpora.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

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
    "score",
    "snippet",
    "words",
]

INDEXED_CHARS = 1_000_000
"""Characters of a message's text that search finds words in, at most (the
first ones; a word the limit cuts is found as what comes before the cut)."""

_WORD = re.compile(r"[^\W_]+")
# ASCII text's words, in lower case, by ``str.translate`` then ``split``:
# every ASCII character but a letter or a digit becomes a space, and a
# capital its small letter (three times quicker than a regular expression).
_ASCII_WORDS = str.maketrans(
    {code: chr(code).lower() if chr(code).isalnum() else " " for code in range(128)}
)
_SPACE = re.compile(r"\s")
SNIPPET_WIDTH = 200
"""Characters of message text a snippet holds at most, about."""
_BEFORE = 60  # characters shown before the first match, about


def _normal(text: str) -> str:
    return unicodedata.normalize("NFC", text)


def words(text: str) -> list[str]:
    """The words of ``text``, in order, lower case (repeats kept)."""
    if text.isascii():  # NFC leaves it as it is, and lower case keeps letters letters
        return text.translate(_ASCII_WORDS).split()
    return [word.lower() for word in _WORD.findall(_normal(text))]


def message_words(text: str) -> list[str]:
    """The words search finds in a message of text ``text``: those of its
    first `INDEXED_CHARS` characters."""
    return words(indexed_text(text))


def indexed_text(text: str) -> str:
    """The part of a message's text search finds words in: its first
    `INDEXED_CHARS` characters."""
    return text[:INDEXED_CHARS] if len(text) > INDEXED_CHARS else text


def matches(found: Iterable[str], wanted: Iterable[str]) -> bool:
    """Whether every wanted word is among the words found."""
    have = set(found)
    return all(word in have for word in wanted)


HITS_PER_WORD = 256
"""Occurrences of one query word that a message's score counts at most
(PostgreSQL's ``tsvector`` keeps 256 positions of a word)."""


def hits(counts: Mapping[str, int], wanted: Iterable[str]) -> int:
    """The occurrences of the ``wanted`` words (each once in it) in a message
    whose words occur ``counts`` times, each counted `HITS_PER_WORD` times
    at most."""
    return sum(min(counts.get(word, 0), HITS_PER_WORD) for word in wanted)


def score(hits: int, length: int) -> float:
    """How well a message of ``length`` words answers a query whose words
    occur ``hits`` times in it (`hits`): ``hits * hits / length``, the
    square of hits over the square root of the length (the same order, no
    square root to compute). One division of two exact integers, correctly
    rounded: Python, SQLite and PostgreSQL compute the same float."""
    return hits * hits / length


def message_score(found: list[str], wanted: Iterable[str]) -> float:
    """The `score` of a message whose words are ``found`` (repeats kept)."""
    return score(hits(Counter(found), wanted), len(found)) if found else 0.0


def rank_key(score: float, session_id: str, seq: int) -> tuple[float, str, int]:
    """Where a hit ranks, on every backend: the smaller key first (best
    score, then session id, then ``seq``); unique to a hit."""
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
    """The part of ``text`` to show for a hit: from a little before the first
    matched word, about ``width`` characters, each matched word highlighted."""
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
    """A start at or after ``at`` that does not cut a word."""
    space = text.find(" ", at, at + 20)
    return space + 1 if space >= 0 else at
