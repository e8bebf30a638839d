"""What a store backend is built from: `StoreBase`, and the helpers it shares.

A backend implements the core hooks (the abstract methods) and those of each
`Capability` it declares (`CAPABILITY_HOOKS`, checked when the class is
defined); the rest of `SessionStore` is built here on them, so the contract
is applied the same way everywhere. docs/writing-a-backend.md has the story.
"""

from __future__ import annotations

import abc
import builtins
import collections
import contextlib
import threading
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Callable, Sequence
from types import EllipsisType, TracebackType
from typing import TYPE_CHECKING, Any, ClassVar, Self, TypeVar

from sessionstore.backends.checks import (
    COUNT_MAX,
    JournalDurability,
    check_after,
    check_digest,
    check_expectations,
    check_fork,
    check_head,
    check_head_expectations,
    check_limit,
    check_reason,
    check_slice,
    check_text,
    checked_moves,
    checked_title_changes,
)
from sessionstore.backends.compaction import arrived_since, check_compaction, compaction_of
from sessionstore.backends.contexts import BuiltContext, built_from
from sessionstore.backends.cursors import listing_kind
from sessionstore.backends.journal_base import JournalBase
from sessionstore.backends.records import (
    current_title,
    decode_stored_entry,
    decode_stored_meta,
    encoded,
    gathered_blocks,
    header_line,
)
from sessionstore.backends.words import scan_search, search_hit, search_start, words
from sessionstore.context import repair_pairing
from sessionstore.errors import (
    CapabilityError,
    ClosedError,
    ConfigurationError,
    CorruptSessionError,
    InvalidRecordError,
    SessionConflictError,
    SessionNotFoundError,
    check_owner,
    validate_session_id,
)
from sessionstore.models import (
    CompactionEntry,
    Erasure,
    HeadMove,
    Message,
    SessionEntry,
    SessionMeta,
    TitleChange,
)
from sessionstore.pairing import PairingDialect, rules
from sessionstore.store import (
    Capability,
    EntrySlice,
    Order,
    SearchHit,
    SessionJournal,
    SessionStore,
    SessionSummary,
)

if TYPE_CHECKING:
    from sessionstore.scoped import ScopedStore

_T = TypeVar("_T")

__all__ = [
    "BLOCK",
    "CAPABILITY_HOOKS",
    "COMPACT_ATTEMPTS",
    "JournalBase",
    "StoreBase",
    "search_hit",
]

COMPACT_ATTEMPTS = 16  # how many times `compact` reads again after losing a race
BLOCK = 1 << 20  # bytes in a block of `raw_blocks`, about


# The methods a backend implements for each capability it declares.
CAPABILITY_HOOKS: dict[Capability, tuple[str, ...]] = {
    Capability.BRANCHES: ("_fork", "_set_head", "_head_history", "heads", "_import_head"),
    Capability.TITLES: ("_set_title", "_titles", "_import_titles"),
    Capability.SUMMARIES: ("_summaries",),
    Capability.ERASURE: ("_erase", "erasures"),
}


