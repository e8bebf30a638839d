"""Records to stored lines and back, as every backend stores them: checked
and encoded before anything is written, decoded naming the session, file and
line of a fault."""

from __future__ import annotations

import builtins
import hashlib
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Literal

from sessionstore.errors import (
    CorruptSessionError,
    EntryNotFoundError,
    InvalidRecordError,
    StreamingMessageError,
    validate_session_id,
)
from sessionstore.models import (
    CommentWrite,
    CompactionEntry,
    Erasure,
    JournalLine,
    MessageEntry,
    PostWrite,
    SessionEntry,
    SessionHeader,
    SessionMeta,
    TitleChange,
)
from sessionstore.timestamps import now_rfc3339
from sessionstore.wire import Record, decode_entry, decode_meta, encode, limits
from sessionstore.wire.limits import SURROGATE
from sessionstore.wire.stored import read_stored_meta, trusted_entry

__all__ = [
    "current_title",
    "decode_stored_entries",
    "decode_stored_entry",
    "decode_stored_meta",
    "encoded",
    "entry_lines",
    "erasure_of",
    "fork_point",
    "gathered_blocks",
    "header_line",
    "imported_entry",
    "imported_header",
    "journal_bytes",
    "journal_line",
    "lines_block",
    "lines_since_clear",
    "raw_journal_lines",
]


def lines_block(lines: Sequence[str]) -> bytes:
    """Lines as file bytes: UTF-8, each ending in a newline."""
    return ("\n".join(lines) + "\n").encode()


async def gathered_blocks(lines: AsyncIterator[str], size: int) -> AsyncIterator[bytes]:
    """``lines`` as file bytes in blocks of whole lines, each of about ``size`` bytes."""
    buffer: builtins.list[str] = []
    held = 0
    async for line in lines:
        buffer.append(line)
        held += len(line) + 1
        if held >= size:
            yield lines_block(buffer)
            buffer.clear()
            held = 0
    if buffer:
        yield lines_block(buffer)


def current_title(meta: SessionMeta, changes: Sequence[TitleChange]) -> str | None:
    """A session's title now: the last change's, else (none, or None) the header's."""
    last = changes[-1].title if changes else None
    return meta.title if last is None else last


def header_line(meta: SessionMeta) -> str:
    """The stored line of a header (no newline), after checking its id."""
    if not isinstance(meta, SessionMeta):
        raise InvalidRecordError(f"expected a SessionMeta, got {type(meta).__name__}")
    validate_session_id(meta.id)
    if meta.parent_session == meta.id:
        raise InvalidRecordError(f"session {meta.id!r} cannot be its own parent_session")
    return encoded(meta, f"session {meta.id!r}, header")


def encoded(record: Record, where: str) -> str:
    """`encode`, its refusal naming ``where`` and, for a lone surrogate, the field."""
    try:
        return encode(record)
    except InvalidRecordError as exc:
        # Only a record encoded whole holds a surrogate (surrogates are looked
        # for last), so its depth is bounded and the walk below cannot recurse
        # past it; a refusal on the way there (a value nested too deep) is final.
        surrogate = str(exc).startswith("lone surrogate")
        field = _surrogate_field(record.model_dump(by_alias=True), "") if surrogate else None
        if field is None:
            raise InvalidRecordError(f"{where}: {exc}") from None
        raise InvalidRecordError(
            f"{where}: {field} holds a lone surrogate, which UTF-8 cannot carry"
        ) from None


def _surrogate_field(value: object, path: str) -> str | None:
    """The path (``tags[0]``...) of the first key or string under ``value``
    holding a lone surrogate."""
    if isinstance(value, str):
        return (path or "text") if SURROGATE.search(value) else None
    if isinstance(value, dict):
        for key, item in value.items():
            inner = f"{path}.{key}" if path else str(key)
            if isinstance(key, str) and SURROGATE.search(key):
                return f"{path or 'a'} key {key!r}"
            found = _surrogate_field(item, inner)
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for number, item in enumerate(value):
            found = _surrogate_field(item, f"{path}[{number}]")
            if found is not None:
                return found
    return None


def entry_lines(session_id: str, entries: Sequence[SessionEntry]) -> builtins.list[str]:
    """The stored lines of entries, every one checked before the caller writes
    anything (which makes `append_many` all-or-nothing)."""
    lines = []
    for entry in entries:
        if isinstance(entry, MessageEntry):
            if entry.message.streaming:
                raise StreamingMessageError(session_id, entry.id)
        elif not isinstance(entry, CompactionEntry):
            raise InvalidRecordError(
                f"session {session_id!r}: expected a session entry, got {type(entry).__name__}"
            )
        where = f"session {session_id!r}, entry {entry.id!r}"
        line = encoded(entry, where)
        _refuse_long_line(line, where)
        lines.append(line)
    return lines


