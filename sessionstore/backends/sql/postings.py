"""SQLite's word index, ``search_postings``: how a word's messages are packed.

A row holds, for one word and one session, the messages of one batch that
hold the word (a batch: up to `BATCH` messages of a session indexed
together, `wordindex.catch_up`), its key ``(word, session_pk, batch)``,
``batch`` the first ``seq`` of the batch, and ``postings``: for each such message in ``seq``
order, its ``seq`` less the one before (less ``batch`` for the first)
times two, plus one when the word occurs more than once there, followed
then by how often (``hits``); each number an unsigned varint (7 bits a
byte, the high bit set on all but a number's last byte). The row of the
word ``""`` (no word is empty) holds each message's ``length`` in words
as its hits. Every word of a message is in a row of the same
``(session_pk, batch)``, so a message's other words, and its length, are
found at one key each.

A row per word per message cost some 19 bytes a word (the word, the key,
SQLite's record header and cell); packed, a message costs one or two
bytes a word, and a row's key is paid once per word of a batch.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping

__all__ = ["BATCH", "LENGTHS", "pack", "packed_rows", "unpack"]

BATCH = 256
"""A session's messages in a batch at most."""

LENGTHS = ""
"""The word whose row holds the length of each message of a batch."""


def _varint(out: bytearray, value: int) -> None:
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)


def pack(postings: Iterable[tuple[int, int]], batch: int) -> bytes:
    """``(seq, hits)`` of messages (in ``seq`` order, none before ``batch``)
    as a row's bytes."""
    out = bytearray()
    before = batch
    for seq, hits in postings:
        if hits == 1:
            _varint(out, (seq - before) << 1)
        else:
            _varint(out, (seq - before) << 1 | 1)
            _varint(out, hits)
        before = seq
    return bytes(out)


def unpack(blob: bytes, batch: int) -> Iterator[tuple[int, int]]:
    """The ``(seq, hits)`` a row's bytes hold. Bytes that are no postings (a
    row written behind the store's back) end it where they stop making
    sense, and a value that is no bytes (SQLite keeps what it is given: a
    text, a number) holds none: `wordcheck` names such a row, this never
    raises."""
    if not isinstance(blob, bytes) or not isinstance(batch, int):
        return
    seq = batch
    step: int | None = None  # a seq read, its hits still to come
    value = shift = 0
    for byte in blob:
        value |= (byte & 0x7F) << shift
        if byte & 0x80:
            shift += 7
            continue
        if step is not None:
            seq += step
            yield seq, value
            step = None
        elif value & 1:
            step = value >> 1
        else:
            seq += value >> 1
            yield seq, 1
        value = shift = 0


def packed_rows(
    messages: Iterable[tuple[int, int, Mapping[str, int], int]],
) -> list[tuple[str, int, int, bytes]]:
    """The rows of messages indexed together, ``(session_pk, seq, hits of
    each word, length)`` each: ``(word, session_pk, batch, postings)`` in key
    order, with the `LENGTHS` rows. A session's messages are cut into
    batches of `BATCH` (an import indexes thousands at once), each named by
    its first ``seq``: looking a message up decodes one batch at most."""
    words: dict[tuple[str, int, int], list[tuple[int, int]]] = defaultdict(list)
    pk_of_batch, batch, size = None, 0, 0
    for pk, seq, hits, length in sorted(messages, key=lambda message: message[:2]):
        if pk != pk_of_batch or size == BATCH:
            pk_of_batch, batch, size = pk, seq, 0
        size += 1
        words[LENGTHS, pk, batch].append((seq, length))
        for word, count in hits.items():
            words[word, pk, batch].append((seq, count))
    return sorted(
        (word, pk, batch, pack(postings, batch)) for (word, pk, batch), postings in words.items()
    )
