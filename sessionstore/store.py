"""The store contract, stated once (SPEC section 4).

`CoreStore` is what every backend does; each `Capability` it declares adds
one protocol (`BranchingStore`, `TitledStore`, `BrowsableStore`,
`ErasingStore`); `SessionStore` has them all, as every shipped backend
does. `sessionstore.testing.SessionStoreContract` proves a backend against
it. Backends and the blocking facade document only what differs.
"""

from __future__ import annotations

import builtins
import enum
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from types import EllipsisType, TracebackType
from typing import Literal, Protocol, Self, TypeVar, runtime_checkable

from sessionstore.effects import EffectLog
from sessionstore.journal import Journal
from sessionstore.models import (
    CompactionEntry,
    Erasure,
    HeadMove,
    JournalLine,
    Message,
    SessionEntry,
    SessionHeader,
    SessionMeta,
    TitleChange,
)
from sessionstore.pairing import PairingDialect

__all__ = [
    "BranchingStore",
    "BrowsableStore",
    "Capability",
    "CoreStore",
    "EntrySlice",
    "ErasingStore",
    "Order",
    "SearchHit",
    "SessionJournal",
    "SessionStore",
    "SessionSummary",
    "TitledStore",
]

_T = TypeVar("_T")


Order = Literal["last_activity", "created"]
"""How `SessionStore.summaries` orders sessions, newest first."""


class Capability(enum.Enum):
    """What a store does beyond `CoreStore`, declared by its class: the
    operations of one protocol each (`operations`). Sealing is how a store
    is opened, not a capability: a sealed store declares what the plain one does.
    """

    BRANCHES = "branches"
    """`BranchingStore`: `fork`, `set_head`, `head`, `head_history`,
    `heads`, `import_head`, and the ``expect_head`` of `append_many` and
    `load_slice`."""

    TITLES = "titles"
    """`TitledStore`: `set_title`, `titles`, `import_titles`."""

    SUMMARIES = "summaries"
    """`BrowsableStore`: `summaries`."""

    ERASURE = "erasure"
    """`ErasingStore`: `erase`, `erasures`."""

    @property
    def operations(self) -> tuple[str, ...]:
        """The names of the store operations this capability holds."""
        protocol = _PROTOCOLS[self]
        return tuple(name for name in vars(protocol) if not name.startswith("_"))


@dataclass(frozen=True)
class SessionSummary:
    """A session at a glance, for listings.

    Attributes:
        meta: the header.
        entries: how many entries the session holds.
        last_timestamp: the ``timestamp`` of its last entry; None when empty.
        compacted: whether it holds a compaction entry.
        fault: None when the session read back sound; else a
            `CorruptSessionError`'s message, the other fields then describing
            what was read before it (``meta`` holds only the id when the
            header does not decode).
        title: the last `set_title`, else the header's ``title``, else None.
        last_activity: RFC 3339 time (UTC) of the store's last write to the
            session (its creation, fork, import or latest append).
        cursor: pass it as ``after=`` for the sessions listed after this one.
    """

    meta: SessionMeta
    entries: int
    last_timestamp: str | None
    compacted: bool
    fault: str | None = None
    title: str | None = None
    last_activity: str = ""
    cursor: str = ""

    @property
    def id(self) -> str:
        """The session id, ``meta.id``."""
        return self.meta.id

    @property
    def owner(self) -> str | None:
        """The session's owner, ``meta.owner``."""
        return self.meta.owner


@dataclass(frozen=True)
class SearchHit:
    """One message that matched a `SessionStore.search`.

    Attributes:
        session_id: the session holding the message.
        entry_id: the message entry's id.
        seq: the entry's position in the session, 1 for the first.
        role: the message's role.
        snippet: the text around the match, literal (never markup), at most
            about 200 characters, ``…`` where it was cut.
        highlights: ``(start, end)`` offsets in ``snippet`` of each word matched.
        cursor: pass it as ``after=`` for the hits after this one.
    """

    session_id: str
    entry_id: str
    seq: int
    role: str
    snippet: str
    highlights: tuple[tuple[int, int], ...]
    cursor: str


