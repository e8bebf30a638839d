"""What a backend is built from: the abstract bases, and the helpers they share.

A store backend subclasses `StoreBase` and implements its core hooks, the
abstract methods (`create`, `append_many`, `load`, `list`, `raw_lines`,
`import_session`, `journal`, `journals`, and `close` when it holds
resources). Each `Capability` it lists in `StoreBase.capabilities` needs
the hooks `CAPABILITY_HOOKS` names, checked when the class is defined; an
operation of a capability it does not list raises `CapabilityError`.
Everything else in the `SessionStore` protocol comes from here, built on
those, so the contract's rules (stated in `sessionstore.store`, and only
there) are applied the same way everywhere; a backend overrides a derived
method where its storage can do better (`_built_context`, the one read
behind `load_context`, `load_context_with_ids` and `compact`; `_search`,
with an index). A journal backend subclasses `JournalBase`
(`sessionstore.backends.journal_base`) likewise.

Beside them, what every backend shares: the checks of a store's arguments
(`sessionstore.backends.checks`), and records to stored lines and back
(`sessionstore.backends.records`). `sessionstore.testing` proves a
backend against the contract.
"""

from __future__ import annotations

import abc
import builtins
import collections
import heapq
import re
import threading
from collections.abc import (
    AsyncGenerator,
    AsyncIterable,
    AsyncIterator,
    Callable,
    Sequence,
)
from types import EllipsisType, TracebackType
from typing import Any, ClassVar, Self, TypeVar

from sessionstore.backends.checks import (
    COUNT_MAX,
    JournalDurability,
    check_after,
    check_expect_last,
    check_expectations,
    check_limit,
    check_owner,
    check_reason,
    check_slice,
    check_text,
)
from sessionstore.backends.compaction import arrived_since, check_compaction, compaction_of
from sessionstore.backends.contexts import BuiltContext, built_from
from sessionstore.backends.cursors import Cursor, listing_kind
from sessionstore.backends.journal_base import JournalBase
from sessionstore.backends.records import (
    current_title,
    decode_stored_entry,
    decode_stored_meta,
    encoded,
    header_line,
    lines_block,
)
from sessionstore.backends.words import (
    matches,
    message_score,
    message_words,
    rank_key,
    snippet,
    words,
)
from sessionstore.context import repair_pairing
from sessionstore.errors import (
    CapabilityError,
    ClosedError,
    ConfigurationError,
    CorruptSessionError,
    DuplicateSessionError,
    InvalidCursorError,
    InvalidRecordError,
    SessionConflictError,
    SessionNotFoundError,
    validate_session_id,
)
from sessionstore.models import (
    CompactionEntry,
    Erasure,
    HeadMove,
    Message,
    MessageEntry,
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
    SessionSummary,
)

_T = TypeVar("_T")

__all__ = [
    "BLOCK",
    "CAPABILITY_HOOKS",
    "COMPACT_ATTEMPTS",
    "JournalBase",
    "StoreBase",
    "search_hit",
]

COMPACT_ATTEMPTS = 16
"""How many times `StoreBase.compact` reads again after losing a race with an append."""

BLOCK = 1 << 20
"""Bytes in a block of `StoreBase.raw_blocks`, about."""


CAPABILITY_HOOKS: dict[Capability, tuple[str, ...]] = {
    Capability.BRANCHES: ("_fork", "_set_head", "_head_history", "heads", "_import_head"),
    Capability.TITLES: ("_set_title", "_titles", "_import_titles"),
    Capability.SUMMARIES: ("_summaries",),
    Capability.ERASURE: ("_erase", "erasures"),
}
"""The methods a backend implements for each capability it declares."""


