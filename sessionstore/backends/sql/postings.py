"""SQLite's word index, ``search_postings``: how a word's messages are packed.

A row holds, for one word, session and batch (up to `BATCH` messages
indexed together, named by its first ``seq``), the messages holding the
word: for each, its ``seq`` less the one before (less ``batch`` for the
first) times two, plus one when the word occurs more than once there,
then how often; each an unsigned varint. The word `LENGTHS` holds each
message's length. A message costs a byte or two a word, not some 19 of a
row per word per message.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping

BATCH = 256  # a session's messages in a batch at most

LENGTHS = ""  # the word whose row holds each message's length (no word is empty)


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
    """The ``(seq, hits)`` a row's bytes hold; never raises on a raw writer's
    bytes, or a value that is no bytes (`wordcheck` names such a row)."""
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
    """The rows ``(word, session_pk, batch, postings)``, in key order, of
    messages ``(session_pk, seq, hits of each word, length)`` indexed together."""
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