@dataclass(frozen=True)
class EntrySlice:
    """A run of a session's entries and where it stands (`SessionStore.load_slice`);
    nothing stored changes, so a reader that kept it reads on from ``stop``.

    Attributes:
        entries: the entries, in append order.
        start: the position of the first entry (or where an empty run begins), from 0.
        length: how many entries the session held when it was read.
    """

    entries: builtins.list[SessionEntry]
    start: int
    length: int

    @property
    def stop(self) -> int:
        """The position just after the last entry read: ``start + len(entries)``."""
        return self.start + len(self.entries)


@runtime_checkable
class SessionJournal(Protocol):
    """An agent's crash-recovery journal (SPEC section 5, docs/journal.md): what
    a session wrote while it ran, so that one stopped before its state was
    saved is not forgotten. At agent start::

        leftover = await journal.read()
        for session in leftover.interrupted():
            ...  # tell the agent what those sessions wrote
        await journal.begin(SessionHeader(started_at=Timestamp.now(), model=m), leftover)
        ...
        await journal.append(PostWrite(at=Timestamp.now(), id=post_id))  # each write
        ...
        await journal.clear()  # once the session's state is saved

    Every backend gives the same `read` after the same calls, skipped line
    numbers included; each `append` survives a power loss once it returns.
    """

    async def read(self) -> Journal:
        """The journal as it stands (empty when there is none); never fails:
        unreadable lines are skipped, their numbers kept in `Journal.skipped`."""
        ...

    async def begin(self, header: SessionHeader, leftover: Journal) -> None:
        """Start a session: discard ``leftover`` (what `read` found) when it
        recorded no write, keep it when it did, then append ``header``."""
        ...

    async def append(self, line: JournalLine) -> None:
        """Append one line, on a line of its own, durably.

        Raises:
            InvalidRecordError: ``line`` is not a journal line.
        """
        ...

    async def append_raw(self, *lines: bytes) -> None:
        """Append lines verbatim, parsed or not, all or none (an import keeps a
        torn or foreign line, so the same line numbers are skipped).

        Raises:
            InvalidRecordError: a line contains a newline; nothing is written.
        """
        ...

    async def read_bytes(self) -> bytes:
        """The journal as a journal file holding it would read: its lines, each
        followed by a newline (a file journal gives its bytes as they are)."""
        ...

    async def clear(self) -> None:
        """Forget the journal once a session's state is saved (nothing to clear
        is fine); stores that keep history record the clear, deleting nothing."""
        ...

    async def keyed(self, *keys: str) -> dict[str, builtins.list[bytes]]:
        """The lines stored under each key since the journal's last clear.

        A *keyed line* is a JSON object whose top-level ``"key"`` is a string
        (`sessionstore.wire.line_key`), indexed whatever wrote it; a line that
        does not decode, or repeats ``"key"``, has none.

        Args:
            keys: the keys wanted (each counted once).

        Returns:
            Each key that has lines, mapped to them as stored (no newlines),
            oldest first; a key without one is absent. It costs what it
            returns, not the journal's length.

        Raises:
            ConfigurationError: a key is not a string UTF-8 can carry.
        """
        ...

    async def scan(
        self, prefix: str, *, before: str | None = None, limit: int | None = None
    ) -> builtins.list[tuple[str, builtins.list[bytes]]]:
        """The keys that start with ``prefix``, in descending order, with their lines.

        Args:
            prefix: what the keys start with ("" for every key).
            before: only keys that sort below it (code point order), when given.
            limit: at most this many keys (None: all).

        Returns:
            ``(key, lines)`` pairs, the greatest key first, lines as `keyed`
            gives them. It costs what it returns (a sealed store's first scan
            of a journal opens every line, then keeps its keys in order).

        Raises:
            ConfigurationError: ``prefix`` or ``before`` is not a string,
                ``limit`` not 1 or more.
        """
        ...

    async def append_keyed_unless(
        self,
        keys: Sequence[str],
        found: Callable[[dict[str, builtins.list[bytes]]], _T | None],
        *lines: bytes,
    ) -> _T | None:
        """Append lines verbatim, all or none, unless ``found`` says otherwise.

        ``found`` is given what `keyed` returns for ``keys``; an answer that
        is not None is returned, nothing appended. No other append, from any
        thread or process, comes between the look and the append; ``found``
        may run in a worker thread under the journal's lock.

        Raises:
            ConfigurationError: ``keys`` is not a sequence of strings.
            InvalidRecordError: a line contains a newline; nothing is written.
        """
        ...

    async def drop(self, *keys: str, reason: str) -> Erasure | None:
        """Remove every line stored under ``keys`` (from before the last clear
        too), in one step with its record; the other lines stay as they were.

        The record is an `Erasure` of kind ``journal``: ``lines`` and
        ``digest`` of the lines removed (in journal order, each ending in a
        newline), ``keys`` how many keys had lines. The store's `erasures`
        lists it (a `FileJournal` outside a store keeps it nowhere).

        Returns:
            The record; None when no key had a line (nothing is recorded).

        Raises:
            ConfigurationError: ``reason`` is not a non-empty string, or a
                key is not a string.
        """
        ...

    @property
    def effects(self) -> EffectLog:
        """The journal's side effects (`sessionstore.effects`), kept apart from
        its lines: never cleared with them, erased with them."""
        ...

    async def erase(self, *, reason: str) -> Erasure | None:
        """Remove the journal whole, history and effects included: the bytes go.

        Only the `Erasure` record (``kind="journal"``) is kept, which the
        store's `erasures` lists (a `FileJournal` outside a store keeps it
        nowhere). A journal holding nothing is left as it is (None).

        Raises:
            ConfigurationError: ``reason`` is not a non-empty string.
        """
        ...


