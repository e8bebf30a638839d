"""The fast reader of stored lines: what the strict decoder would read, quicker.

A stored line was checked by the strict decoder when it was written (or
imported), so it is read back with pydantic's own JSON parser, in one pass
and several times faster. That parser reads two things differently from
serde_json, and only numbers: ``-0`` (an integer 0 to pydantic, a float to
serde) and integers beyond i64..u64 (exact to pydantic, floats to serde).
Where a line could hold such a number, or the fast parser refuses it, the
strict decoder (`sessionstore.wire.decoding`) decides; the answer is always
the strict decoder's.
"""

from __future__ import annotations

import re

from pydantic import TypeAdapter, ValidationError

from sessionstore.models import CompactionEntry, MessageEntry, SessionEntry, SessionMeta
from sessionstore.wire.decoding import decode_entry, decode_meta
from sessionstore.wire.limits import I64_MIN, U64_MAX

__all__ = ["read_stored_entry", "read_stored_meta", "trusted_entry"]

_ENTRY: TypeAdapter[MessageEntry | CompactionEntry] = TypeAdapter(SessionEntry)

# ``-0`` as a whole number token. A match inside a string (``"x-0, y"``)
# only costs the fast path, never a wrong answer.
_NEGATIVE_ZERO = r"-0[,\]}\s]"
_NEGATIVE_ZERO_TEXT = re.compile(_NEGATIVE_ZERO)
_NEGATIVE_ZERO_BYTES = re.compile(_NEGATIVE_ZERO.encode())


def _no_negative_zero(line: str | bytes) -> bool:
    if isinstance(line, bytes):
        return _NEGATIVE_ZERO_BYTES.search(line) is None
    return _NEGATIVE_ZERO_TEXT.search(line) is None


def _same_numbers(value: object) -> bool:
    """Whether every integer in a decoded JSON value is one serde reads as an integer.

    Only the free-form JSON of a message (its content and extra fields) can
    hold another: the typed fields refuse it in both readers.
    """
    if type(value) is int:  # not bool
        return I64_MIN <= value <= U64_MAX
    if isinstance(value, list):
        return all(map(_same_numbers, value))
    if isinstance(value, dict):
        return all(map(_same_numbers, value.values()))
    return True


def read_stored_meta(line: str | bytes) -> SessionMeta:
    """Decode a stored header line.

    Raises:
        InvalidRecordError: the line is not a valid header.
    """
    try:
        meta = SessionMeta.model_validate_json(line)
    except ValidationError:
        return decode_meta(line)  # which says what is wrong
    # Its one number, ``version``, is 0 to pydantic when written ``-0``,
    # a float serde refuses: only then is the line searched.
    return meta if meta.version != 0 or _no_negative_zero(line) else decode_meta(line)


def trusted_entry(line: str | bytes) -> MessageEntry | CompactionEntry | None:
    """The entry pydantic's parser reads, when the strict decoder would read the same.

    Only a number can be read differently, and only where the entry holds
    one: a message's free-form JSON (content that is not a string, extra
    fields) or a compaction's ``tokens_before``. Other lines skip the search
    for ``-0``. None: ask the strict decoder.
    """
    try:
        entry = _ENTRY.validate_json(line)
    except ValidationError:
        return None
    if isinstance(entry, CompactionEntry):
        return None if entry.tokens_before == 0 and not _no_negative_zero(line) else entry
    message = entry.message
    extra = message.__pydantic_extra__
    if type(message.content) is str and not extra:
        return entry
    if not _no_negative_zero(line) or not _same_numbers(message.content):
        return None
    if extra and not _same_numbers(extra):
        return None
    return entry


def read_stored_entry(line: str | bytes) -> MessageEntry | CompactionEntry:
    """Decode a stored entry line, fast where that is exact.

    Raises:
        InvalidRecordError: the line is not a valid entry.
    """
    entry = trusted_entry(line)
    return entry if entry is not None else decode_entry(line)
