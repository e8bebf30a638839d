"""`line_key`: the key a journal line is indexed under (docs/journal.md).

A journal line that is one JSON object whose top-level member ``"key"`` is
a string is a *keyed line*; every journal backend indexes it under that
key, whatever wrote it. The key is what the strict decoder reads there
(`sessionstore.wire.decoding`), so the index never disagrees with a record
decoded from the line: a line the strict decoder refuses (torn by a crash,
invalid UTF-8, ``NaN``, too deep, a lone surrogate) has no key, and
neither has one whose top level repeats ``"key"`` (a record decoder
refuses a repeated known field; the index does not guess which one counts).

Most journal lines hold no ``"key"`` at all: a line in which neither
``"key"`` nor an escape ``\\u`` appears (the name's only other spelling)
is answered without a parse.
"""

from __future__ import annotations

from sessionstore.errors import InvalidRecordError
from sessionstore.wire.decoding import _parse_json, _text_of

__all__ = ["line_key"]


def line_key(line: bytes | bytearray | memoryview) -> str | None:
    """The key a journal line is indexed under: its top-level ``"key"``, a string.

    Args:
        line: one journal line, without its newline.

    Returns:
        The key; None when the line is not one valid JSON object, has no
        top-level ``"key"``, has it more than once, or holds another value
        than a string there.
    """
    data = bytes(line)
    if b'"key"' not in data and b"\\u" not in data:
        return None
    try:
        value, repeats = _parse_json(_text_of(data))
    except InvalidRecordError:
        return None
    if not isinstance(value, dict):
        return None
    repeated = repeats.get(id(value))
    if repeated is not None and "key" in repeated[1]:
        return None
    key = value.get("key")
    return key if isinstance(key, str) else None