@runtime_checkable
class CoreStore(Protocol):
    """An append-only store of sessions: the core every backend implements.

    A session is a `SessionMeta` header and a log of entries. Nothing
    deletes or rewrites an entry or a header; a compaction is a new entry
    that changes how the context is built, never what is stored.

    Rules for every method, stated here once:

    * A session id breaking `validate_session_id`'s rule raises
      `InvalidSessionIdError` before storage is touched. A text argument
      holding a lone surrogate is refused by its own error, naming it
      (`ConfigurationError` for options and filters, `InvalidRecordError`
      for what is recorded and a fork's ``at``, `InvalidCursorError` for
      ``after``, `InvalidSessionIdError` for ids and head or journal names).
    * A ``limit`` or slice position beyond any count means the largest count.
    * Errors derive from `SessionStoreError` and name the session; driver
      and OS errors arrive as `StorageError`, chained. After `close`, every
      method raises `ClosedError` (a `StorageError`); ``async with store:``
      closes it.
    * A store object may be shared by threads and event loops at once: each
      call runs on the loop that awaits it.
    * Appends to one session from many tasks never interleave, duplicate or
      lose an entry, and each task's own keep their order. An append that
      returned has reached the storage (backends say whether that survives
      a process crash or a power loss); a crash loses only those in flight.
    * An operation of a `Capability` the store does not declare raises
      `CapabilityError` (naming the class and capability) before anything
      else is checked, read or written.
    """

    @property
    def capabilities(self) -> frozenset[Capability]:
        """What this store does beyond the core, as its class declares it."""
        ...

    async def create(self, meta: SessionMeta) -> str:
        """Create a session from its header.

        Returns:
            The session id, ``meta.id``.

        Raises:
            InvalidSessionIdError: ``meta.id`` breaks the session-id rule.
            DuplicateSessionError: a session with that id exists; it is left
                as it was.
        """
        ...

    async def append(
        self,
        session_id: str,
        entry: SessionEntry,
        *,
        expect_last: str | None = None,
        expect_head: str | None = None,
    ) -> None:
        """Append one entry to a session; ``expect_last`` and ``expect_head``
        as for `append_many`. Nothing is stored when it raises.

        Raises:
            SessionNotFoundError: no such session.
            StreamingMessageError: the message has ``streaming=True``: only
                finalized messages are stored.
            InvalidRecordError: the entry holds what the wire format cannot
                carry (a NaN, a non-string key, nesting past 127 levels, a
                line past `MAX_LINE`: docs/wire-format.md).
            SessionConflictError: ``expect_last`` or ``expect_head`` does not hold.
        """
        ...

    async def append_many(
        self,
        session_id: str,
        entries: Sequence[SessionEntry],
        *,
        expect_last: str | None = None,
        expect_head: str | None = None,
    ) -> None:
        """Append the entries of one turn: all of them, contiguously, or none.

        Every entry is checked before anything is written; an empty sequence
        stores nothing (the session must exist, ``expect_last`` hold).

        With ``expect_last``, the entries are stored only if the session's
        last entry (a fork's own or shared) still has that id (``""``: it
        holds none), checked and written in one step: of writers that read
        the same end, exactly one succeeds, the others get
        `SessionConflictError`. Ids are compared, so they must not repeat
        within a session (`MessageEntry.new`'s do not). With
        ``expect_head`` (`Capability.BRANCHES`), only if that head names
        this session now, checked in the same step.

        Raises:
            SessionNotFoundError, StreamingMessageError, InvalidRecordError:
                as for `append`.
            SessionConflictError: ``expect_last`` was given and the session's
                last entry is another, or ``expect_head`` was given and that
                head names another session or none (the error's ``what``,
                ``expected`` and ``actual`` say which); nothing is stored.
            InvalidSessionIdError: ``expect_head`` breaks the session-id rule.
            ConfigurationError: ``expect_last`` is neither a string nor None;
                nothing is read or written.
        """
        ...

    async def load(self, session_id: str) -> builtins.list[SessionEntry]:
        """All entries of a session, in append order.

        Raises:
            SessionNotFoundError: no such session.
            CorruptSessionError: stored data does not decode; the error names
                the file (or table) and line.
        """
        ...

    async def load_slice(
        self,
        session_id: str,
        start: int = 0,
        stop: int | None = None,
        *,
        expect_head: str | None = None,
    ) -> EntrySlice:
        """``load(session_id)[start:stop]`` (Python's slice positions), read at
        the cost of what it returns, with the length read in the same snapshot.

        ``load_slice(s, -20)`` gives the last 20 entries, ``load_slice(s, n)``
        those appended after the first ``n``. SQL reads an index range; JSONL
        and memory scan the lines, decoding only those returned.

        With ``expect_head`` (`Capability.BRANCHES`), only if that head names
        this session as the read begins (SQL: in the read's snapshot): a
        reader that guessed where a conversation's head stands reads its
        session in one step, and is told where the head stands otherwise.

        Raises:
            SessionNotFoundError, CorruptSessionError: as for `load` (a line
                outside the slice is not decoded, so not checked).
            SessionConflictError: ``expect_head`` was given and that head
                names another session or none (the error's ``actual``); nothing is read.
            InvalidSessionIdError: ``expect_head`` breaks the session-id rule.
            ConfigurationError: ``start`` is not an int, ``stop`` neither
                an int nor None, or ``expect_head`` neither a string nor None;
                nothing is read.
        """
        ...

    def iter_entries(self, session_id: str) -> AsyncGenerator[SessionEntry, None]:
        """What `load` returns, streamed in bounded memory; entries appended
        meanwhile may be left out. The first step raises what `load` would; a
        line that does not decode raises when the stream reaches it.

        Raises:
            SessionNotFoundError, CorruptSessionError: as for `load`.
        """
        ...

    async def list(self) -> builtins.list[SessionMeta]:
        """The headers of every session, in no particular order."""
        ...

    async def load_context(
        self, session_id: str, *, repair: PairingDialect | None = None
    ) -> builtins.list[Message]:
        """The messages to send to a model: ``build_context(load(session_id))``,
        which backends may compute without reading past the last compaction.

        Args:
            session_id: the session.
            repair: a dialect to pass the context through `repair_pairing`
                too (in the list returned only; the log is never touched).

        Raises:
            SessionNotFoundError, CorruptSessionError: as for `load`.
            ConfigurationError: ``repair`` names no dialect; nothing is read.
        """
        ...

    async def load_context_with_ids(self, session_id: str) -> builtins.list[tuple[str, Message]]:
        """`load_context` at the same cost, each message with the id of its entry
        (the summary with its compaction's): to cite a message or fork at it.
        No ``repair``: a repaired list holds messages no entry holds.

        Raises:
            SessionNotFoundError, CorruptSessionError: as for `load`.
        """
        ...

    async def compact(
        self,
        session_id: str,
        summary: str,
        *,
        keep_last: int,
        tokens_before: int | None = None,
        dialect: PairingDialect | None = None,
    ) -> CompactionEntry:
        """Append a compaction keeping the last messages, with no tool exchange cut.

        The next context is ``summary`` (which stands for everything before,
        an earlier summary included), then at least the last ``keep_last``
        messages, the cut moved back so as not to start inside a tool
        exchange nor on a result whose call is gone (`safe_cut`). With
        ``keep_last=0`` the compaction's ``first_kept_id`` is its own id, so
        its context keeps only what comes after it.

        It reads what `load_context` reads, then appends with
        `append_many`'s ``expect_last``; when another task appended
        meanwhile, it reads and cuts again (entries that arrived are kept or
        covered by this ``summary``: compact between an agent's own turns),
        up to `COMPACT_ATTEMPTS` times. The cut assumes unique entry ids.

        Args:
            session_id: the session.
            summary: what stands for the history cut off.
            keep_last: how many of the last messages to keep at least.
            tokens_before: recorded as is (the context's size before).
            dialect: the shape of the tool exchanges; None cuts where no
                dialect finds an exchange split.

        Returns:
            The compaction entry appended.

        Raises:
            SessionNotFoundError, CorruptSessionError: as for `load`.
            ConfigurationError: ``keep_last`` is negative or not an integer,
                ``summary`` is no string, ``tokens_before`` is not 0 to
                2**64 - 1, or ``dialect`` is unknown; nothing is read or written.
            SessionConflictError: appends kept landing between its read and
                its write (`COMPACT_ATTEMPTS` times), or another compaction
                landed (a summary cannot stand for one it never saw); nothing
                written.
        """
        ...

    async def search(
        self, text: str, *, owner: str | None = None, limit: int = 20, after: str | None = None
    ) -> builtins.list[SearchHit]:
        """Find the messages whose `Message.text()` says every word of ``text``.

        Words are runs of letters and digits, matched whole, ignoring case
        (``"Fix the BUG"`` finds "the bug was fixed", not "debugging"); text
        without a word finds nothing. A message a fork shares is a hit in
        each session holding it. SQL answers from an index (docs/browse.md),
        JSONL and memory read every message. Every backend ranks alike
        (`sessionstore.backends.words`): best ``hits * hits / length`` first,
        then session id, then ``seq``.

        Args:
            text: the words to find.
            owner: only in the sessions whose header names this owner.
            limit: how many hits at most (1 or more).
            after: a `SearchHit.cursor` from the same ``text`` and ``owner``.

        Raises:
            InvalidCursorError: ``after`` is not a cursor of this search.
            ConfigurationError: ``text`` or ``owner`` is not a string, or a
                ``limit`` below 1.
        """
        ...

    async def integrity(self) -> builtins.list[str]:
        """Faults of the storage itself, beyond what `load` decodes; empty when
        sound. SQL: the database's integrity and foreign-key checks, gaps in
        ``seq``, rows that break a session's chain of digests. JSONL: every
        file `list` cannot list (empty, a torn header, not a regular file)."""
        ...

    def raw_lines(self, session_id: str) -> AsyncIterator[str]:
        r"""A session's stored lines, byte for byte (an imported line's exact text,
        ``\r`` included), without newlines: the header, then each entry's,
        streamed in bounded memory; entries appended meanwhile may be left out.

        Raises:
            SessionNotFoundError, CorruptSessionError: as for `load`.
        """
        ...

    def raw_blocks(self, session_id: str) -> AsyncIterator[bytes]:
        """`raw_lines` as the bytes of the session's file, in blocks of whole
        lines each ending in ``\n`` (what export writes).

        Raises:
            SessionNotFoundError, CorruptSessionError: as for `load`.
        """
        ...

    async def import_session(
        self, header: str, entries: AsyncIterable[str], *, after: int | None = None
    ) -> int:
        """Store a session's lines verbatim, all or none, streamed: the archive's
        import. Lines are checked as the wire decoders check them, but what
        the API refuses today (a streaming message) is kept: it is history.

        Args:
            header: the header line; its id names the session.
            entries: the entry lines, without newlines.
            after: None to create the session; else how many entries it holds
                now under this same header: the lines go after them.

        Returns:
            The number of entries stored.

        Raises:
            InvalidRecordError: a line does not decode (or holds a newline),
                or the header names the session as its own ``parent_session``.
            InvalidSessionIdError: the header's id breaks the rule.
            DuplicateSessionError: ``after`` is None and the session exists.
            SessionNotFoundError: ``after`` is given and it does not.
            SessionConflictError: the stored header or count is not as given.
        """
        ...

    def journal(
        self, name: str, *, durability: Literal["full", "store"] = "full"
    ) -> SessionJournal:
        """The journal called ``name`` (one per agent), kept in this store.

        Args:
            name: the journal's name.
            durability: how its appends commit: ``"full"`` (what recovery and
                effects rest on) survives a power loss whatever the store's
                durability; ``"store"`` as the store's own writes, for lines
                needing no more than their sessions (LangGraph's checkpoints).
                A clear, a drop and an erase always sync fully.

        Raises:
            InvalidSessionIdError: ``name`` breaks the session-id rule.
            ConfigurationError: ``durability`` is neither.
        """
        ...

    async def journals(self) -> builtins.list[str]:
        """The names of the journals that hold any lines, in no particular order."""
        ...

    def drop_caches(self) -> None:
        """Forget what this object keeps in memory to spare reads (contexts,
        headers; never data): the next call reads as a new store object would."""
        ...

    async def close(self) -> None:
        """Release the store's resources. Closing twice is fine."""
        ...

    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None: ...