def _refuse_long_line(line: str, where: str) -> None:
    if len(line) * 4 <= limits.MAX_LINE:  # never past it, whatever its characters
        return
    size = len(line) if line.isascii() else len(line.encode())
    if size > limits.MAX_LINE:
        raise InvalidRecordError(
            f"{where}: a line of {size} bytes, longer than the limit of {limits.MAX_LINE}"
        )


def erasure_of(
    kind: Literal["session", "journal"], name: str, reason: str, blocks: Iterable[bytes], lines: int
) -> Erasure:
    """The record of erasing ``name``, whose file's bytes were ``blocks``."""
    digest = hashlib.blake2b(digest_size=32)
    for block in blocks:
        digest.update(block)
    return Erasure(
        kind=kind,
        name=name,
        at=now_rfc3339(),
        reason=reason,
        lines=lines,
        digest=digest.hexdigest(),
    )


def fork_point(source_id: str, at: str | None, entry_ids: Iterable[str]) -> int:
    """How many of the source's entries (``entry_ids``, read no further than
    needed) a fork keeps: up to the first whose id is ``at``, or all."""
    count = 0
    for count, entry_id in enumerate(entry_ids, 1):
        if entry_id == at:
            return count
    if at is None:
        return count
    raise EntryNotFoundError(source_id, at)


def imported_header(line: str) -> SessionMeta:
    """Check an imported header line as `create` checks a header."""
    try:
        meta = decode_meta(_one_line(line))
    except InvalidRecordError as exc:
        raise InvalidRecordError(f"header line: {exc}") from None
    validate_session_id(meta.id)
    if meta.parent_session == meta.id:
        raise InvalidRecordError(f"session {meta.id!r} cannot be its own parent_session")
    return meta


def imported_entry(session_id: str, number: int, line: str) -> SessionEntry:
    """Check an imported entry line (numbered from 1): one line that decodes.

    Read as stored lines are (`sessionstore.wire.stored`): the fast reader's
    answer where it is the strict decoder's, which reads every other line and
    says why one is refused."""
    try:
        entry = trusted_entry(_one_line(line))
        return entry if entry is not None else decode_entry(line)
    except InvalidRecordError as exc:
        raise InvalidRecordError(f"session {session_id!r}, entry {number}: {exc}") from None


def _one_line(line: str) -> str:
    if "\n" in line:
        raise InvalidRecordError("a stored line cannot contain a newline")
    return line


def journal_line(line: JournalLine) -> bytes:
    if not isinstance(line, SessionHeader | PostWrite | CommentWrite):
        raise InvalidRecordError(f"expected a journal line, got {type(line).__name__}")
    return encoded(line, "journal line").encode()


def raw_journal_lines(lines: Iterable[bytes]) -> builtins.list[bytes]:
    checked = [bytes(line) for line in lines]
    for line in checked:
        if b"\n" in line:
            raise InvalidRecordError("a journal line cannot contain a newline")
    return checked


def journal_bytes(lines: Iterable[bytes]) -> bytes:
    return b"".join(line + b"\n" for line in lines)


def lines_since_clear(rows: Iterable[bytes | None]) -> builtins.list[bytes]:
    """The lines after the last clear marker (None) of a journal's history."""
    current: builtins.list[bytes] = []
    for row in rows:
        if row is None:
            current.clear()
        else:
            current.append(row)
    return current


def decode_stored_meta(
    session_id: str, line: str | bytes, *, path: str | None, line_no: int
) -> SessionMeta:
    """Decode a stored header of ``session_id``; a fault is a `CorruptSessionError`."""
    try:
        meta = read_stored_meta(line)
    except InvalidRecordError as exc:
        raise CorruptSessionError(session_id, str(exc), path=path, line=line_no) from None
    if meta.id != session_id:
        raise CorruptSessionError(
            session_id, f"header names session {meta.id!r}", path=path, line=line_no
        )
    return meta


def decode_stored_entry(
    session_id: str, line: str | bytes, *, path: str | None, line_no: int
) -> SessionEntry:
    """Decode a stored entry (`sessionstore.wire.stored`, else the strict
    decoder); a fault is a `CorruptSessionError` naming ``path`` and ``line_no``."""
    try:
        entry = trusted_entry(line)
        return entry if entry is not None else decode_entry(line)
    except InvalidRecordError as exc:
        raise CorruptSessionError(session_id, str(exc), path=path, line=line_no) from None


def decode_stored_entries(
    session_id: str, rows: Iterable[tuple[int, str | bytes]], *, path: str | None
) -> builtins.list[SessionEntry]:
    """`decode_stored_entry` over ``(seq, line)`` rows, ``seq`` from 1 (the
    line is number ``seq + 1`` of the session's file, after its header)."""
    return [decode_stored_entry(session_id, line, path=path, line_no=seq + 1) for seq, line in rows]
