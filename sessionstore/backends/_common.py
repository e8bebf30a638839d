"""What every backend shares: checks before storage, and the derived methods.

Backends subclass `StoreBase` (public as `sessionstore.backends.StoreBase`)
and implement `create`, `append_many`, `load`, `list`, `raw_lines`,
`import_session`, `journal`, `journals` and (when they hold resources)
`close`; `append`, `iter_entries`, `load_context`, `summaries`,
`integrity`, `raw_blocks` and the async context manager come from here, so
the contract's rules are applied the same way everywhere. A backend
overrides them where its storage can do better.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import gc
import re
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Iterator, Sequence
from types import TracebackType
from typing import Literal, Self

from pydantic import TypeAdapter, ValidationError

from sessionstore.context import build_context
from sessionstore.errors import (
    ConfigurationError,
    CorruptSessionError,
    InvalidRecordError,
    StorageError,
    StreamingMessageError,
    validate_session_id,
)
from sessionstore.models import CompactionEntry, Message, MessageEntry, SessionEntry, SessionMeta
from sessionstore.store import Entry, SessionSummary
from sessionstore.wire import decode_entry, decode_meta, encode

_ENTRY: TypeAdapter[Entry] = TypeAdapter(SessionEntry)
# ``-0`` as a whole number token: serde reads a float, pydantic an integer.
# A match inside a string (``"x-0, y"``) only costs the fast path.
_NEGATIVE_ZERO = r"-0[,\]}\s]"
_NEGATIVE_ZERO_TEXT, _NEGATIVE_ZERO_BYTES = (
    re.compile(_NEGATIVE_ZERO),
    re.compile(_NEGATIVE_ZERO.encode()),
)
_SERDE_INTS = range(-(2**63), 2**64)  # integers serde reads as integers, not floats


BLOCK = 1 << 20
"""Bytes in a block of `raw_blocks`, about."""

HEADERS_KEPT = 1 << 15
"""Decoded headers kept by `stored_header` (a few hundred bytes each)."""

Durability = Literal["normal", "full"]
"""What a committed write survives: a crash of the process, or a power loss."""


def check_durability(durability: object) -> None:
    """Refuse a durability level that is neither ``"normal"`` nor ``"full"``."""
    if durability not in ("normal", "full"):
        raise ConfigurationError(f"durability must be 'normal' or 'full', not {durability!r}")


class StoreBase:
    """Shared behaviour of the backends; see `SessionStore` for the contract."""

    _closed: bool = False

    async def append_many(self, session_id: str, entries: Sequence[Entry]) -> None:
        raise NotImplementedError

    async def load(self, session_id: str) -> builtins.list[Entry]:
        raise NotImplementedError

    async def list(self) -> builtins.list[SessionMeta]:
        raise NotImplementedError

    async def summaries(self) -> builtins.list[SessionSummary]:
        """Every session at a glance; see `SessionStore.summaries`."""
        result = []
        for meta in await self.list():
            entries = await self.load(meta.id)
            result.append(
                SessionSummary(
                    meta=meta,
                    entries=len(entries),
                    last_timestamp=entries[-1].timestamp if entries else None,
                    compacted=any(isinstance(e, CompactionEntry) for e in entries),
                )
            )
        return result

    async def integrity(self) -> builtins.list[str]:
        """Storage faults; none can exist beyond what `load` decodes here."""
        self._check_open()
        return []

    async def append(self, session_id: str, entry: Entry) -> None:
        """Append one entry; see `SessionStore.append`."""
        await self.append_many(session_id, (entry,))

    def raw_lines(self, session_id: str) -> AsyncIterator[str]:
        raise NotImplementedError

    async def raw_blocks(self, session_id: str) -> AsyncIterator[bytes]:
        """`raw_lines` gathered into blocks of about `BLOCK` bytes."""
        buffer: builtins.list[str] = []
        size = 0
        async for line in self.raw_lines(session_id):
            buffer.append(line)
            size += len(line) + 1
            if size >= BLOCK:
                yield lines_block(buffer)
                buffer.clear()
                size = 0
        if buffer:
            yield lines_block(buffer)

    def _locations(self, session_id: str) -> tuple[str | None, str | None]:
        """Where a session's header and entries are kept, for error messages."""
        return None, None

    async def iter_entries(self, session_id: str) -> AsyncGenerator[Entry, None]:
        """Stream a session's entries; see `SessionStore.iter_entries`.

        Built on `raw_lines`, which every backend streams in bounded memory;
        each line is decoded as `load` decodes it, numbered as in the
        session's file.
        """
        header_at, entries_at = self._locations(session_id)
        lines = self.raw_lines(session_id)
        try:
            async for line in lines:
                decode_stored_meta(session_id, line, path=header_at, line_no=1)
                break
            number = 1
            async for line in lines:
                number += 1
                yield decode_stored_entry(session_id, line, path=entries_at, line_no=number)
        finally:
            if isinstance(lines, AsyncGenerator):  # close the file or cursor now
                await lines.aclose()

    async def load_context(self, session_id: str) -> builtins.list[Message]:
        """The built context; see `SessionStore.load_context`."""
        return build_context(await self.load(session_id))

    async def close(self) -> None:
        """Close the store; see `SessionStore.close`."""
        self._closed = True

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    def _check_open(self, session_id: str | None = None) -> None:
        if self._closed:
            raise StorageError(f"{type(self).__name__} is closed", session_id=session_id)

    def _check(self, session_id: str) -> None:
        """Refuse an invalid id or a closed store, before storage is touched."""
        validate_session_id(session_id)
        self._check_open(session_id)


