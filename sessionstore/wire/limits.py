"""What serde_json allows, which both directions of the wire codec keep to."""

from __future__ import annotations

import re

from sessionstore.errors import InvalidRecordError

__all__ = ["I64_MIN", "MAX_DEPTH", "MAX_LINE", "SURROGATE", "U64_MAX", "refuse_long"]

I64_MIN = -(2**63)  # integers in I64_MIN..U64_MAX are integers to serde_json; others floats
U64_MAX = 2**64 - 1

MAX_DEPTH = 127
"""serde_json refuses to enter a 128th nested array or object."""

MAX_LINE = 64 * 2**20
"""The longest line of a session (header or entry) the wire writes and
reads: 64 MiB, in bytes (characters, for text). Read at each call, so
lowering it (a test) takes effect at once."""


def refuse_long(line: str | bytes | bytearray | memoryview, what: str = "line") -> None:
    """Raise `InvalidRecordError` for a line longer than `MAX_LINE`."""
    size = line.nbytes if isinstance(line, memoryview) else len(line)
    if size > MAX_LINE:
        unit = "characters" if isinstance(line, str) else "bytes"
        raise InvalidRecordError(f"a {what} of {size} {unit}, longer than the limit of {MAX_LINE}")


SURROGATE = re.compile("[\ud800-\udfff]")  # a lone surrogate: text UTF-8 cannot carry
