"""The store contract: what every backend does, stated once (SPEC section 4).

`CoreStore` is what every backend does; each `Capability` a backend
declares adds the operations of one protocol (`BranchingStore`,
`TitledStore`, `BrowsableStore`, `ErasingStore`), and `SessionStore` is a
store with all of them, as every shipped backend (`MemoryStore`,
`JsonlStore`, the SQL store) is. One contract suite,
`sessionstore.testing.SessionStoreContract`, proves a backend against the
core and what it declares. The backends' own docstrings, `StoreBase`'s and
the blocking facade's say only what differs: where data lives and what
survives a crash.
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
    """What a store does beyond the core (`CoreStore`), declared by its class.

    Each is the operations of one protocol; `operations` names them. The
    core holds conditional appends (``expect_last``), compaction, search
    (a backend without an index of its own searches by reading every
    message), the journals with their keyed lines and effects, and the
    archive's import. Sealing (`sessionstore.encryption`) is how a JSONL or
    SQL store is opened, not a capability: a sealed store declares what the
    plain one does.
    """

    BRANCHES = "branches"
    """`BranchingStore`: `fork`, `set_head`, `head`, `head_history`,
    `heads`, `import_head`, and `append_many`'s ``expect_head``."""

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
        meta: the header (``meta.id``, ``meta.owner``, ``meta.parent_session``,
            ``meta.created_at``...).
        entries: how many entries the session holds.
        last_timestamp: the ``timestamp`` of its last entry; None when empty.
        compacted: whether it holds a compaction entry.
        fault: None when the session read back sound; otherwise why it does
            not (a `CorruptSessionError`'s message: session, file or table,
            line). ``entries``, ``last_timestamp`` and ``compacted`` then
            describe what was read before the fault, and ``meta`` holds only
            the id when the header itself is what does not decode.
        title: the session's title now: the last `set_title`, else the
            header's ``title``; None when it has none.
        last_activity: RFC 3339 time (UTC) of the store's last write to the
            session: its creation (fork, import) or its latest append.
        cursor: pass it as ``after=`` to get the sessions listed after this one.
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
        session_id: the session holding the message. A message a fork
            shares with its source is found in each session that holds it.
        entry_id: the message entry's id.
        seq: the entry's position in the session, 1 for the first entry.
        role: the message's role.
        snippet: the message text around the match, literal text (never
            markup), at most about 200 characters, ``…`` where it was cut.
        highlights: ``(start, end)`` offsets in ``snippet`` of each word
            that matched, in order.
        cursor: pass it as ``after=`` to get the hits after this one.
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
    """A run of a session's entries, and where it stands in the session
    (`SessionStore.load_slice`).

    Nothing stored changes, so entries read at positions ``start`` to
    ``stop`` stay those entries for as long as the session exists: a reader
    that kept them reads on from ``stop`` next time.

    Attributes:
        entries: the entries, in append order.
        start: the position of the first, 0 for the session's first entry
            (where an empty run would begin when there is none).
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
    """An agent's crash-recovery journal (SPEC section 5).

    The record of what a session wrote while it ran, so that a session
    stopped before its state was saved is not forgotten. The recovery
    pattern, at agent start::

        leftover = await journal.read()
        for session in leftover.interrupted():
            ...  # tell the agent what those sessions wrote
        await journal.begin(SessionHeader(started_at=Timestamp.now(), model=m), leftover)
        ...
        await journal.append(PostWrite(at=Timestamp.now(), id=post_id))  # each write
        ...
        await journal.clear()  # once the session's state is saved

    Every backend gives the same `read` after the same calls, skipped line
    numbers included. Each `append` is durable against a power loss when it
    returns.
    """

    async def read(self) -> Journal:
        """The journal as it stands; an empty `Journal` when there is none.

        Parsing never fails: unreadable lines are skipped and their numbers
        kept in `Journal.skipped`.
        """
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
        """Append lines verbatim, whether or not they parse, all or none.

        For importing journals written elsewhere: a torn or foreign line is
        kept, so the journal reads back with the same skipped line numbers.

        Raises:
            InvalidRecordError: a line contains a newline; nothing is written.
        """
        ...

    async def read_bytes(self) -> bytes:
        """The journal as a journal file holding it would read: its lines, each
        followed by a newline (a file journal gives its bytes as they are)."""
        ...

    async def clear(self) -> None:
        """Forget the journal (once a session's state is saved).

        Nothing to clear is fine. Stores that keep history record the clear
        instead of deleting anything.
        """
        ...

    async def keyed(self, *keys: str) -> dict[str, builtins.list[bytes]]:
        """The lines stored under each key, since the journal's last clear.

        A *keyed line* is one JSON object whose top-level member ``"key"``
        is a string (`sessionstore.wire.line_key` says which, as the strict
        decoder reads it); every backend indexes it under that key, whatever
        wrote it (`append`, `append_raw`, an archive's import). A line that
        does not decode (torn by a crash), or repeats ``"key"``, has none.

        Args:
            keys: the keys wanted (each counted once).

        Returns:
            Each key that has lines, mapped to them as stored (without their
            newlines), oldest first; a key without one is absent. It costs
            what it returns, not the journal's length (an index; a sealed
            store looks the key up by its token).

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
            ``(key, lines)`` pairs, the greatest key first, each key's lines
            as `keyed` gives them. It costs what it returns (a sealed
            store, whose index keeps tokens, keeps the keys in order in
            the store object: its first scan of a journal opens every line).

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
        """Append lines verbatim, all or none, unless the lines under ``keys``
        say otherwise: a conditional write that costs what it looks at.

        ``found`` is given what `keyed` would return for ``keys``; its
        answer, when not None, is returned with nothing appended. Whole:
        no other append to the journal, from any thread or process, comes
        between the look and the append. ``found`` may run in a worker
        thread, under the journal's lock: it only reads what it is given.

        Raises:
            ConfigurationError: ``keys`` is not a sequence of strings.
            InvalidRecordError: a line contains a newline; nothing is written.
        """
        ...

    async def drop(self, *keys: str, reason: str) -> Erasure | None:
        """Remove every line stored under ``keys``, recorded as an erasure.

        Lines from before the journal's last clear go too. All or nothing:
        the lines, their index and the record go in one step (a store's
        transaction; a file written anew and renamed over the journal,
        under its lock). The record is an `Erasure` of kind ``journal``
        whose ``lines`` and ``digest`` are of the lines removed (in journal
        order, each ending in a newline) and ``keys`` how many keys had
        lines; the store's `erasures` lists it (a `FileJournal` outside a
        store returns it and keeps it nowhere). The journal's other lines
        stay as they were.

        Returns:
            The record; None when no key had a line (nothing is recorded).

        Raises:
            ConfigurationError: ``reason`` is not a non-empty string, or a
                key is not a string.
        """
        ...

    @property
    def effects(self) -> EffectLog:
        """The journal's side effects (`sessionstore.effects`): `EffectLog.once`
        runs one at most once per key, across crashes and runs. Kept apart
        from the journal's lines, never cleared with them; erased with them."""
        ...

    async def erase(self, *, reason: str) -> Erasure | None:
        """Remove the journal whole, its history and its effects included:
        the bytes go.

        Unlike `clear`, nothing of it is kept but the `Erasure` record
        (``kind="journal"``), which the store's `erasures` lists. A journal
        holding nothing is left as it is (None). A `FileJournal` outside a
        store removes its file and returns the record without keeping it.

        Raises:
            ConfigurationError: ``reason`` is not a non-empty string.
        """
        ...


@runtime_checkable
class CoreStore(Protocol):
    """An append-only store of sessions: the core every backend implements.

    A session is a `SessionMeta` header and a log of entries. No operation
    deletes or rewrites an entry or a header; a compaction is a new entry
    that changes how the context is built, never what is stored.

    Every method that takes a session id first checks it against the
    session-id rule (`validate_session_id`) and raises
    `InvalidSessionIdError` before storage is touched. Every text argument
    is refused likewise when it holds a lone surrogate (which UTF-8 cannot
    carry), by the argument's own error (`ConfigurationError` for options
    and filters, `InvalidRecordError` for what is recorded,
    `InvalidCursorError` for ``after``), naming it. A ``limit`` or slice
    position beyond any count means the same as the largest count: integers
    never overflow. Every error derives from `SessionStoreError` and names
    the session; driver and OS errors arrive as `StorageError`, the
    original chained. After `close`, every method raises `StorageError`.

    Concurrency: appends to one session from many tasks never interleave,
    duplicate or lose an entry, and each task's own appends keep their
    order. Durability: an append that returned has reached the storage; a
    crash loses at most the entries in flight. Backends document how far
    "reached the storage" goes (process crash or power loss).

    Stores are async context managers: ``async with store: ...`` closes it.

    Beyond this core, a store does what its `capabilities` declare: the
    operations of `BranchingStore`, `TitledStore`, `BrowsableStore` and
    `ErasingStore`, one `Capability` each. Called on a store that does not
    declare its capability, such an operation raises `CapabilityError`
    (naming the store's class and the capability) before anything else is
    checked, read or written.
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
        """Append one entry to a session.

        Only finalized messages are stored: a message entry whose message
        has ``streaming=True`` is refused.

        Args:
            session_id: the session.
            entry: the entry.
            expect_last, expect_head: as for `append_many`.

        Raises:
            SessionNotFoundError: no such session.
            StreamingMessageError: the message is still streaming; nothing
                is stored.
            InvalidRecordError: the entry holds something the wire format
                cannot carry (a NaN, a non-string key...); nothing is stored.
            SessionConflictError: ``expect_last`` or ``expect_head`` was
                given and does not hold; nothing is stored.
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

        No other append to the session lands between them. Every entry is
        checked before anything is written, so one refused entry stores
        none of them. An empty sequence stores nothing (the session must
        still exist, and ``expect_last`` hold).

        A conditional append states what it read: with ``expect_last``,
        the entries are stored only if the session's last entry is still
        the one of that id (``""``: only if the session holds no entry),
        checked and written in one step, so of several writers that read
        the same end and append at once, exactly one succeeds and the
        others get `SessionConflictError` (read again, decide again). A
        fork's last entry is the last one it holds, shared or its own.
        Entry ids are compared, so the check assumes ids that are not
        reused within a session (as `MessageEntry.new` makes them).

        With ``expect_head``, the name of a head (`BranchingStore.set_head`,
        `Capability.BRANCHES`), the entries
        are stored only if that head names this session now: an append
        that lands on a conversation's current session and never on one a
        concurrent move has just left, checked in the same step.

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
        self, session_id: str, start: int = 0, stop: int | None = None
    ) -> EntrySlice:
        """``load(session_id)[start:stop]``, read at the cost of what it returns.

        The positions are Python's slice positions: counted from 0, or from
        the end when negative, clipped to the session. ``load_slice(s, -20)``
        gives the last 20 entries and ``load_slice(s, n)`` those appended
        after the first ``n``, with the session's length read in the same
        snapshot, so a reader keeping what it read reads only what was
        appended since. On SQL both are index range reads, whatever the
        session's length (a fork's shared history included); the JSONL and
        memory stores scan the lines and decode only those returned.

        Raises:
            SessionNotFoundError, CorruptSessionError: as for `load` (a line
                outside the slice is not decoded, so not checked).
            ConfigurationError: ``start`` is not an int or ``stop`` neither
                an int nor None; nothing is read.
        """
        ...

    def iter_entries(self, session_id: str) -> AsyncGenerator[SessionEntry, None]:
        """The entries of a session, in append order, streamed.

        What `load` returns, one entry at a time, in memory bounded however
        long the session: for sessions too long to hold whole. Entries
        appended while it runs may be left out. The first step raises what
        `load` would for a session that cannot be read; a line that does
        not decode raises when the stream reaches it.

        Raises:
            SessionNotFoundError, CorruptSessionError: as for `load`.
        """
        ...

    async def list(self) -> builtins.list[SessionMeta]:
        """The headers of every session, in no particular order.

        An empty store lists nothing.
        """
        ...

    async def load_context(
        self, session_id: str, *, repair: PairingDialect | None = None
    ) -> builtins.list[Message]:
        """The messages to send to a model: ``build_context(load(session_id))``.

        Backends may compute it without reading the history before the last
        compaction; the result is the same.

        Args:
            session_id: the session.
            repair: None for the context as built; a dialect to pass it
                through `repair_pairing` too, so that the model API takes
                it whatever came apart (a crash mid-turn, a cut made by
                hand). The log is never touched: the repair exists only in
                the list returned.

        Raises:
            SessionNotFoundError, CorruptSessionError: as for `load`.
            ConfigurationError: ``repair`` names no dialect; nothing is read.
        """
        ...

    async def load_context_with_ids(self, session_id: str) -> builtins.list[tuple[str, Message]]:
        """`load_context`, each message with the id of the entry it came from.

        The messages are those `load_context` gives, in order; the summary
        of the last compaction comes with that compaction's id. For an
        application to cite a message, fork at it (`fork`'s ``at``), or
        choose a cut of its own, without loading the whole session: it
        reads what `load_context` reads, at the same cost. No ``repair``
        here: a repaired list holds messages that no entry holds.

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

        The next context is ``summary`` (as `build_context` words it), then
        at least the last ``keep_last`` messages of the current context,
        moved back as far as needed for the kept part not to start inside
        a tool exchange, nor on a result whose call is gone (`safe_cut`).
        ``summary`` stands for everything before, the previous compaction's
        summary included: a summary is never kept as a message. With
        ``keep_last=0`` only the summary remains: the compaction's
        ``first_kept_id`` is then its own id, naming no message, and its
        context keeps what comes after it. A session whose messages have no
        orphan gets a context with none.

        It reads what `load_context` reads (from the last compaction on),
        then appends the compaction only if the session still ends where
        it read it (a conditional append, `append_many`'s
        ``expect_last``). When another task appended in between, it reads
        again and cuts again, so no entry is ever left out of both the
        summary's span and the context; after `COMPACT_ATTEMPTS` reads
        that each lost such a race it gives up with
        `SessionConflictError`, nothing written. The ``summary`` is the
        caller's: when entries arrived meanwhile, the cut moves over them
        (they are kept, or summarized by this ``summary`` if ``keep_last``
        reaches no further back), so compact between an agent's own turns.
        The cut assumes entry ids are unique (as `MessageEntry.new` makes
        them): a ``first_kept_id`` that an earlier message also carries
        starts the context at that one (SPEC section 4).

        Args:
            session_id: the session.
            summary: what stands for the history cut off.
            keep_last: how many of the last messages to keep at least.
            tokens_before: recorded as is in the entry (the context's size
                before, in the caller's unit).
            dialect: the shape of the messages' tool exchanges. None (the
                default) cuts where every dialect finds no exchange split:
                one session's messages have one shape, whose exchanges the
                other dialects do not see, so this is the cut of that shape.

        Returns:
            The compaction entry appended.

        Raises:
            SessionNotFoundError, CorruptSessionError: as for `load`.
            ConfigurationError: ``keep_last`` is negative or not an integer,
                ``summary`` is no string, ``tokens_before`` is negative, or
                ``dialect`` is unknown; nothing is read or written.
            SessionConflictError: appends kept landing between its read and
                its write (`COMPACT_ATTEMPTS` times); nothing written.
        """
        ...

    async def search(
        self, text: str, *, owner: str | None = None, limit: int = 20, after: str | None = None
    ) -> builtins.list[SearchHit]:
        """Find the messages that say every word of ``text``, best match first.

        Words are runs of letters and digits, matched whole and ignoring
        case (``"Fix the BUG"`` finds "the bug was fixed", not "debugging");
        a message's text is `Message.text()`. Text without a word finds
        nothing. A message a fork shares with its source is a hit in each
        session holding it. SQL backends answer from an index of the same
        words (SQLite: a table of them, filled every 256 entries, the
        newest entries read as they are; PostgreSQL: a ``tsvector`` per
        message with a GIN index, written with each append); JSONL and
        memory read every message.

        The ranking is one on every backend (`sessionstore.backends.words`):
        best ``hits * hits / length`` first (the occurrences of the query's
        words, each counted 256 times at most; the message's words), then
        session id, then ``seq``.

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
        """Faults of the storage itself, beyond what `load` decodes.

        On SQL: the database's own integrity and foreign-key checks, gaps in
        ``seq``, and the first row of each session that no longer matches
        its chain of digests. On JSONL: every file `list` cannot list (an
        empty file, a torn or invalid header, something not a regular file
        under a session's name). Empty when sound, and always for backends
        whose layout cannot hold such faults.
        """
        ...

    def raw_lines(self, session_id: str) -> AsyncIterator[str]:
        """A session's stored lines, verbatim and without newlines, streamed.

        The header line first, then each entry's line in append order, as
        the session's file holds them: byte for byte what was stored (the
        canonical form for records made through this API, the exact text
        for imported ones, ``\r`` included). Memory stays bounded however
        long the session; entries appended meanwhile may be left out.

        Raises:
            SessionNotFoundError, CorruptSessionError: as for `load`.
        """
        ...

    def raw_blocks(self, session_id: str) -> AsyncIterator[bytes]:
        """`raw_lines` as the bytes of the session's file, in blocks.

        Each block holds whole lines, each ending in ``\n``; together they
        are the file. What export writes: a backend gives them without
        handling each line (a page of rows joined, a read of its file).

        Raises:
            SessionNotFoundError, CorruptSessionError: as for `load`.
        """
        ...

    async def import_session(
        self, header: str, entries: AsyncIterable[str], *, after: int | None = None
    ) -> int:
        """Store a session's lines verbatim, all or none: the archive's import.

        Every line is checked as the wire decoders check it, but entries the
        API would refuse today (a streaming message written elsewhere) are
        kept: an archive is history. ``entries`` is consumed as it is
        stored, so an import streams.

        Args:
            header: the header line; its id names the session.
            entries: the entry lines, without newlines.
            after: None to create the session; otherwise the number of
                entries the session holds now, under this same header line:
                the lines are appended after them.

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
            durability: how its appends commit. ``"full"`` (the default,
                what crash recovery and effects rest on): with a full sync,
                whatever the store's durability, so an append that returned
                survives a power loss. ``"store"``: as the store's own writes
                (its ``durability``: a power loss at ``"full"``, a crash of
                the process at ``"normal"``), for lines that need no more
                than the sessions they point to (LangGraph's checkpoints).
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
        """Forget what this store object keeps in memory between calls.

        Stores keep what spares them reading again (contexts they built,
        headers they decoded); none of it is data, and every answer stays
        the same. After this, the next call reads the storage as a new
        store object would: to time a first call, or to free the memory.
        """
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
    """`Capability.BRANCHES`: forks, and named heads that move between sessions.

    With it, `CoreStore.append_many`'s ``expect_head`` is taken too; without
    it, an append given one raises `CapabilityError`.
    """

    async def fork(
        self, source_id: str, *, at: str | None = None, meta: SessionMeta | None = None
    ) -> SessionMeta:
        """Branch a session: a new one holding the source's history up to an entry.

        The new session's history is the source's entries up to and
        including the first entry whose id is ``at`` (all of them when
        ``at`` is None), then whatever is appended to it. Its header's
        ``parent_session`` is the source. The source is never written, and
        each side's later appends stay its own: an edit-and-continue, a
        retried turn or a sub-agent starting from its parent's context.
        Forking a fork works to any depth.

        A backend shares the prefix where its storage can (SQL: the fork
        stores only its header and where it branched, in time and space
        independent of the source's length) and copies it byte for byte
        where each session must stand alone (JSONL: a file the Rust
        implementation loads). Either way every read gives the same.

        Args:
            source_id: the session to branch from.
            at: the id of the last entry to keep; None keeps them all.
            meta: the new session's header; by default a fresh
                `SessionMeta.new` with the source's owner, tags and
                metadata, and no title: a titled source's current title
                becomes the fork's own first title change (`titles`),
                since a header carries only what its session was created
                with. Its ``parent_session`` is set to ``source_id`` when
                left None.

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
        """Point the head ``name`` at a session: "the current session of X".

        Heads are append-only: a move records a new position, stamped now,
        and every earlier one stays in `head_history`. Moves from many
        tasks at once are each kept, one after another.

        A conditional move states where the caller read the head: with
        ``expect``, it moves only if the head still names that session
        (None: only if it was never set), checked and recorded in one
        step, so of several movers that read the same position exactly
        one moves it and the others get `SessionConflictError`.
        ``expect_last`` states too how far the caller read that session:
        the move happens only if the session still ends at that entry, so a
        move made from what was read (the fork a pop makes, the new session
        a clear starts) never leaves behind an entry appended since.

        Args:
            name: the head.
            session_id: the session it is to name.
            expect: where the head must stand for the move to happen: a
                session id, or None for a head never set. Left out, the
                move is unconditional.
            expect_last: with ``expect`` naming a session, the id of its
                last entry (``""``: it holds none), as for `append_many`.

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
        """Record positions of the head ``name`` as given, all or none: the archive's import.

        Each move is kept verbatim, its ``at`` included (where `set_head`
        stamps now): history carried over from another store. The moves
        become the head's newest positions, in their order. A move may name
        a session this store does not hold (one erased or retired since):
        it is kept as the head had it.

        Args:
            name: the head.
            moves: the positions to record, oldest first.
            after: how many positions the head holds now (0 when it was
                never set): the moves are recorded after them.

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
    """`Capability.TITLES`: titles given to sessions after their creation.

    A fork of a titled source gets the source's title as a change of its
    own only where the store has both `Capability.BRANCHES` and this.
    """

    async def set_title(self, session_id: str, title: str | None) -> TitleChange:
        """Give a session a title now (None: back to its header's title).

        The header never changes: the title is recorded beside the log, a
        new `TitleChange` each time (the archive carries them; the
        reference implementation never reads them), and the last one is
        the session's title in `summaries`. Erasing the session erases them.

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
        """Record title changes verbatim (time included): for the archive.

        ``after`` is how many of the session's changes the caller knows are
        stored already (an archive's import counts them); only when the
        store holds exactly that many are ``changes`` appended, so an
        import run twice records them once.

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

        ``order="last_activity"`` puts the session the store last wrote to
        (created, forked, imported or appended to) first;
        ``order="created"`` sorts by the header's ``created_at`` string,
        then id (for the timestamps this library writes, the time of
        creation). Pass the last summary's ``cursor`` as ``after`` for the
        next page; a page shorter than ``limit`` is the last.

        Paging is exact while sessions are created and appended to: each
        session that existed when the first page was read is listed once
        and only once, in the order as it stood then (a session appended
        to meanwhile is not moved ahead of the cursor and lost, nor listed
        twice). A session created after the first page is not listed
        (start again to see it); one erased meanwhile is left out.

        One session's data that does not decode fails no listing: that
        session is summarised with its `SessionSummary.fault` set. SQL
        backends answer a page from indexes, in time independent of how
        many sessions there are; JSONL and memory read every header.

        Args:
            owner: only the sessions whose header names this owner.
            order: ``"last_activity"`` or ``"created"``.
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
    """`Capability.ERASURE`: sessions removed whole, each leaving a record.

    A journal's own `SessionJournal.drop` and `SessionJournal.erase` are
    the journal's, core; `erasures` lists their records too.
    """

    async def erase(self, session_id: str, *, reason: str, digest: str | None = None) -> Erasure:
        """Remove a whole session, and leave a record that it was removed.

        The one way anything leaves a store: the session's header, its
        entries, its cached context and hints all go, and an `Erasure`
        (when, why, how many entries, a digest of the bytes removed, no
        content) is written in the same step, listed by `erasures`. No
        entry is ever removed alone. Named heads keep their history: a head
        may still name the erased id, which then reads as not found.

        An append racing an erase lands before it (and is erased with it)
        or fails with `SessionNotFoundError`: never a half-erased session.
        Backends say what "the bytes go" means for their storage (SQLite:
        overwritten and checkpointed out of the WAL; JSONL: the file
        unlinked; PostgreSQL: see docs/sql.md).

        Forks: where a fork shares the session's stored entries (SQL), the
        erase is refused while such a fork exists, naming it; erase the
        forks first. Where each fork holds its own copy (JSONL, memory), the
        forks are untouched and keep working.

        ``digest`` makes the erase conditional: given the digest of the
        session's bytes as last seen (`Erasure.digest`'s form, as an archive
        copy gives it), the session is erased only if it still has exactly
        those bytes, so an entry appended since is never lost unseen.

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
    """A store with every capability: what every shipped backend is
    (`MemoryStore`, `JsonlStore`, `SqlStore`, sealed or not), and what the
    archive, the command line and the adapters use.

    Code that needs only the core takes a `CoreStore`.
    """


_PROTOCOLS: dict[Capability, type] = {
    Capability.BRANCHES: BranchingStore,
    Capability.TITLES: TitledStore,
    Capability.SUMMARIES: BrowsableStore,
    Capability.ERASURE: ErasingStore,
}
"""The protocol of each capability."""
