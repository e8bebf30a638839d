"""How many entry rows to read, or write, at a time when streaming a session.

`ROWS` rows of a few hundred bytes are under a megabyte; of tools' outputs
of 64 KB, 128 MB, held at once: read, then joined into a block (an
export), or held with their columns until inserted (an import). So a page
holds about `BYTES` of lines at most too. An import's batch counts them;
a read, which cannot, asks for as many rows as the lines of the page
before say would fit, starting from `FIRST` rows. Where a session's lines
suddenly grow longer, one page may hold more than `BYTES`: as many rows
as the shorter lines before would fit in it.
"""

from __future__ import annotations

__all__ = ["BYTES", "FIRST", "ROWS", "next_rows"]

ROWS = 2000
"""Rows a page holds at most."""

BYTES = 1 << 20
"""Bytes of lines a page holds, about (as a block of the other backends'
`raw_blocks`): pages of lines over 500 bytes long hold fewer than `ROWS`."""

FIRST = 64
"""Rows of the first page read of a session, before its lines are seen."""


def next_rows(rows: int, size: int) -> int:
    """The rows of the next page, after one of ``rows`` rows holding ``size``
    bytes (or characters) of lines: about `BYTES` of lines like those."""
    return max(1, min(ROWS, rows * BYTES // max(size, 1)))
