"""What the command line prints: tables and progress bars on a terminal, plain
text when piped; every string a user or a store supplied goes through `shown`
(docs/cli.md, "Output, errors and exit status", says what it escapes and why).
"""

from __future__ import annotations

import argparse
import re
import sys
import unicodedata
from collections.abc import Callable, Coroutine, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from rich.cells import cell_len
from rich.console import Console
from rich.text import Text

__all__ = [
    "Command",
    "Refused",
    "cell",
    "console",
    "counted",
    "err_console",
    "escaped",
    "literal",
    "marked",
    "moment",
    "preview",
    "progress_bar",
    "records",
    "shown",
    "size",
    "table",
    "tsv",
    "warn",
]

console = Console(highlight=False, soft_wrap=True, markup=False, emoji=False)
err_console = Console(stderr=True, highlight=False, soft_wrap=True, markup=False, emoji=False)

Command = Callable[[argparse.Namespace], Coroutine[Any, Any, int]]


class Refused(Exception):
    """The command line refuses what it was asked: one line on stderr, status 1."""


# Controls, format characters (bidi overrides, zero-width spaces), private use,
# lone surrogates, line and paragraph separators: written as escapes.
_HIDDEN = frozenset({"Cc", "Cf", "Co", "Cs", "Zl", "Zp"})

_SPACE = re.compile(r"\s")
_UTC = re.compile(r"(\d{4}-\d\d-\d\d)[Tt ](\d\d:\d\d:\d\d)(?:\.\d+)?(?:[Zz]|[+-]00:?00)")


class _Escapes:
    """A `str.translate` table writing `_HIDDEN` characters but ``kept`` as escapes."""

    def __init__(self, kept: str) -> None:
        self._kept = kept

    def __getitem__(self, code: int) -> str:
        char = chr(code)
        if char in self._kept or unicodedata.category(char) not in _HIDDEN:
            raise LookupError  # translate keeps the character as it is
        if code < 0x100:
            return f"\\x{code:02x}"
        return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def shown(text: str, *, kept: str = "") -> str:
    """``text`` safe to print: each `_HIDDEN` character but those in ``kept`` as an escape."""
    printable = text
    for char in kept:
        printable = printable.replace(char, "")
    if printable.isprintable():  # the usual case, checked at C speed
        return text
    return text.translate(_Escapes(kept))


def escaped(text: str) -> str:
    """A message on one line: a newline in a file name, an override in an id, as escapes."""
    return shown(text)


def cell(text: str) -> str:
    """Stored text on one line: runs of whitespace as one space, hidden characters escaped."""
    return shown(" ".join(text.split()))


def literal(text: str) -> str:
    """Stored text as it is, lines and tabs kept, other hidden characters escaped."""
    return shown(text, kept="\n\t")


def preview(text: str, width: int = 72) -> str:
    flat = cell(text)
    return flat if len(flat) <= width else flat[: max(width - 1, 0)] + "…"


def marked(text: str, spans: Sequence[tuple[int, int]], *, style: str = "bold") -> Text:
    """Stored text on one line, each whitespace a space, the ``(start, end)`` ``spans``
    styled (taken as far as they make sense: out of order, overlapping, outside)."""
    shown = Text()
    at = 0
    for start, end in sorted(spans):
        start, end = max(start, at), min(end, len(text))
        if start >= end:
            continue
        shown.append(_flat(text[at:start]))
        shown.append(_flat(text[start:end]), style=style)
        at = end
    return shown.append(_flat(text[at:]))


def _flat(text: str) -> str:
    return escaped(_SPACE.sub(" ", text))


def moment(stamp: str) -> str:
    """An RFC 3339 time in UTC as ``2026-05-01 12:03:04``; other text as `cell`, or ``-``."""
    found = _UTC.fullmatch(stamp)
    if found is None:
        return cell(stamp) or "-"
    return f"{found[1]} {found[2]}"


def counted(number: int, noun: str, plural: str | None = None) -> str:
    """``1 session``, ``2 sessions``."""
    return f"{number} {noun if number == 1 else plural or noun + 's'}"


def size(number: int) -> str:
    """``1.4 MB``: a size in bytes as a reader takes it in (powers of 1000)."""
    if number < 1000:
        return counted(number, "byte")
    value = float(number)
    for unit in ("kB", "MB", "GB"):
        value /= 1000
        if value < 1000:
            return f"{value:.1f} {unit}"
    return f"{value / 1000:.1f} TB"


def warn(message: str) -> None:
    err_console.print(Text(f"warning: {escaped(message)}"))


def tsv(row: Iterable[object]) -> None:
    sys.stdout.write("\t".join(cell(str(value)) for value in row) + "\n")


def _piped(columns: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    for row in [columns, *rows]:
        tsv(row)


def table(
    title: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[object]],
    *,
    whole: Sequence[str] = (),
    right: Sequence[str] = (),
) -> None:
    """A table on a terminal (the ``whole`` columns, ids to copy, never cut nor
    wrapped); tab-separated lines, header first, when piped."""
    if not console.is_terminal:
        return _piped(columns, rows)
    from rich import box  # rich's tables load only for a terminal
    from rich.table import Table

    grid = Table(title=Text(cell(title)), title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for at, column in enumerate(columns):
        longest = max((len(cell(str(row[at]))) for row in rows), default=0)
        grid.add_column(
            Text(column),
            no_wrap=column in whole,
            overflow="fold",
            min_width=longest if column in whole else None,
            justify="right" if column in right else "left",
        )
    for row in rows:
        grid.add_row(*(v if isinstance(v, Text) else Text(cell(str(v))) for v in row))
    console.print(grid, soft_wrap=False)


def records(
    title: str, columns: Sequence[str], rows: Sequence[Sequence[object]], *, head: str
) -> None:
    """Rows too wide for a table (a long key): on a terminal, each row's ``head``
    cell on a line of its own, never cut, its other cells but "-" named beneath it.
    Piped, as `table`."""
    if not console.is_terminal:
        return _piped(columns, rows)
    at = columns.index(head)
    console.print(Text(cell(title), style="bold"))
    for row in rows:
        # No line break of ours inside it: the terminal wraps a key longer
        # than a line itself, and a copy of it comes out whole.
        console.print(Text(cell(str(row[at]))), soft_wrap=True)
        named = [
            f"{column} {cell(str(value))}"
            for index, (column, value) in enumerate(zip(columns, row, strict=True))
            if index != at and str(value) != "-"
        ]
        for line in _lines(named, console.width):
            console.print(Text(line), overflow="fold", soft_wrap=False)


def _lines(named: Sequence[str], width: int) -> list[str]:
    """The ``name value`` cells on lines of ``width`` at most, each indented,
    broken between cells only: the terminal broke ``finished 2026-12-07
    00:47:58`` between its name and its value, or inside the time."""
    lines: list[str] = []
    for pair in named:
        if lines and cell_len(lines[-1]) + 2 + cell_len(pair) <= width:
            lines[-1] += "  " + pair
        else:
            lines.append("  " + pair)
    return lines


@contextmanager
def progress_bar(description: str) -> Iterator[Callable[[int, int], None]]:
    """A progress bar on a terminal, nothing when piped."""
    if not err_console.is_terminal:
        yield lambda done, total: None
        return
    from rich.progress import Progress  # loads only for a terminal

    with Progress(console=err_console, transient=True) as bar:
        task = bar.add_task(description, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update