@runtime_checkable
class BranchingStore(Protocol):
    """`Capability.BRANCHES`: forks, and named heads that move between sessions
    (without it, an append given ``expect_head`` raises `CapabilityError`)."""

    async def fork(
        self, source_id: str, *, at: str | None = None, meta: SessionMeta | None = None
    ) -> SessionMeta:
        """Branch a session: a new one holding the source's entries up to and
        including the first whose id is ``at`` (all when None), then its own.

        The source is never written; forks fork to any depth. SQL shares the
        prefix (a fork costs the same whatever the source's length), JSONL
        copies it byte for byte; every read gives the same.

        Args:
            source_id: the session to branch from.
            at: the id of the last entry to keep; None keeps them all.
            meta: the new header; by default `SessionMeta.new` with the
                source's owner, tags and metadata, and (with
                `Capability.TITLES`) the source's current title as the fork's
                first title change. Its ``parent_session`` is set to
                ``source_id`` when left None.

        Returns:
            The new session's header, as stored.

        Raises:
            SessionNotFoundError: no session ``source_id``.
            EntryNotFoundError: the source holds no entry ``at``; nothing is
                created.
            DuplicateSessionError: ``meta.id`` exists.
            InvalidRecordError: ``meta.parent_session`` names another session.
        """
        ...

    async def set_head(
        self,
        name: str,
        session_id: str,
        *,
        expect: str | EllipsisType | None = ...,
        expect_last: str | None = None,
    ) -> HeadMove:
        """Point the head ``name`` ("the current session of X") at a session.

        A move records a new position, stamped now; every earlier one stays
        in `head_history`, concurrent moves each kept. A conditional move is
        checked and recorded in one step: of movers that read the same
        position, exactly one moves it.

        Args:
            name: the head.
            session_id: the session it is to name.
            expect: move only if the head names this session (None: was
                never set); left out, the move is unconditional.
            expect_last: with ``expect`` naming a session, move only if it
                still ends at this entry (``""``: none), as for `append_many`.

        Returns:
            The move recorded.

        Raises:
            InvalidSessionIdError: ``name`` breaks the session-id rule.
            SessionNotFoundError: no session ``session_id``; nothing recorded.
            SessionConflictError: ``expect`` was given and the head stands
                elsewhere, or ``expect_last`` and its session ends elsewhere
                (the error's ``what``, ``expected`` and ``actual`` say
                which); nothing recorded.
            ConfigurationError: ``expect`` is neither a string nor None, or
                ``expect_last`` is given without ``expect`` naming a session.
        """
        ...

    async def head(self, name: str) -> str | None:
        """The session the head ``name`` names now; None if it was never set."""
        ...

    async def head_history(self, name: str) -> builtins.list[HeadMove]:
        """Every position the head ``name`` had, oldest first (empty if never set)."""
        ...

    async def heads(self) -> builtins.list[str]:
        """The names of every head ever set, in no particular order."""
        ...

    async def import_head(self, name: str, moves: Sequence[HeadMove], *, after: int = 0) -> int:
        """Record moves of the head ``name`` verbatim (``at`` included), all or
        none, as its newest positions: the archive's import. A move may name
        a session this store does not hold (erased or retired since).

        Args:
            name: the head.
            moves: the positions to record, oldest first.
            after: how many positions the head holds now: the moves go after them.

        Returns:
            The number of positions recorded.

        Raises:
            InvalidSessionIdError: ``name``, or a move's session id, breaks
                the session-id rule.
            InvalidRecordError: a move is not a `HeadMove`.
            SessionConflictError: the head holds another number of positions
                than ``after``; nothing recorded.
        """
        ...