class StoreBase(SessionStore, abc.ABC):
    """The shared behaviour of store backends, a `SessionStore` (whose docstrings it shows)."""

    capabilities: ClassVar[frozenset[Capability]] = frozenset()  # beyond the core

    _closed: bool = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for capability in cls.capabilities:
            missing = [
                hook
                for hook in CAPABILITY_HOOKS[capability]
                if getattr(cls, hook) is getattr(StoreBase, hook)
            ]
            if missing:
                raise TypeError(
                    f"{cls.__name__} declares {capability} without implementing"
                    f" {', '.join(missing)}"
                )

    @abc.abstractmethod
    async def create(self, meta: SessionMeta) -> str: ...

    @abc.abstractmethod
    async def append_many(
        self,
        session_id: str,
        entries: Sequence[SessionEntry],
        *,
        expect_last: str | None = None,
        expect_head: str | None = None,
    ) -> None: ...

    @abc.abstractmethod
    async def load(self, session_id: str) -> builtins.list[SessionEntry]: ...

    @abc.abstractmethod
    async def list(self) -> builtins.list[SessionMeta]: ...

    @abc.abstractmethod
    def raw_lines(self, session_id: str) -> AsyncIterator[str]: ...

    @abc.abstractmethod
    async def import_session(
        self, header: str, entries: AsyncIterable[str], *, after: int | None = None
    ) -> int: ...

    @abc.abstractmethod
    def journal(self, name: str, *, durability: JournalDurability = "full") -> SessionJournal: ...

    @abc.abstractmethod
    async def journals(self) -> builtins.list[str]: ...

    # The hooks of each capability.

    async def _fork(self, source_id: str, at: str | None, meta: SessionMeta, header: str) -> None:
        raise self._lacking(Capability.BRANCHES, "fork")

    async def _set_head(
        self,
        name: str,
        move: HeadMove,
        expect: str | EllipsisType | None,
        expect_last: str | None,
    ) -> None:
        raise self._lacking(Capability.BRANCHES, "set_head")

    async def _head_history(self, name: str) -> builtins.list[HeadMove]:
        raise self._lacking(Capability.BRANCHES, "head_history")

    async def heads(self) -> builtins.list[str]:
        raise self._lacking(Capability.BRANCHES, "heads")

    async def _import_head(self, name: str, moves: builtins.list[HeadMove], after: int) -> None:
        raise self._lacking(Capability.BRANCHES, "import_head")

    async def _erase(self, session_id: str, reason: str, digest: str | None) -> Erasure:
        raise self._lacking(Capability.ERASURE, "erase")

    async def erasures(self) -> builtins.list[Erasure]:
        raise self._lacking(Capability.ERASURE, "erasures")

    async def _summaries(
        self, owner: str | None, order: Order, limit: int | None, after: str | None, kind: str
    ) -> builtins.list[SessionSummary]:
        raise self._lacking(Capability.SUMMARIES, "summaries")

    async def _set_title(self, session_id: str, change: TitleChange) -> None:
        raise self._lacking(Capability.TITLES, "set_title")

    async def _titles(self, session_id: str) -> builtins.list[TitleChange]:
        raise self._lacking(Capability.TITLES, "titles")

    async def _import_titles(
        self, session_id: str, changes: builtins.list[TitleChange], after: int
    ) -> int:
        raise self._lacking(Capability.TITLES, "import_titles")

    async def append(
        self,
        session_id: str,
        entry: SessionEntry,
        *,
        expect_last: str | None = None,
        expect_head: str | None = None,
    ) -> None:
        await self.append_many(
            session_id, (entry,), expect_last=expect_last, expect_head=expect_head
        )

    async def fork(
        self, source_id: str, *, at: str | None = None, meta: SessionMeta | None = None
    ) -> SessionMeta:
        self._require(Capability.BRANCHES, "fork")
        self._check(source_id)
        title = None  # the source's current title, given to the fork as a change of its own
        if meta is None:
            source = await self._meta(source_id)
            if Capability.TITLES in self.capabilities:
                title = current_title(source, await self._titles(source_id))
            # A header is the session's own: the source's title is the
            # source's record, not the fork's header.
            meta = SessionMeta.new(
                parent_session=source_id,
                owner=source.owner,
                tags=source.tags,
                metadata=source.metadata,
            )
        meta = check_fork(source_id, at, meta)
        await self._fork(source_id, at, meta, header_line(meta))
        if title is not None:
            await self._set_title(meta.id, TitleChange.new(meta.id, title))
        return meta

    async def erase(self, session_id: str, *, reason: str, digest: str | None = None) -> Erasure:
        self._require(Capability.ERASURE, "erase")
        check_reason(reason, session_id=session_id)
        check_digest(digest)
        self._check(session_id)
        return await self._erase(session_id, reason, digest)

    async def set_head(
        self,
        name: str,
        session_id: str,
        *,
        expect: str | EllipsisType | None = ...,
        expect_last: str | None = None,
    ) -> HeadMove:
        self._require(Capability.BRANCHES, "set_head")
        validate_session_id(name)
        self._check(session_id)
        check_head_expectations(name, expect, expect_last)
        move = HeadMove.new(session_id)
        await self._set_head(name, move, expect, expect_last)
        return move

    async def import_head(self, name: str, moves: Sequence[HeadMove], *, after: int = 0) -> int:
        self._require(Capability.BRANCHES, "import_head")
        validate_session_id(name)
        checked = checked_moves(name, moves)
        self._check_open(name)
        await self._import_head(name, checked, after)
        return len(checked)

    async def head(self, name: str) -> str | None:
        self._require(Capability.BRANCHES, "head")
        history = await self.head_history(name)
        return history[-1].session_id if history else None

    async def head_history(self, name: str) -> builtins.list[HeadMove]:
        self._require(Capability.BRANCHES, "head_history")
        validate_session_id(name)
        self._check_open(name)
        return await self._head_history(name)

    async def summaries(
        self,
        *,
        owner: str | None = None,
        order: Order = "last_activity",
        limit: int | None = 50,
        after: str | None = None,
    ) -> builtins.list[SessionSummary]:
        self._require(Capability.SUMMARIES, "summaries")
        if order not in ("last_activity", "created"):
            raise ConfigurationError(f"order must be 'last_activity' or 'created', not {order!r}")
        check_limit(limit, allow_none=True)
        check_owner(owner)
        check_after(after)
        self._check_open()
        limit = None if limit is None else min(limit, COUNT_MAX)
        kind = listing_kind("summaries", order, owner)
        return await self._summaries(owner, order, limit, after, kind)

    async def _summary(
        self, meta: SessionMeta, *, title: str | None, last_activity: str, cursor: str
    ) -> SessionSummary | None:
        """The summary of a session a scan found, read whole; None once erased."""
        try:
            entries, fault = await self.load(meta.id), None
        except CorruptSessionError as exc:
            entries, fault = await self._entries_before_fault(meta.id), str(exc)
        except SessionNotFoundError:
            return None
        return SessionSummary(
            meta=meta,
            entries=len(entries),
            last_timestamp=entries[-1].timestamp if entries else None,
            compacted=any(isinstance(e, CompactionEntry) for e in entries),
            fault=fault,
            title=title,
            last_activity=last_activity,
            cursor=cursor,
        )

    async def _meta(self, session_id: str) -> SessionMeta:
        lines = self.raw_lines(session_id)
        try:
            async for header in lines:
                return decode_stored_meta(session_id, header, path=None, line_no=1)
        finally:
            if isinstance(lines, AsyncGenerator):
                await lines.aclose()
        raise SessionNotFoundError(session_id)  # pragma: no cover (a header is always there)

    async def set_title(self, session_id: str, title: str | None) -> TitleChange:
        self._require(Capability.TITLES, "set_title")
        self._check(session_id)
        if title is not None and not isinstance(title, str):
            raise InvalidRecordError(f"a title is a string or None, not {title!r}")
        change = TitleChange.new(session_id, title)
        encoded(change, f"session {session_id!r}")  # refuses what a line cannot carry
        await self._set_title(session_id, change)
        return change

    async def titles(self, session_id: str) -> builtins.list[TitleChange]:
        self._require(Capability.TITLES, "titles")
        self._check(session_id)
        return await self._titles(session_id)

    async def import_titles(
        self, session_id: str, changes: Sequence[TitleChange], *, after: int = 0
    ) -> int:
        self._require(Capability.TITLES, "import_titles")
        self._check(session_id)
        checked = checked_title_changes(session_id, changes, after)
        return await self._import_titles(session_id, checked, after)

    async def search(
        self, text: str, *, owner: str | None = None, limit: int = 20, after: str | None = None
    ) -> builtins.list[SearchHit]:
        if not isinstance(text, str):
            raise ConfigurationError(f"search text must be a string, not {text!r}")
        check_text(text, "search text")
        check_owner(owner)
        check_limit(limit, allow_none=False)
        check_after(after)
        self._check_open()
        limit = min(limit, COUNT_MAX)
        wanted = builtins.list(dict.fromkeys(words(text)))
        kind = listing_kind("search", " ".join(wanted), owner)
        if not wanted:
            return []
        start = None if after is None else search_start(after, kind)
        return await self._search(wanted, owner, limit, start, kind)

    async def _search(
        self,
        wanted: builtins.list[str],
        owner: str | None,
        limit: int,
        start: tuple[float, str, int] | None,
        kind: str,
    ) -> builtins.list[SearchHit]:
        """Hits after ``start`` (a `words.rank_key`), from every message; SQL reads its index."""
        return await scan_search(self, wanted, owner, limit, start, kind)

    async def _entries_before_fault(self, session_id: str) -> builtins.list[SessionEntry]:
        """The entries of a session up to the first that does not decode."""
        read: builtins.list[SessionEntry] = []
        with contextlib.suppress(CorruptSessionError):
            async with contextlib.aclosing(self.iter_entries(session_id)) as stream:
                async for entry in stream:
                    read.append(entry)
        return read

    async def integrity(self) -> builtins.list[str]:
        self._check_open()
        return []

    def raw_blocks(self, session_id: str) -> AsyncIterator[bytes]:
        # `raw_lines` gathered into blocks of about `BLOCK` bytes.
        return gathered_blocks(self.raw_lines(session_id), BLOCK)

    async def load_slice(
        self,
        session_id: str,
        start: int = 0,
        stop: int | None = None,
        *,
        expect_head: str | None = None,
    ) -> EntrySlice:
        # Every line is read, only the slice's decoded; one from the end holds
        # no more lines than it returns.
        self._check(session_id)
        start, stop = check_slice(start, stop)
        self._check_expectations(None, expect_head, session_id=session_id, operation="load_slice")
        if expect_head is not None:
            check_head(expect_head, session_id, await self.head(expect_head), by="read")
        header_at, entries_at = self._locations(session_id)
        held: collections.deque[tuple[int, str]] = collections.deque(
            maxlen=-start if start < 0 else None
        )
        length = 0
        lines = self.raw_lines(session_id)
        try:
            async for line in lines:
                decode_stored_meta(session_id, line, path=header_at, line_no=1)
                break
            async for line in lines:
                if start < 0 or (start <= length and (stop is None or stop < 0 or length < stop)):
                    held.append((length, line))
                length += 1
        finally:
            if isinstance(lines, AsyncGenerator):  # close the file or cursor now
                await lines.aclose()
        first, end, _ = slice(start, stop).indices(length)
        entries = [
            decode_stored_entry(session_id, line, path=entries_at, line_no=position + 2)
            for position, line in held
            if first <= position < end
        ]
        return EntrySlice(entries, first, length)

    async def iter_entries(self, session_id: str) -> AsyncGenerator[SessionEntry, None]:
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

    async def load_context(
        self, session_id: str, *, repair: PairingDialect | None = None
    ) -> builtins.list[Message]:
        self._check(session_id)
        if repair is None:
            return builtins.list((await self._built_context(session_id)).messages)
        rules(repair)  # an unknown dialect is refused before storage is read
        messages = (await self._built_context(session_id)).messages
        return repair_pairing(messages, dialect=repair)

    async def load_context_with_ids(self, session_id: str) -> builtins.list[tuple[str, Message]]:
        self._check(session_id)
        built = await self._built_context(session_id)
        return builtins.list(zip(built.ids, built.messages, strict=True))

    async def compact(
        self,
        session_id: str,
        summary: str,
        *,
        keep_last: int,
        tokens_before: int | None = None,
        dialect: PairingDialect | None = None,
    ) -> CompactionEntry:
        self._check(session_id)
        check_compaction(summary, keep_last, tokens_before, dialect)
        check_text(summary, "summary", session_id=session_id)
        seen = built = await self._built_context(session_id)
        for attempt in range(1, COMPACT_ATTEMPTS + 1):
            # Messages appended since the first read are kept: the caller's
            # summary never saw them.
            keep = keep_last + arrived_since(session_id, seen, built)
            entry = compaction_of(
                built, summary, keep_last=keep, tokens_before=tokens_before, dialect=dialect
            )
            try:
                await self.append(session_id, entry, expect_last=built.last)
                return entry
            except SessionConflictError:
                if attempt == COMPACT_ATTEMPTS:
                    raise
            built = await self._built_context(session_id)
        raise AssertionError("unreachable")  # pragma: no cover

    def kept(self, owner: str, make: Callable[[], _T]) -> _T:
        """What a layer above (an adapter) keeps while this store object lives:
        ``make()`` at the first ask for ``owner``, then the same until `drop_caches`."""
        kept: dict[str, Any] = self.__dict__.setdefault("_kept_by_owner", {})
        lock: threading.Lock = self.__dict__.setdefault("_kept_lock", threading.Lock())
        with lock:
            if owner not in kept:
                kept[owner] = make()
            found: _T = kept[owner]
        return found

    def scoped(self, owner: str, *, remember: int = 0) -> ScopedStore:
        """This store as the one ``owner`` sees it (`sessionstore.scoped.ScopedStore`)."""
        from sessionstore.scoped import ScopedStore  # a view above the stores, loaded on use

        return ScopedStore(self, owner, remember=remember)

    def drop_caches(self) -> None:
        # A backend that caches more forgets it too, and calls this.
        self.__dict__.pop("_kept_by_owner", None)

    async def close(self) -> None:
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

    async def _built_context(self, session_id: str) -> BuiltContext[Any]:
        """The context of a (checked) session with its ids: the one read behind
        `load_context`, `load_context_with_ids` and `compact`, from a whole `load`."""
        return built_from(await self.load(session_id))

    def _locations(self, session_id: str) -> tuple[str | None, str | None]:
        """Where a session's header and entries are kept, for error messages."""
        return None, None

    def _check_open(self, session_id: str | None = None) -> None:
        if self._closed:
            raise ClosedError(f"{type(self).__name__} is closed", session_id=session_id)

    def _check(self, session_id: str) -> None:
        """Refuse an invalid id or a closed store, before storage is touched."""
        validate_session_id(session_id)
        self._check_open(session_id)

    def _check_expectations(
        self,
        expect_last: object,
        expect_head: object,
        *,
        session_id: str,
        operation: str = "append_many",
    ) -> None:
        """`check_expectations`, and refuse an ``expect_head`` without branches."""
        if expect_head is not None:
            self._require(Capability.BRANCHES, f"{operation}'s expect_head")
        check_expectations(expect_last, expect_head, session_id=session_id)

    def _require(self, capability: Capability, operation: str) -> None:
        if capability not in self.capabilities:
            raise self._lacking(capability, operation)

    def _lacking(self, capability: Capability, operation: str) -> CapabilityError:
        return CapabilityError(type(self).__name__, capability, operation)
