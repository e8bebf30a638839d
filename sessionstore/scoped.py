"""A store as one owner sees it: `ScopedStore`, for a server serving many users.

``store.scoped(owner)`` (or ``ScopedStore(store, owner)``) is a view that
holds nothing of its own: every call goes to the store under it, over the
`SessionStore` protocol, and is kept to the sessions whose header names
``owner``. To the view, a session of another owner is one that never
existed: the same error, the same message, nothing listed, nothing found.
docs/stores.md (Scoped stores) has the threat model.

Heads and journals carry no owner, so each owner has names of their own:
the view's head or journal ``name`` is the store's ``prefix + name``
(`ScopedStore.prefix`), and the view lists only its own, without the prefix.
"""

from __future__ import annotations

import builtins
import collections
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Callable, Sequence
from types import EllipsisType, TracebackType
from typing import ClassVar, Literal, Self, TypeVar

from sessionstore.errors import MAX_SESSION_ID_BYTES as _MAX_NAME
from sessionstore.errors import (
    CapabilityError,
    ClosedError,
    ConfigurationError,
    CorruptSessionError,
    InvalidRecordError,
    InvalidSessionIdError,
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
from sessionstore.pairing import PairingDialect
from sessionstore.scoped_journal import ScopedJournal, named
from sessionstore.scoped_names import (
    PREFIX_BYTES,
    check_new_id,
    fault_subject,
    owner_prefix,
)
from sessionstore.store import (
    Capability,
    EntrySlice,
    Order,
    SearchHit,
    SessionJournal,
    SessionStore,
    SessionSummary,
)
from sessionstore.wire import decode_meta
from sessionstore.wire.stored import read_stored_meta

__all__ = ["ScopedStore"]

_T = TypeVar("_T")
_S = TypeVar("_S", str, bytes)


class ScopedStore(SessionStore):
    """A store bound to one owner: it creates sessions of that owner and
    reaches no other's. It satisfies `SessionStore` and declares the
    capabilities of the store under it; what differs is said here.

    * `create`, `fork` and `import_session` make sessions of the owner: a
      header left without one is given it; one naming another owner is
      refused (`ConfigurationError`), nothing written; so is an id of
      another owner's prefix form (`InvalidSessionIdError`: ids
      ``owner-<24 hex>:...`` are the views', `sessionstore.scoped_names`).
    * Every call given a session id first reads that session's header (one
      `raw_lines` step: on SQL one read transaction, on JSONL the file's
      first block; `raw_lines` and `raw_blocks` check the header they
      stream, at no extra cost). A session whose header names another
      owner, or does not decode, raises ``SessionNotFoundError(session_id)``,
      as the store does for an id it never held. By default the view keeps
      no answer, so an id erased and made again for another owner is never
      reached through an old one; ``remember`` trades that for speed.
    * `list` reads what the store's `list` reads (every header) and keeps the
      owner's; `summaries` and `search` ask the store for ``owner`` alone,
      so SQL answers from its indexes (an ``owner=`` of someone else finds
      nothing; cursors of one owner's pages continue only that owner's
      listings).
    * Heads and journals are the owner's own names: the store's are
      `prefix` + the view's, which leaves a view's names `PREFIX_BYTES`
      fewer bytes (169); a journal's effects and keyed lines go with it.
      `set_head` names only the owner's sessions (so does ``expect`` given
      with ``expect_last``). A head's positions are read as recorded: a
      position naming a session not the owner's (erased since) leads to
      not found.

    Args:
        store: the store the view reads and writes.
        owner: the owner, as the server's authentication found it (trusted).
        remember: how many of the owner's sessions the view remembers once
            checked (or made), the latest used, so that their calls read no
            header; 0 (the default) checks every call. The view forgets a
            session it erases, not one erased elsewhere: remember only where
            no one can make a session of an id erased (ids of
            `SessionMeta.new`, unguessable, never chosen by a user).

    Raises:
        ConfigurationError: ``owner`` is not a non-empty string (of valid
            Unicode, holding no control character), or ``remember`` not a count.
    """

    PREFIX_BYTES: ClassVar[int] = PREFIX_BYTES
    """How long every owner's `prefix` is, in UTF-8 bytes."""

    def __init__(self, store: SessionStore, owner: str, *, remember: int = 0) -> None:
        self._prefix = owner_prefix(owner)
        if not isinstance(remember, int) or isinstance(remember, bool) or remember < 0:
            raise ConfigurationError(
                f"remember must be a count of sessions (0 or more), not {remember!r}"
            )
        self._store = store
        self._owner = owner
        self._closed = False
        self._remember = remember
        self._remembered: collections.OrderedDict[str, None] = collections.OrderedDict()

    def __repr__(self) -> str:
        return f"ScopedStore({self._store!r}, {self._owner!r})"

    @property
    def owner(self) -> str:
        """The owner this view is bound to."""
        return self._owner

    @property
    def store(self) -> SessionStore:
        """The store under the view, which sees every owner."""
        return self._store

    @property
    def prefix(self) -> str:
        """What the store's names of this owner's heads and journals begin with:
        ``owner-`` and 24 hex digits of a BLAKE2b of the owner, then ``:``."""
        return self._prefix

    @property
    def capabilities(self) -> frozenset[Capability]:
        return self._store.capabilities

    def scoped(self, owner: str, *, remember: int = 0) -> ScopedStore:
        """A view of this view: it reaches the sessions both owners hold (none, but
        for the same owner)."""
        return ScopedStore(self, owner, remember=remember)

    # ------------------------------------------------------------- the checks

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError(f"ScopedStore of {self._owner!r} is closed")

    def _require(self, capability: Capability, operation: str) -> None:
        self._check_open()
        if capability not in self._store.capabilities:
            raise CapabilityError(type(self).__name__, capability, operation)

    def _is_owners(self, session_id: str, header: str | bytes) -> bool:
        try:
            meta = read_stored_meta(header)  # the fast reader of stored lines
        except InvalidRecordError:
            return False
        return meta.id == session_id and meta.owner == self._owner

    async def _owns(self, session_id: str) -> bool:
        """Whether the session's header names the owner: one step of `raw_lines`."""
        lines = self._store.raw_lines(session_id)
        try:
            async for header in lines:
                return self._is_owners(session_id, header)
        except (SessionNotFoundError, CorruptSessionError):
            return False
        finally:
            close = getattr(lines, "aclose", None)
            if close is not None:
                await close()
        return False

    async def _own(self, session_id: str) -> None:
        """Refuse a session not the owner's as the store refuses an id it never held."""
        self._check_open()
        if session_id in self._remembered:
            self._remembered.move_to_end(session_id)
            return
        if not await self._owns(session_id):
            raise SessionNotFoundError(session_id)
        self._keep(session_id)

    def _keep(self, session_id: str) -> None:
        """Remember one of the owner's sessions, forgetting the least used beyond `remember`."""
        if self._remember:
            self._remembered[session_id] = None
            self._remembered.move_to_end(session_id)
            while len(self._remembered) > self._remember:
                self._remembered.popitem(last=False)

    def _own_meta(self, meta: SessionMeta) -> SessionMeta:
        if not isinstance(meta, SessionMeta):
            raise InvalidRecordError(f"expected a SessionMeta, got {type(meta).__name__}")
        check_new_id(meta.id, self._prefix)
        if meta.owner is None:
            return meta.model_copy(update={"owner": self._owner})
        if meta.owner != self._owner:
            raise ConfigurationError(
                f"session {meta.id!r} names the owner {meta.owner!r}: a store scoped to"
                f" {self._owner!r} makes only its sessions (leave owner None)"
            )
        return meta

    def _name(self, name: str) -> str:
        """The store's name of the owner's head or journal ``name``."""
        validate_session_id(name)
        full = self._prefix + name
        room = _MAX_NAME - len(self._prefix)
        if len(full.encode("utf-8")) > _MAX_NAME:
            raise InvalidSessionIdError(
                name, f"longer than the {room} UTF-8 bytes a scoped store's names may hold"
            )
        return full

    def _head_error(self, error: SessionConflictError, name: str) -> SessionConflictError:
        """The store's conflict on a head, told of the owner's name for it."""
        if error.what != "head" or error.session_id != self._prefix + name:
            return error
        return SessionConflictError(
            name, error.reason, "head", expected=error.expected, actual=error.actual
        )

    # ------------------------------------------------------------ the core

    async def create(self, meta: SessionMeta) -> str:
        self._check_open()
        session_id = await self._store.create(self._own_meta(meta))
        self._keep(session_id)
        return session_id

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

    async def append_many(
        self,
        session_id: str,
        entries: Sequence[SessionEntry],
        *,
        expect_last: str | None = None,
        expect_head: str | None = None,
    ) -> None:
        if expect_head is not None:
            self._require(Capability.BRANCHES, "append_many's expect_head")
        await self._own(session_id)
        head = None if expect_head is None else self._name(expect_head)
        try:
            await self._store.append_many(
                session_id, entries, expect_last=expect_last, expect_head=head
            )
        except SessionConflictError as exc:
            if expect_head is None:
                raise
            raise self._head_error(exc, expect_head) from None

    async def load(self, session_id: str) -> builtins.list[SessionEntry]:
        await self._own(session_id)
        return await self._store.load(session_id)

    async def load_slice(
        self,
        session_id: str,
        start: int = 0,
        stop: int | None = None,
        *,
        expect_head: str | None = None,
    ) -> EntrySlice:
        if expect_head is not None:
            self._require(Capability.BRANCHES, "load_slice's expect_head")
        await self._own(session_id)
        if expect_head is None:
            return await self._store.load_slice(session_id, start, stop)
        try:
            return await self._store.load_slice(
                session_id, start, stop, expect_head=self._name(expect_head)
            )
        except SessionConflictError as exc:
            raise self._head_error(exc, expect_head) from None

    async def iter_entries(self, session_id: str) -> AsyncGenerator[SessionEntry, None]:
        await self._own(session_id)
        entries = self._store.iter_entries(session_id)
        try:
            async for entry in entries:
                yield entry
        finally:
            await entries.aclose()

    async def list(self) -> builtins.list[SessionMeta]:
        """The headers of the owner's sessions, in no particular order."""
        self._check_open()
        return [meta for meta in await self._store.list() if meta.owner == self._owner]

    async def load_context(
        self, session_id: str, *, repair: PairingDialect | None = None
    ) -> builtins.list[Message]:
        await self._own(session_id)
        return await self._store.load_context(session_id, repair=repair)

    async def load_context_with_ids(self, session_id: str) -> builtins.list[tuple[str, Message]]:
        await self._own(session_id)
        return await self._store.load_context_with_ids(session_id)

    async def compact(
        self,
        session_id: str,
        summary: str,
        *,
        keep_last: int,
        tokens_before: int | None = None,
        dialect: PairingDialect | None = None,
    ) -> CompactionEntry:
        await self._own(session_id)
        return await self._store.compact(
            session_id, summary, keep_last=keep_last, tokens_before=tokens_before, dialect=dialect
        )

    async def search(
        self, text: str, *, owner: str | None = None, limit: int = 20, after: str | None = None
    ) -> builtins.list[SearchHit]:
        self._check_open()
        check_owner(owner)
        hits = await self._store.search(text, owner=self._owner, limit=limit, after=after)
        # Never another owner's: the call above checks the arguments only.
        return hits if owner is None or owner == self._owner else []

    async def integrity(self) -> builtins.list[str]:
        """The store's faults about the owner's sessions, heads or journals,
        each fault's subject (the session, head or journal it begins with, or
        the JSONL file it names) matched exactly (`scoped_names.fault_subject`;
        a fault of the storage as a whole has none: it is the store's). It
        costs the store's `integrity` and `list`."""
        self._check_open()
        faults = await self._store.integrity()
        if not faults:
            return []
        mine = {meta.id for meta in await self._store.list() if meta.owner == self._owner}
        kept = []
        for fault in faults:
            match fault_subject(fault):
                case ("session", name) if name in mine:
                    kept.append(fault)
                case (kind, name) if kind != "session" and name.startswith(self._prefix):
                    head = f"{kind} {name!r}"
                    own = f"{kind} {name.removeprefix(self._prefix)!r}"
                    kept.append(own + fault.removeprefix(head) if fault.startswith(head) else fault)
        return kept

    def raw_lines(self, session_id: str) -> AsyncIterator[str]:
        return self._streamed(session_id, self._store.raw_lines, lambda line: line)

    def raw_blocks(self, session_id: str) -> AsyncIterator[bytes]:
        return self._streamed(
            session_id, self._store.raw_blocks, lambda block: block.partition(b"\n")[0]
        )

    async def _streamed(
        self,
        session_id: str,
        stream: Callable[[str], AsyncIterator[_S]],
        header_of: Callable[[_S], str | bytes],
    ) -> AsyncIterator[_S]:
        """The store's stream of a session, once its first item's header names the
        owner; else a fresh not found, chaining nothing (as for an id never held)."""
        self._check_open()
        items = stream(session_id)
        first = True
        try:
            async for item in items:
                if first and not self._is_owners(session_id, header_of(item)):
                    break
                first = False
                yield item
        except (SessionNotFoundError, CorruptSessionError):  # a bad header names no owner
            if not first:
                raise
        finally:
            close = getattr(items, "aclose", None)
            if close is not None:
                await close()
        if first:
            raise SessionNotFoundError(session_id)

    async def import_session(
        self, header: str, entries: AsyncIterable[str], *, after: int | None = None
    ) -> int:
        """`SessionStore.import_session` of a header naming the owner.

        Raises:
            ConfigurationError: the header names no owner or another (an
                imported line is kept verbatim, so it is not given one).
            SessionNotFoundError: ``after`` is given and the session is not
                the owner's.
        """
        self._check_open()
        try:
            meta = decode_meta(header)
        except InvalidRecordError as exc:  # as the store refuses it
            raise InvalidRecordError(f"header line: {exc}") from None
        check_new_id(meta.id, self._prefix)
        if meta.owner != self._owner:
            raise ConfigurationError(
                f"the header of session {meta.id!r} names the owner {meta.owner!r}: a store"
                f" scoped to {self._owner!r} imports only its sessions"
            )
        if after is not None:
            await self._own(meta.id)
        return await self._store.import_session(header, entries, after=after)

    def journal(
        self, name: str, *, durability: Literal["full", "store"] = "full"
    ) -> SessionJournal:
        """The owner's journal ``name`` (the store's ``prefix + name``).

        Raises:
            InvalidSessionIdError: ``name`` breaks the session-id rule, or is
                too long to hold the prefix as well.
        """
        self._check_open()
        return ScopedJournal(
            self._store.journal(self._name(name), durability=durability), self._prefix
        )

    async def journals(self) -> builtins.list[str]:
        """The names of the owner's journals that hold any lines, in no particular order."""
        self._check_open()
        names = await self._store.journals()
        return [name.removeprefix(self._prefix) for name in names if name.startswith(self._prefix)]

    def kept(self, key: str, make: Callable[[], _T]) -> _T:
        """What an adapter keeps while the store object lives (`StoreBase.kept`),
        under a key of the owner's own; ``make()`` each time over a store without it."""
        keep = getattr(self._store, "kept", None)
        if not callable(keep):
            return make()
        found: _T = keep(self._prefix + key, make)
        return found

    def drop_caches(self) -> None:
        """Forget the sessions the view remembers (the store's caches are the store's)."""
        self._remembered.clear()

    async def close(self) -> None:
        """Close the view; the store stays open for its other users."""
        self._closed = True
        self._remembered.clear()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    # ------------------------------------------------------------ branches

    async def fork(
        self, source_id: str, *, at: str | None = None, meta: SessionMeta | None = None
    ) -> SessionMeta:
        self._require(Capability.BRANCHES, "fork")
        await self._own(source_id)
        given = None if meta is None else self._own_meta(meta)
        made = await self._store.fork(source_id, at=at, meta=given)
        self._keep(made.id)
        return made

    async def set_head(
        self,
        name: str,
        session_id: str,
        *,
        expect: str | EllipsisType | None = ...,
        expect_last: str | None = None,
    ) -> HeadMove:
        self._require(Capability.BRANCHES, "set_head")
        full = self._name(name)
        await self._own(session_id)
        if expect_last is not None and isinstance(expect, str):
            await self._own(expect)  # its last entry is read
        try:
            return await self._store.set_head(
                full, session_id, expect=expect, expect_last=expect_last
            )
        except SessionConflictError as exc:
            raise self._head_error(exc, name) from None

    async def head(self, name: str) -> str | None:
        self._require(Capability.BRANCHES, "head")
        return await self._store.head(self._name(name))

    async def head_history(self, name: str) -> builtins.list[HeadMove]:
        self._require(Capability.BRANCHES, "head_history")
        return await self._store.head_history(self._name(name))

    async def heads(self) -> builtins.list[str]:
        """The names of the owner's heads ever set, in no particular order."""
        self._require(Capability.BRANCHES, "heads")
        names = await self._store.heads()
        return [name.removeprefix(self._prefix) for name in names if name.startswith(self._prefix)]

    async def import_head(self, name: str, moves: Sequence[HeadMove], *, after: int = 0) -> int:
        """`BranchingStore.import_head` of moves to the owner's sessions.

        Raises:
            SessionNotFoundError: a move names a session not the owner's
                (one erased since included); nothing recorded.
        """
        self._require(Capability.BRANCHES, "import_head")
        full = self._name(name)
        checked = builtins.list(moves)
        for move in checked:
            if isinstance(move, HeadMove):
                await self._own(validate_session_id(move.session_id))
        try:
            return await self._store.import_head(full, checked, after=after)
        except SessionConflictError as exc:
            raise self._head_error(exc, name) from None

    # -------------------------------------------------------------- titles

    async def set_title(self, session_id: str, title: str | None) -> TitleChange:
        self._require(Capability.TITLES, "set_title")
        await self._own(session_id)
        return await self._store.set_title(session_id, title)

    async def titles(self, session_id: str) -> builtins.list[TitleChange]:
        self._require(Capability.TITLES, "titles")
        await self._own(session_id)
        return await self._store.titles(session_id)

    async def import_titles(
        self, session_id: str, changes: Sequence[TitleChange], *, after: int = 0
    ) -> int:
        self._require(Capability.TITLES, "import_titles")
        await self._own(session_id)
        return await self._store.import_titles(session_id, changes, after=after)

    # ----------------------------------------------------------- summaries

    async def summaries(
        self,
        *,
        owner: str | None = None,
        order: Order = "last_activity",
        limit: int | None = 50,
        after: str | None = None,
    ) -> builtins.list[SessionSummary]:
        self._require(Capability.SUMMARIES, "summaries")
        check_owner(owner)
        page = await self._store.summaries(owner=self._owner, order=order, limit=limit, after=after)
        return page if owner is None or owner == self._owner else []

    # -------------------------------------------------------------- erasure

    async def erase(self, session_id: str, *, reason: str, digest: str | None = None) -> Erasure:
        self._require(Capability.ERASURE, "erase")
        await self._own(session_id)
        self._remembered.pop(session_id, None)  # even if the erase fails: checked again
        return await self._store.erase(session_id, reason=reason, digest=digest)

    async def erasures(self) -> builtins.list[Erasure]:
        """The erasures of the owner's journals, oldest first (a session's
        record names no owner: the store lists it)."""
        self._require(Capability.ERASURE, "erasures")
        return [
            named(record, self._prefix)
            for record in await self._store.erasures()
            if record.kind == "journal" and record.name.startswith(self._prefix)
        ]