def lines_block(lines: Sequence[str]) -> bytes:
    """Lines as file bytes: UTF-8, each ending in a newline."""
    return ("\n".join(lines) + "\n").encode()


def header_line(meta: SessionMeta) -> str:
    """The stored line of a header (no newline), after checking its id."""
    if not isinstance(meta, SessionMeta):
        raise InvalidRecordError(f"expected a SessionMeta, got {type(meta).__name__}")
    validate_session_id(meta.id)
    return encode(meta)


def entry_lines(session_id: str, entries: Sequence[Entry]) -> builtins.list[str]:
    """The stored lines (no newline) of entries, refusing any that may not be stored.

    Every entry is checked before the caller writes anything, which is what
    makes `append_many` all-or-nothing.
    """
    lines = []
    for entry in entries:
        if isinstance(entry, MessageEntry):
            if entry.message.streaming:
                raise StreamingMessageError(session_id, entry.id)
        elif not isinstance(entry, CompactionEntry):
            raise InvalidRecordError(
                f"session {session_id!r}: expected a session entry, got {type(entry).__name__}"
            )
        try:
            lines.append(encode(entry))
        except InvalidRecordError as exc:
            raise InvalidRecordError(f"session {session_id!r}, entry {entry.id!r}: {exc}") from None
    return lines


def _fast(line: str | bytes) -> bool:
    """Whether pydantic's JSON parser may read this stored line (see `_same_numbers`)."""
    if isinstance(line, bytes):
        return _NEGATIVE_ZERO_BYTES.search(line) is None
    return _NEGATIVE_ZERO_TEXT.search(line) is None


def _same_numbers(value: object) -> bool:
    """Whether every integer in a decoded JSON value is one serde reads as an integer.

    Beyond i64..u64 serde reads a float, pydantic an exact integer. Only the
    free-form JSON of a message (its content and extra fields) can hold
    such a number: the typed fields refuse it in both readers.
    """
    if type(value) is int:  # not bool
        return value in _SERDE_INTS
    if isinstance(value, list):
        return all(map(_same_numbers, value))
    if isinstance(value, dict):
        return all(map(_same_numbers, value.values()))
    return True


@functools.lru_cache(maxsize=HEADERS_KEPT)
def stored_header(line: str | bytes) -> SessionMeta:
    """Decode a stored header line, fast when that is exact (see `decode_stored_entry`).

    Headers never change once stored, and `list` reads every one of them
    each time: the last `HEADERS_KEPT` decoded are kept, so listing a store
    again costs little more than reading its header lines.

    Raises:
        InvalidRecordError: the line is not a valid header.
    """
    try:
        meta = SessionMeta.model_validate_json(line)
    except ValidationError:
        return decode_meta(line)  # which says what is wrong
    # Its one number, ``version``, is 0 to pydantic when written ``-0``,
    # a float serde refuses: only then is the line searched.
    return meta if meta.version != 0 or _fast(line) else decode_meta(line)