@runtime_checkable
class TitledStore(Protocol):
    """`Capability.TITLES`: titles given to sessions after their creation."""

    async def set_title(self, session_id: str, title: str | None) -> TitleChange:
        """Give a session a title now (None: back to its header's), recorded as
        a new `TitleChange` beside the log, erased with the session; the last
        is its title in `summaries`.

        Raises:
            SessionNotFoundError: no such session; nothing recorded.
            InvalidRecordError: ``title`` is neither a string nor None.
        """
        ...

    async def titles(self, session_id: str) -> builtins.list[TitleChange]:
        """Every title the session was given after its creation, oldest first.

        Raises:
            SessionNotFoundError: no such session.
        """
        ...

    async def import_titles(
        self, session_id: str, changes: Sequence[TitleChange], *, after: int = 0
    ) -> int:
        """Record title changes verbatim (time included) for the archive, only
        when the session holds exactly ``after`` changes: run twice, once.

        Returns:
            How many were recorded (0 when the store already had more).

        Raises:
            SessionNotFoundError: no such session.
            InvalidRecordError: a change names another session.
        """
        ...


@runtime_checkable
class BrowsableStore(Protocol):
    """`Capability.SUMMARIES`: paged listings of sessions at a glance."""

    async def summaries(
        self,
        *,
        owner: str | None = None,
        order: Order = "last_activity",
        limit: int | None = 50,
        after: str | None = None,
    ) -> builtins.list[SessionSummary]:
        """A page of sessions at a glance, newest first.

        Pass the last summary's ``cursor`` as ``after`` for the next page; a
        page shorter than ``limit`` is the last. Paging is exact: each
        session that existed at the first page is listed once, in the order
        as it stood then; one created since is not listed, one erased is
        left out. A session that does not decode is listed with its
        `SessionSummary.fault`. SQL answers from indexes; JSONL and memory
        read every header.

        Args:
            owner: only the sessions whose header names this owner.
            order: ``"last_activity"`` (the session last written to first)
                or ``"created"`` (by the header's ``created_at``, then id).
            limit: how many at most (1 or more); None for every one.
            after: a `SessionSummary.cursor` from the same ``owner`` and
                ``order``.

        Raises:
            InvalidCursorError: ``after`` is not a cursor of this listing,
                or continues a listing this store no longer holds.
            ConfigurationError: another ``order``, a ``limit`` below 1, an
                ``owner`` that is not a string.
        """
        ...


