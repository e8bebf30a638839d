"""The fast reader of stored lines: pydantic's JSON parser, its answer taken only
where the strict decoder's would be the same (docs/wire-format.md explains
when); the strict decoder reads every other line.
"""

from __future__ import annotations

import math
import re
from typing import Any

from pydantic import TypeAdapter, ValidationError

from sessionstore.errors import InvalidRecordError
from sessionstore.models import CompactionEntry, MessageEntry, SessionEntry, SessionMeta
from sessionstore.wire.decoding import _REFERENCE_HEADER, decode_entry, decode_meta
from sessionstore.wire.limits import I64_MIN, MAX_DEPTH, U64_MAX, refuse_long

__all__ = ["read_stored_entry", "read_stored_meta", "trusted_entry"]

_ENTRY: TypeAdapter[MessageEntry | CompactionEntry] = TypeAdapter(SessionEntry)

# pydantic's own validators, called without the wrappers of
# `TypeAdapter.validate_json` and `BaseModel.model_validate_json` (which
# only pass their defaults on): a quarter of a microsecond a line, about a
# twentieth of what a load of plain messages spends per entry.
_validate_entry = _ENTRY.validator.validate_json
_validate_meta = SessionMeta.__pydantic_validator__.validate_json

# ``-0`` as a whole number token. A match inside a string (``"x-0, y"``)
# only costs the fast path, never a wrong answer.
_NEGATIVE_ZERO = r"-0[,\]}\s]"
_NEGATIVE_ZERO_TEXT = re.compile(_NEGATIVE_ZERO)
_NEGATIVE_ZERO_BYTES = re.compile(_NEGATIVE_ZERO.encode())

# Containers a message's content or extra value may nest: the entry and the
# message are the first two of serde's 127 levels.
_FREE_DEPTH = MAX_DEPTH - 2


def _panicked(exc: BaseException, what: str) -> InvalidRecordError:
    """pydantic-core's panic (a `BaseException`) as the line's refusal; anything else re-raised."""
    if type(exc).__name__ != "PanicException":
        raise exc
    return InvalidRecordError(f"the {what} could not be parsed (pydantic-core panicked: {exc})")


def _no_negative_zero(line: str | bytes) -> bool:
    if isinstance(line, bytes):
        return _NEGATIVE_ZERO_BYTES.search(line) is None
    return _NEGATIVE_ZERO_TEXT.search(line) is None


def _quotes(line: str | bytes, hidden: bool) -> int:
    """The quotes of a line; -1 where ``hidden`` ones may be, as ``\\u0022`` escapes."""
    # Only a string whose own quotes are counted can hide one that way.
    if hidden and _hides_quote(line):
        return -1
    return line.count(b'"') if isinstance(line, bytes) else line.count('"')


def _hides_quote(line: str | bytes) -> bool:
    return b"\\u0022" in line if isinstance(line, bytes) else "\\u0022" in line


def _tally(values: list[Any]) -> tuple[int, int, bool] | None:
    """Strings, their inner quotes, and whether an integer 0 is among free-form JSON values.

    None where serde would read a value otherwise or refuse it (beyond
    i64..u64, not finite, too deep). Walked level by level: no recursion.
    """
    strings: list[str] = []
    zero = False
    level = values
    for room in range(_FREE_DEPTH, -1, -1):
        below: list[Any] = []
        for value in level:
            kind = type(value)
            if kind is str:
                strings.append(value)
            elif kind is dict:
                if not room:
                    return None
                strings.extend(value)
                below.extend(value.values())
            elif kind is list:
                if not room:
                    return None
                below.extend(value)
            elif kind is int:
                if not I64_MIN <= value <= U64_MAX:
                    return None
                zero = zero or value == 0
            elif kind is float and not math.isfinite(value):
                return None
        if not below:
            break
        level = below
    return len(strings), "".join(strings).count('"'), zero