def decode_stored_meta(
    session_id: str, line: str | bytes, *, path: str | None, line_no: int
) -> SessionMeta:
    """Decode a stored header, turning a refusal into `CorruptSessionError`."""
    try:
        meta = stored_header(line)
    except InvalidRecordError as exc:
        raise CorruptSessionError(session_id, str(exc), path=path, line=line_no) from None
    if meta.id != session_id:
        raise CorruptSessionError(
            session_id, f"header names session {meta.id!r}", path=path, line=line_no
        )
    return meta


def _trusted_entry(line: str | bytes) -> Entry | None:
    """The entry pydantic's parser reads, when the strict decoder would read the same.

    Only a number can be read differently, and only where the entry holds
    one: a message's free-form JSON (content that is not a string, extra
    fields) or a compaction's ``tokens_before`` (``-0`` is 0 to pydantic, a
    float serde refuses there). Other lines skip the search for ``-0``.
    """
    try:
        entry = _ENTRY.validate_json(line)
    except ValidationError:
        return None  # the strict decoder says what is wrong
    if isinstance(entry, CompactionEntry):
        return None if entry.tokens_before == 0 and not _fast(line) else entry
    message = entry.message
    if type(message.content) is str and not message.__pydantic_extra__:
        return entry
    if not _fast(line) or not _same_numbers(message.content):
        return None
    if message.__pydantic_extra__ and not _same_numbers(message.__pydantic_extra__):
        return None
    return entry


def decode_stored_entry(
    session_id: str, line: str | bytes, *, path: str | None, line_no: int
) -> Entry:
    """Decode a stored entry, turning a refusal into `CorruptSessionError`.

    Stored lines were checked by the strict decoder when they were written,
    so they are read back with pydantic's own JSON parser, in one pass and
    several times faster. Where that parser would read a value differently
    (``-0``, or an integer beyond i64..u64, both floats to serde) or
    refuses the line, the strict decoder decides.
    """
    entry = _trusted_entry(line)
    if entry is not None:
        return entry
    return _strict_entry(session_id, line, path=path, line_no=line_no)


def _strict_entry(session_id: str, line: str | bytes, *, path: str | None, line_no: int) -> Entry:
    """What the strict decoder reads, its refusal named as a `CorruptSessionError`."""
    try:
        return decode_entry(line)
    except InvalidRecordError as exc:
        raise CorruptSessionError(session_id, str(exc), path=path, line=line_no) from None


def decode_stored_entries(
    session_id: str, rows: Iterable[tuple[int, str | bytes]], *, path: str | None
) -> builtins.list[Entry]:
    """`decode_stored_entry` over ``(seq, line)`` rows, the collector held.

    ``seq`` counts entries from 1: the line is number ``seq + 1`` of the
    session's file, after its header.
    """
    decoded: builtins.list[Entry] = []
    with gc_paused():
        for seq, line in rows:
            entry = _trusted_entry(line)
            if entry is None:
                entry = _strict_entry(session_id, line, path=path, line_no=seq + 1)
            decoded.append(entry)
    return decoded


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Hold the cyclic garbage collector while a large load builds its records.

    A load makes two objects per entry, none in a reference cycle, so the
    collector finds nothing to free; left on, its passes over the growing
    heap took half the time of a 100,000-entry load. Reference counting
    still frees everything as usual.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def imported_header(line: str) -> SessionMeta:
    """Check an imported header line: one line, a valid header and id."""
    meta = decode_meta(_one_line(line))
    validate_session_id(meta.id)
    return meta


def imported_entry(line: str) -> Entry:
    """Check an imported entry line: one line that decodes (streaming kept)."""
    return decode_entry(_one_line(line))


def _one_line(line: str) -> str:
    if "\n" in line:
        raise InvalidRecordError("a stored line cannot contain a newline")
    return line