class StoreBase(abc.ABC):
    """The shared behaviour of store backends; see `SessionStore` for the contract."""

    capabilities: ClassVar[frozenset[Capability]] = frozenset()
    """The capabilities the backend declares: none but the core here."""

    _closed: bool = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Refuse a class that declares a capability without its hooks."""
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

    # ------------------------------------------------ the core a backend implements

    @abc.abstractmethod
    async def create(self, meta: SessionMeta) -> str:
        """Create a session; see `SessionStore.create`."""

    @abc.abstractmethod
    async def append_many(
        self,
        session_id: str,
        entries: Sequence[SessionEntry],
        *,
        expect_last: str | None = None,
        expect_head: str | None = None,
    ) -> None:
        """Append a turn, all or none, if the session ends at ``expect_last``
        (`check_last`) and the head ``expect_head`` names it (`check_head`
        with ``by="append"``), checked in the write's own step; see
        `SessionStore.append_many`. Refuse bad expectations first
        (`check_expectations`)."""

    @abc.abstractmethod
    async def load(self, session_id: str) -> builtins.list[SessionEntry]:
        """Every entry; see `SessionStore.load`."""

    @abc.abstractmethod
    async def list(self) -> builtins.list[SessionMeta]:
        """Every header; see `SessionStore.list`."""

    @abc.abstractmethod
    def raw_lines(self, session_id: str) -> AsyncIterator[str]:
        """The stored lines, streamed; see `SessionStore.raw_lines`."""

    @abc.abstractmethod
    async def import_session(
        self, header: str, entries: AsyncIterable[str], *, after: int | None = None
    ) -> int:
        """Store lines verbatim, all or none; see `SessionStore.import_session`."""

    @abc.abstractmethod
    def journal(self, name: str, *, durability: JournalDurability = "full") -> SessionJournal:
        """A journal kept in this store; see `SessionStore.journal`."""

    @abc.abstractmethod
    async def journals(self) -> builtins.list[str]:
        """The journals holding lines; see `SessionStore.journals`."""

    # ------------------------------------------------ the hooks of each capability

    async def _fork(self, source_id: str, at: str | None, meta: SessionMeta, header: str) -> None:
        """Create the fork ``meta`` (its stored line ``header``, checked) of
        ``source_id`` up to the first entry ``at`` (None: all), all or nothing;
        see `SessionStore.fork`."""
        raise self._lacking(Capability.BRANCHES, "fork")

    async def _set_head(
        self,
        name: str,
        move: HeadMove,
        expect: str | EllipsisType | None,
        expect_last: str | None,
    ) -> None:
        """Record ``move`` as the head's newest position, if its session exists,
        the head stands at ``expect`` (unless ``...``: `check_head`) and, with
        ``expect_last``, the session ``expect`` names ends there
        (`check_last`), all checked (that session before the head) and
        recorded at once; see `SessionStore.set_head`."""
        raise self._lacking(Capability.BRANCHES, "set_head")

    async def _head_history(self, name: str) -> builtins.list[HeadMove]:
        """Every position of the head ``name`` (checked), oldest first."""
        raise self._lacking(Capability.BRANCHES, "head_history")

    async def heads(self) -> builtins.list[str]:
        """Every head's name; see `SessionStore.heads`."""
        raise self._lacking(Capability.BRANCHES, "heads")

    async def _import_head(self, name: str, moves: builtins.list[HeadMove], after: int) -> None:
        """Record ``moves`` (checked) after the first ``after`` positions of the
        head ``name``, once every move's session is found and the head holds
        ``after`` positions, all or nothing; see `SessionStore.import_head`."""
        raise self._lacking(Capability.BRANCHES, "import_head")

    async def _erase(self, session_id: str, reason: str, digest: str | None) -> Erasure:
        """Remove the session (its id and reason checked) and record it, all
        or nothing, if its bytes still have ``digest`` (when given: compare
        with `check_unchanged`); see `SessionStore.erase`."""
        raise self._lacking(Capability.ERASURE, "erase")

    async def erasures(self) -> builtins.list[Erasure]:
        """Every erasure record, oldest first; see `SessionStore.erasures`."""
        raise self._lacking(Capability.ERASURE, "erasures")

    async def _summaries(
        self, owner: str | None, order: Order, limit: int | None, after: str | None, kind: str
    ) -> builtins.list[SessionSummary]:
        """A page of summaries (arguments checked; ``kind`` the `listing_kind`
        an ``after`` cursor must carry); see `SessionStore.summaries`."""
        raise self._lacking(Capability.SUMMARIES, "summaries")

    async def _set_title(self, session_id: str, change: TitleChange) -> None:
        """Record ``change`` if the session exists (checked and recorded at
        once); see `SessionStore.set_title`."""
        raise self._lacking(Capability.TITLES, "set_title")

    async def _titles(self, session_id: str) -> builtins.list[TitleChange]:
        """Every title change of an existing session, oldest first."""
        raise self._lacking(Capability.TITLES, "titles")

    async def _import_titles(
        self, session_id: str, changes: builtins.list[TitleChange], after: int
    ) -> int:
        """Append ``changes`` (checked) when the session holds exactly
        ``after`` changes; see `SessionStore.import_titles`."""
        raise self._lacking(Capability.TITLES, "import_titles")

    # ------------------------------------------------ derived from those

    async def append(
        self,
        session_id: str,
        entry: SessionEntry,
        *,
        expect_last: str | None = None,
        expect_head: str | None = None,
    ) -> None:
        """Append one entry; see `SessionStore.append`."""
        await self.append_many(
            session_id, (entry,), expect_last=expect_last, expect_head=expect_head
        )

    async def fork(
        self, source_id: str, *, at: str | None = None, meta: SessionMeta | None = None
    ) -> SessionMeta:
        """Branch a session; see `SessionStore.fork`."""
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
        elif not isinstance(meta, SessionMeta):
            raise InvalidRecordError(f"expected a SessionMeta, got {type(meta).__name__}")
        elif meta.parent_session is None:
            meta = meta.model_copy(update={"parent_session": source_id})
        elif meta.parent_session != source_id:
            raise InvalidRecordError(
                f"a fork of {source_id!r} cannot name {meta.parent_session!r} as its parent"
            )
        if at is not None:
            if not isinstance(at, str):
                raise InvalidRecordError(f"at must be an entry id (a string), not {at!r}")
            check_text(at, "at", session_id=source_id, error=InvalidRecordError)
        if meta.id == source_id:  # the source's own id is taken, by the source
            raise DuplicateSessionError(meta.id)
        await self._fork(source_id, at, meta, header_line(meta))
        if title is not None:
            await self._set_title(meta.id, TitleChange.new(meta.id, title))
        return meta

    async def erase(self, session_id: str, *, reason: str, digest: str | None = None) -> Erasure:
        """Remove a whole session, recorded; see `SessionStore.erase`."""
        self._require(Capability.ERASURE, "erase")
        check_reason(reason, session_id=session_id)
        if digest is not None and (
            not isinstance(digest, str) or re.fullmatch(r"[0-9a-fA-F]{64}", digest) is None
        ):
            raise ConfigurationError(
                f"digest must be a BLAKE2b-256 in hex (64 digits) or None, not {digest!r}"
            )
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
        """Move a named head; see `SessionStore.set_head`."""
        self._require(Capability.BRANCHES, "set_head")
        validate_session_id(name)
        self._check(session_id)
        if isinstance(expect, str):
            check_text(expect, "expect", session_id=name, kind="head")
        elif expect is not ... and expect is not None:
            raise ConfigurationError(
                f"expect must be a session id, None (a head never set) or left out, not {expect!r}"
            )
        check_expect_last(expect_last, session_id=name, kind="head")
        if expect_last is not None and not isinstance(expect, str):
            raise ConfigurationError("expect_last needs expect to name the session it ends")
        move = HeadMove.new(session_id)
        await self._set_head(name, move, expect, expect_last)
        return move

    async def import_head(self, name: str, moves: Sequence[HeadMove], *, after: int = 0) -> int:
        """Record a head's positions verbatim; see `SessionStore.import_head`."""
        self._require(Capability.BRANCHES, "import_head")
        validate_session_id(name)
        checked = builtins.list(moves)
        for number, move in enumerate(checked, 1):
            if not isinstance(move, HeadMove):
                raise InvalidRecordError(f"expected a HeadMove, got {type(move).__name__}")
            validate_session_id(move.session_id)
            encoded(move, f"head {name!r}, move {number}")
        self._check_open(name)
        await self._import_head(name, checked, after)
        return len(checked)

    async def head(self, name: str) -> str | None:
        """Where a head stands; see `SessionStore.head`."""
        self._require(Capability.BRANCHES, "head")
        history = await self.head_history(name)
        return history[-1].session_id if history else None

    async def head_history(self, name: str) -> builtins.list[HeadMove]:
        """Every position of a head; see `SessionStore.head_history`."""
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
        """A page of sessions at a glance; see `SessionStore.summaries`."""
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
        """The summary of a session a scan found, its entries read whole; None
        when it was erased since."""
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
        """A session's header (its first stored line)."""
        lines = self.raw_lines(session_id)
        try:
            async for header in lines:
                return decode_stored_meta(session_id, header, path=None, line_no=1)
        finally:
            if isinstance(lines, AsyncGenerator):
                await lines.aclose()
        raise SessionNotFoundError(session_id)  # pragma: no cover (a header is always there)

    async def set_title(self, session_id: str, title: str | None) -> TitleChange:
        """Retitle a session; see `SessionStore.set_title`."""
        self._require(Capability.TITLES, "set_title")
        self._check(session_id)
        if title is not None and not isinstance(title, str):
            raise InvalidRecordError(f"a title is a string or None, not {title!r}")
        change = TitleChange.new(session_id, title)
        encoded(change, f"session {session_id!r}")  # refuses what a line cannot carry
        await self._set_title(session_id, change)
        return change

    async def titles(self, session_id: str) -> builtins.list[TitleChange]:
        """Every later title; see `SessionStore.titles`."""
        self._require(Capability.TITLES, "titles")
        self._check(session_id)
        return await self._titles(session_id)

    async def import_titles(
        self, session_id: str, changes: Sequence[TitleChange], *, after: int = 0
    ) -> int:
        """Record title changes verbatim; see `SessionStore.import_titles`."""
        self._require(Capability.TITLES, "import_titles")
        self._check(session_id)
        if not isinstance(after, int) or isinstance(after, bool) or after < 0:
            raise ConfigurationError(f"after must be a count (0 or more), not {after!r}")
        checked = builtins.list(changes)
        for number, change in enumerate(checked, 1):
            if not isinstance(change, TitleChange):
                raise InvalidRecordError(f"expected a TitleChange, got {type(change).__name__}")
            if change.session_id != session_id:
                raise InvalidRecordError(
                    f"a title change of {change.session_id!r} given for {session_id!r}"
                )
            encoded(change, f"session {session_id!r}, title change {number}")
        return await self._import_titles(session_id, checked, after)

    async def search(
        self, text: str, *, owner: str | None = None, limit: int = 20, after: str | None = None
    ) -> builtins.list[SearchHit]:
        """Find messages by their words; see `SessionStore.search`."""
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
        return await self._search(wanted, owner, limit, after, kind)

    async def _search(
        self,
        wanted: builtins.list[str],
        owner: str | None,
        limit: int,
        after: str | None,
        kind: str,
    ) -> builtins.list[SearchHit]:
        """Search by reading every message (JSONL, memory); SQL uses its index.

        Hits are in the order of `words.rank_key`; the cursor holds that
        key. A session that does not decode is searched up to
        its fault; one erased meanwhile is skipped.
        """
        start: tuple[float, str, int] | None = None
        if after is not None:
            key = Cursor.decode(after, kind, length=3).key
            start = (-_cursor_float(key[0], after), key[1], _cursor_int(key[2], after))
        found: builtins.list[tuple[float, str, int, MessageEntry]] = []
        for meta in await self.list():
            if owner is not None and meta.owner != owner:
                continue
            hits = (
                (*rank_key(message_score(text_words, wanted), meta.id, seq), entry)
                async for seq, entry, text_words in self._messages_matching(meta.id, wanted)
            )
            async for hit in hits:
                if start is None or hit[:3] > start:
                    found.append(hit)
            found = heapq.nsmallest(limit, found, key=lambda hit: hit[:3])
        return [_hit(hit, wanted, kind) for hit in found]

    async def _messages_matching(
        self, session_id: str, wanted: builtins.list[str]
    ) -> AsyncIterator[tuple[int, MessageEntry, builtins.list[str]]]:
        """``(seq, entry, its words)`` of each message of a session holding
        every wanted word, read up to a fault."""
        stream = self.iter_entries(session_id)
        try:
            seq = 0
            async for entry in stream:
                seq += 1
                if isinstance(entry, MessageEntry):
                    found = message_words(entry.message.text())
                    if matches(found, wanted):
                        yield seq, entry, found
        except (CorruptSessionError, SessionNotFoundError):
            return
        finally:
            await stream.aclose()

    async def _entries_before_fault(self, session_id: str) -> builtins.list[SessionEntry]:
        """The entries of a session up to the first that does not decode."""
        read: builtins.list[SessionEntry] = []
        stream = self.iter_entries(session_id)
        try:
            async for entry in stream:
                read.append(entry)
        except CorruptSessionError:
            pass
        finally:
            await stream.aclose()
        return read

    async def integrity(self) -> builtins.list[str]:
        """Storage faults; none can exist beyond what `load` decodes here."""
        self._check_open()
        return []

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

    async def load_slice(
        self, session_id: str, start: int = 0, stop: int | None = None
    ) -> EntrySlice:
        """A run of entries by position; see `SessionStore.load_slice`.

        Built on `raw_lines`: every line is read, and only those of the
        slice decoded (the header is checked); a slice from the end holds
        no more lines than it returns. Backends that can read a range
        directly (SQL) override it.
        """
        self._check(session_id)
        start, stop = check_slice(start, stop)
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

    async def load_context(
        self, session_id: str, *, repair: PairingDialect | None = None
    ) -> builtins.list[Message]:
        """The built context; see `SessionStore.load_context`."""
        self._check(session_id)
        if repair is None:
            return builtins.list((await self._built_context(session_id)).messages)
        rules(repair)  # an unknown dialect is refused before storage is read
        messages = (await self._built_context(session_id)).messages
        return repair_pairing(messages, dialect=repair)

    async def load_context_with_ids(self, session_id: str) -> builtins.list[tuple[str, Message]]:
        """The built context, each message with its entry's id; see
        `SessionStore.load_context_with_ids`."""
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
        """Append a compaction cut where no tool exchange is split; see
        `SessionStore.compact` and `sessionstore.backends.compaction`."""
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
        """What a layer above the store keeps for as long as this store object
        lives (an adapter's conversions, read on from one request to the
        next): ``make()`` at the first ask for ``owner``, the same object on
        every ask after, until `drop_caches`. Safe from any thread: held
        under a thread lock only while looking it up, never across a call."""
        kept: dict[str, Any] = self.__dict__.setdefault("_kept_by_owner", {})
        lock: threading.Lock = self.__dict__.setdefault("_kept_lock", threading.Lock())
        with lock:
            if owner not in kept:
                kept[owner] = make()
            found: _T = kept[owner]
        return found

    def drop_caches(self) -> None:
        """Forget what this object keeps between calls, what `kept` gave
        included; see `SessionStore.drop_caches`. A backend that caches more
        forgets it too, and calls this."""
        self.__dict__.pop("_kept_by_owner", None)

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

    # ------------------------------------------------ for subclasses

    async def _built_context(self, session_id: str) -> BuiltContext[Any]:
        """The context of a (checked) session with its entry ids: here from a
        whole `load`; a backend that can read less overrides this alone, and
        `load_context`, `load_context_with_ids` and `compact` follow."""
        return built_from(await self.load(session_id))

    def _locations(self, session_id: str) -> tuple[str | None, str | None]:
        """Where a session's header and entries are kept, for error messages."""
        return None, None

    def _check_open(self, session_id: str | None = None) -> None:
        """Refuse a closed store."""
        if self._closed:
            raise ClosedError(f"{type(self).__name__} is closed", session_id=session_id)

    def _check(self, session_id: str) -> None:
        """Refuse an invalid id or a closed store, before storage is touched."""
        validate_session_id(session_id)
        self._check_open(session_id)

    def _check_expectations(
        self, expect_last: object, expect_head: object, *, session_id: str
    ) -> None:
        """Refuse an append's expectations before anything is read
        (`check_expectations`), and an ``expect_head`` without
        `Capability.BRANCHES`."""
        if expect_head is not None:
            self._require(Capability.BRANCHES, "append_many's expect_head")
        check_expectations(expect_last, expect_head, session_id=session_id)

    def _require(self, capability: Capability, operation: str) -> None:
        """Refuse ``operation`` when the store does not declare ``capability``."""
        if capability not in self.capabilities:
            raise self._lacking(capability, operation)

    def _lacking(self, capability: Capability, operation: str) -> CapabilityError:
        """The error of ``operation``, of a ``capability`` this store lacks."""
        return CapabilityError(type(self).__name__, capability, operation)


