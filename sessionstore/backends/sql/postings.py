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
    append = out.append
    before = batch
    for seq, hits in postings:
        step = (seq - before) << 1
        before = seq
        # Most values fit a byte: appended here, not in a call to `_varint`.
        if hits == 1:
            if step < 0x80:
                append(step)
            else:
                _varint(out, step)
        elif step < 0x80 and hits < 0x80:
            append(step | 1)
            append(hits)
        else:
            _varint(out, step | 1)
            _varint(out, hits)
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
    made: list[tuple[str, int, int, bytes]] = []
    pk_of_batch: int | None = None
    batch = size = 0
    words: dict[str, list[tuple[int, int]]] = {}
    lengths: list[tuple[int, int]] = []
    for pk, seq, hits, length in sorted(messages, key=_message_key):
        if pk != pk_of_batch or size == BATCH:
            if pk_of_batch is not None:
                _batch_rows(made, words, pk_of_batch, batch)
            pk_of_batch, batch, size = pk, seq, 0
            lengths = []
            words = {LENGTHS: lengths}
        size += 1
        lengths.append((seq, length))
        for word, count in hits.items():
            found = words.get(word)
            if found is None:
                words[word] = [(seq, count)]
            else:
                found.append((seq, count))
    if pk_of_batch is not None:
        _batch_rows(made, words, pk_of_batch, batch)
    # Made in (session_pk, batch) order: a stable sort by word alone (of
    # strings, which sorts quickest) leaves them in key order.
    made.sort(key=_word)
    return made


def _message_key(message: tuple[int, int, Mapping[str, int], int]) -> tuple[int, int]:
    return message[0], message[1]


def _word(row: tuple[str, int, int, bytes]) -> str:
    return row[0]


# The postings of a word held once, by a message a step of less than 64
# into its batch: most rows of a batch of varied messages.
_ONE_BYTE = tuple(bytes((value,)) for value in range(0, 0x80, 2))


def _batch_rows(
    made: list[tuple[str, int, int, bytes]],
    words: Mapping[str, list[tuple[int, int]]],
    pk: int,
    batch: int,
) -> None:
    for word, postings in words.items():
        if len(postings) == 1:
            seq, hits = postings[0]
            if hits == 1 and seq - batch < len(_ONE_BYTE):
                made.append((word, pk, batch, _ONE_BYTE[seq - batch]))
                continue
        made.append((word, pk, batch, pack(postings, batch)))
