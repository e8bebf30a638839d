"""What serde_json allows, which both directions of the wire codec keep to."""

from __future__ import annotations

import re

from sessionstore.errors import InvalidRecordError

__all__ = ["I64_MIN", "MAX_DEPTH", "MAX_LINE", "SURROGATE", "U64_MAX", "refuse_long"]

I64_MIN = -(2**63)
U64_MAX = 2**64 - 1
"""Integers in I64_MIN..U64_MAX are integers to serde_json; others are floats."""

MAX_DEPTH = 127
"""serde_json refuses to enter a 128th nested array or object."""

MAX_LINE = 64 * 2**20
"""The longest line of a session (header or entry) the wire writes and
reads, in bytes (characters, for text): 64 MiB. A longer line is refused
before any parser is given it, by the decoders (a stored one is corrupt)
and by `append` alike, so a store never writes a line it would not read.
Read at each call: lowering it (a test) takes effect at once."""


def refuse_long(line: str | bytes | bytearray | memoryview, what: str = "line") -> None:
    """Refuse a line longer than `MAX_LINE`.

    Raises:
        InvalidRecordError: it is.
    """
    size = line.nbytes if isinstance(line, memoryview) else len(line)
    if size > MAX_LINE:
        unit = "characters" if isinstance(line, str) else "bytes"
        raise InvalidRecordError(f"a {what} of {size} {unit}, longer than the limit of {MAX_LINE}")


SURROGATE = re.compile("[\ud800-\udfff]")
"""A lone surrogate: text UTF-8 cannot carry."""