# ---------------------------------------------------------------- writing


def _cursor_float(text: str, cursor: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise InvalidCursorError(f"not a cursor: {cursor!r}") from None


def _cursor_int(text: str, cursor: str) -> int:
    if not text.isdigit():
        raise InvalidCursorError(f"not a cursor: {cursor!r}")
    return int(text)


def _hit(
    found: tuple[float, str, int, MessageEntry], wanted: Sequence[str], kind: str
) -> SearchHit:
    """The `SearchHit` of a scanned match ``(-score, session id, seq, entry)``."""
    negated, session_id, seq, entry = found
    return search_hit(session_id, seq, entry, wanted, kind, (repr(-negated), session_id, str(seq)))


def search_hit(
    session_id: str,
    seq: int,
    entry: MessageEntry,
    wanted: Sequence[str],
    kind: str,
    key: tuple[str, ...],
) -> SearchHit:
    """A `SearchHit` for message ``entry``: its snippet around the ``wanted``
    words, and a cursor of ``kind`` standing on ``key`` (the backend's order)."""
    shown = snippet(entry.message.text(), wanted)
    return SearchHit(
        session_id=session_id,
        entry_id=entry.id,
        seq=seq,
        role=entry.message.role,
        snippet=shown.text,
        highlights=shown.highlights,
        cursor=Cursor(kind, "", key).encode(),
    )
