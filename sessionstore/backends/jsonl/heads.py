"""Named heads of the JSONL store: ``<dir>/heads/<name>.jsonl``, every move one line.

A log of `sessionstore.backends.jsonl.records`, its crash safety theirs; a
line that does not decode is a `CorruptSessionError` naming the head (as its
``session_id``), the file and the line.
"""

from __future__ import annotations

from pathlib import Path
from types import EllipsisType

from sessionstore.backends.checks import check_head
from sessionstore.backends.jsonl.file import SUFFIX, id_files
from sessionstore.backends.jsonl.records import append_lines, read_lines
from sessionstore.errors import (
    CorruptSessionError,
    InvalidRecordError,
    SessionConflictError,
)
from sessionstore.models import HeadMove
from sessionstore.wire import decode_head_move, encode

__all__ = [
    "HEADS",
    "append_move",
    "append_moves",
    "faults",
    "last_session",
    "names",
    "read_moves",
]

HEADS = "heads"
"""``<dir>/heads/<name>.jsonl``: the moves of the head ``name``."""


def append_move(
    name: str, path: Path, move: HeadMove, *, full: bool, expect: str | EllipsisType | None = ...
) -> None:
    """Append ``move`` to the head file ``path`` if the head stands at
    ``expect`` (`check_head`) under the file's lock."""

    def check(held: bytes) -> None:
        if expect is not ...:
            lines = held.split(b"\n")
            lines.pop()  # what follows the last newline: nothing
            check_head(name, expect, _last_session(name, path, lines))

    if isinstance(expect, str) and not path.exists():  # a head never set: no file made for it
        check_head(name, expect, None)
    append_lines(path, _lines([move]), full=full, what=f"head {name!r}", check=check)


def append_moves(
    name: str, path: Path, moves: list[HeadMove], *, full: bool, after: int | None = None
) -> None:
    """Append ``moves`` to the head file ``path`` in one write, all or none,
    if it holds ``after`` moves now (None: any number). No moves write
    nothing, not even a file: a head is listed once set, never by an empty
    import."""
    if not moves:
        held = len(read_moves(name, path))
        if after is not None and held != after:
            raise SessionConflictError(name, f"holds {held} positions, not {after}", "head")
        return

    def check(held: bytes) -> None:
        count = held.count(b"\n")
        if after is not None and count != after:
            raise SessionConflictError(name, f"holds {count} positions, not {after}", "head")

    append_lines(path, _lines(moves), full=full, what=f"head {name!r}", check=check)


def _lines(moves: list[HeadMove]) -> bytes:
    return "".join(encode(move) + "\n" for move in moves).encode()


def _decoded(name: str, path: Path, number: int, line: bytes) -> HeadMove:
    try:
        return decode_head_move(line)
    except InvalidRecordError as exc:
        raise CorruptSessionError(
            name, str(exc), path=str(path), line=number, what="head"
        ) from None


def last_session(name: str, path: Path) -> str | None:
    """The session the head file ``path`` names now; None if never set."""
    return _last_session(name, path, read_lines(path, what=f"head {name!r}"))


def _last_session(name: str, path: Path, lines: list[bytes]) -> str | None:
    """The session the last of a head file's complete ``lines`` names, only that one decoded."""
    return _decoded(name, path, len(lines), lines[-1]).session_id if lines else None


def read_moves(name: str, path: Path) -> list[HeadMove]:
    """The moves in the head file ``path``, oldest first (none without a file)."""
    lines = read_lines(path, what=f"head {name!r}")
    return [_decoded(name, path, number, line) for number, line in enumerate(lines, 1)]


def names(directory: Path) -> tuple[list[str], list[str]]:
    """The heads in the store ``directory``, and a fault for each file named like one."""

    return id_files(directory / HEADS, "head file", "not listed")


def faults(directory: Path) -> list[str]:
    """Files `names` cannot list, and lines that do not decode, each naming its file."""

    listed, found = names(directory)
    for name in listed:
        path = directory / HEADS / f"{name}{SUFFIX}"
        try:
            read_moves(name, path)
        except CorruptSessionError as exc:
            found.append(str(exc))
        except OSError as exc:
            found.append(f"{path}: {exc.strerror or exc}")
    return found