@runtime_checkable
class ErasingStore(Protocol):
    """`Capability.ERASURE`: sessions removed whole, each leaving a record."""

    async def erase(self, session_id: str, *, reason: str, digest: str | None = None) -> Erasure:
        """Remove a whole session (the one way anything leaves a store), writing
        its `Erasure` (no content) in the same step.

        Header, entries and caches go; a head may still name the id, which
        then reads as not found. An append racing it lands before it or
        raises `SessionNotFoundError`. Backends say what "the bytes go" means
        (docs/stores.md). Where forks share the entries (SQL) it is refused
        while one exists; where each holds a copy, they are untouched.
        ``digest`` (`Erasure.digest`'s form) erases only if the session
        still has exactly those bytes.

        Raises:
            SessionNotFoundError: no such session; nothing is recorded.
            SessionConflictError: forks share its entries (named), or its
                bytes no longer have ``digest``; nothing is changed.
            ConfigurationError: ``reason`` is not a non-empty string.
        """
        ...

    async def erasures(self) -> builtins.list[Erasure]:
        """Every erasure record, oldest first (sessions and journals)."""
        ...


@runtime_checkable
class SessionStore(CoreStore, BranchingStore, TitledStore, BrowsableStore, ErasingStore, Protocol):
    """A store with every capability, as every shipped backend is; code that
    needs only the core takes a `CoreStore`."""


_PROTOCOLS: dict[Capability, type] = {
    Capability.BRANCHES: BranchingStore,
    Capability.TITLES: TitledStore,
    Capability.SUMMARIES: BrowsableStore,
    Capability.ERASURE: ErasingStore,
}
"""The protocol of each capability."""