def read_stored_meta(line: str | bytes) -> SessionMeta:
    """Decode a stored header line.

    Raises:
        InvalidRecordError: the line is not a valid header.
    """
    refuse_long(line, "session header")
    try:
        meta: SessionMeta = _validate_meta(line)
    except ValidationError:
        return decode_meta(line)  # which says what is wrong
    except BaseException as exc:
        raise _panicked(exc, "session header") from None
    # The keys the line gave (pydantic's defaults hide which), and the
    # strings id, created_at and parent_session: any other quote is another field.
    given = meta.__pydantic_fields_set__
    strings = len(given) + 1 + ("created_at" in given) + (meta.parent_session is not None)
    inner, zero = 0, meta.version == 0
    if not given <= _REFERENCE_HEADER:
        # This project's fields: their strings (tags, and metadata's keys
        # and strings at any depth) and the quotes inside them.
        ours = [value for value in (meta.title, meta.owner) if value is not None]
        tally = _tally([*ours, *meta.tags, meta.metadata])
        if tally is None:
            return decode_meta(line)  # which says what is wrong
        count, inner, zero = tally[0], tally[1], zero or tally[2]
        strings += count
    if _quotes(line, hidden=inner > 0) != 2 * strings + inner:
        return decode_meta(line)
    # A number the line writes ``-0`` (a float to serde, which refuses it
    # as ``version``) is 0 to pydantic: only then is the line searched.
    return meta if not zero or _no_negative_zero(line) else decode_meta(line)


def trusted_entry(line: str | bytes) -> MessageEntry | CompactionEntry | None:
    """The entry pydantic's parser reads, when the strict decoder would read the same.

    None: ask the strict decoder.

    Raises:
        InvalidRecordError: the line is longer than `MAX_LINE`, or the
            parser failed (a panic) instead of refusing it.
    """
    refuse_long(line, "session entry")
    try:
        entry: MessageEntry | CompactionEntry = _validate_entry(line)
    except ValidationError:
        return None
    except BaseException as exc:
        raise _panicked(exc, "session entry") from None
    # Strings: the keys the line gave (pydantic's defaults hide which), and
    # the string values of the record.
    given = len(entry.__pydantic_fields_set__) + (entry.parent_id is not None)
    # The validator builds these very classes: ``type`` tells them apart
    # without pydantic's ``isinstance``, several times slower when false.
    if type(entry) is CompactionEntry:
        # "compaction", id, timestamp, summary, first_kept_id
        strings = given + 5
        quotes = entry.summary.count('"')
        if _quotes(line, hidden=quotes > 0) != 2 * strings + quotes:
            return None
        return None if entry.tokens_before == 0 and not _no_negative_zero(line) else entry
    message = entry.message  # type: ignore[union-attr]  # a MessageEntry: not narrowed by type()
    extra = message.__pydantic_extra__
    content = message.content
    # "message", id, timestamp and role; the message's keys, extra ones too.
    strings = given + 4 + len(message.__pydantic_fields_set__)
    if type(content) is str and not extra:  # the common case, kept short
        least = 2 * (strings + 1)  # the line's quotes if the content has none
        found = line.count(b'"') if isinstance(line, bytes) else line.count('"')
        if found == least:
            # The quotes of the keys and strings alone: right only if the
            # content holds no quote (one written ``\u0022`` is not counted).
            # ``in`` finds one with memchr, several times quicker than a count.
            return None if '"' in content else entry
        # Otherwise it must hold the content's quotes too, none of them hidden.
        return None if found != least + content.count('"') or _hides_quote(line) else entry
    tally = _tally([content, *extra.values()] if extra else [content])
    if tally is None:
        return None
    free_strings, quotes, zero = tally
    if extra:  # their keys are counted above, but not their quotes
        quotes += "".join(extra).count('"')
    if _quotes(line, hidden=quotes > 0) != 2 * (strings + free_strings) + quotes:
        return None
    return None if zero and not _no_negative_zero(line) else entry


def read_stored_entry(line: str | bytes) -> MessageEntry | CompactionEntry:
    """Decode a stored entry line, fast where that is exact.

    Raises:
        InvalidRecordError: the line is not a valid entry.
    """
    entry = trusted_entry(line)
    return entry if entry is not None else decode_entry(line)
