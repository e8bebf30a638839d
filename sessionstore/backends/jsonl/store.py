"""`JsonlStore`: one JSONL file per session in a directory.

Its files, locks, durability, crash repair and what it refuses to open are
in docs/jsonl.md; each helper module says how it keeps its part.
"""

from __future__ import annotations

import asyncio
import builtins
import dataclasses
import logging
import os
import weakref
from collections.abc import AsyncIterable, AsyncIterator, Callable, Sequence
from functools import partial
from pathlib import Path
from types import EllipsisType
from typing import TypeVar

from sessionstore.backends.base import StoreBase
from sessionstore.backends.checks import (
    Durability,
    JournalDurability,
    check_durability,
    check_expectations,
    check_head,
    check_journal_durability,
    check_last,
    check_unchanged,
)
from sessionstore.backends.contexts import BuiltContext, ContextCache
from sessionstore.backends.cursors import Cursor
from sessionstore.backends.files import (
    fsync_directory,
    in_thread,
    truncate_back,
    write_all,
)
from sessionstore.backends.jsonl import heads as head_files
from sessionstore.backends.jsonl import hints, survey
from sessionstore.backends.jsonl import titles as title_files
from sessionstore.backends.jsonl.blocks import BlockWriter, read_blocks
from sessionstore.backends.jsonl.context import entries_between, last_entry_id, read_context
from sessionstore.backends.jsonl.erasures import ErasureLog, digest_file
from sessionstore.backends.jsonl.file import (
    READ,
    SUFFIX,
    batch_ended,
    batch_started,
    complete_size,
    file_id,
    followed,
    open_locked,
    open_session,
    parse,
    read_header,
    repair,
    stamp,
)
from sessionstore.backends.jsonl.fork import write_fork
from sessionstore.backends.jsonl.hints import first_kept
from sessionstore.backends.jsonl.importing import Importer
from sessionstore.backends.jsonl.journal import FileJournal
from sessionstore.backends.jsonl.keyindex import KeyIndexes
from sessionstore.backends.jsonl.listing import Kept, ListingGate, Listings, after_key, facts
from sessionstore.backends.jsonl.survey import journal_path, journals, sessions
from sessionstore.backends.jsonl.temporary import Temporary
from sessionstore.backends.records import (
    current_title,
    entry_lines,
    header_line,
    imported_header,
)
from sessionstore.backends.workers import Workers
from sessionstore.errors import (
    ConfigurationError,
    SessionNotFoundError,
    validate_session_id,
)
from sessionstore.models import (
    Erasure,
    HeadMove,
    SessionEntry,
    SessionMeta,
    TitleChange,
)
from sessionstore.store import Capability, Order, SessionSummary
from sessionstore.timestamps import rfc3339_of_ns

__all__ = ["SUFFIX", "JsonlStore"]

_T = TypeVar("_T")
logger = logging.getLogger(__name__)

THREADS = 2  # threads for file work: a session's calls one at a time, in order; others beside


class JsonlStore(StoreBase):
    """A directory of JSONL session files; see `SessionStore` for the contract.

    Args:
        directory: where the session files live; created on the first
            `create`. A missing directory lists nothing.
        durability: ``"normal"`` (survives a process crash) or ``"full"``
            (``fsync`` on every write: survives a power loss).
        write_caches: False when reads must leave the directory as it is
            (the command line's commands, an archive's ``sessions/``): a
            listing keeps no order in ``.listings/`` (its later pages go on
            by key, exact while nothing is written between them), and a
            context writes no hint in ``.kept/``. Writes write the rest as ever.
        read_only: True for a directory that must stay as it is (an archive's
            ``sessions/``): no cache written, a crash's remnant skipped and
            logged, never cut (`integrity` names it), a write to a session,
            head or title a `ConfigurationError`; one thread of file work.
        links_within: with ``read_only``, where a link at a session's name may
            lead (an archive's root): read and listed, not titled nor summarized.
    """

    capabilities = frozenset(Capability)  # every one

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        durability: Durability = "normal",
        write_caches: bool = True,
        read_only: bool = False,
        links_within: str | os.PathLike[str] | None = None,
    ):
        check_durability(durability)
        for option, value in (("write_caches", write_caches), ("read_only", read_only)):
            if not isinstance(value, bool):
                raise ConfigurationError(f"{option} takes True or False, not {value!r}")
        self._dir = Path(directory)
        try:
            is_file = self._dir.is_file()
        except (OSError, ValueError) as exc:  # a name too long, a NUL in it
            raise ConfigurationError(f"{str(self._dir)!r} cannot be a directory: {exc}") from None
        if is_file:
            raise ConfigurationError(f"{str(self._dir)!r} is a file, not a session directory")
        self._full = durability == "full"
        self._contexts: ContextCache[tuple[int, int]] = ContextCache()
        self._erasures = ErasureLog(self._dir, full=self._full)
        self._erasure_mark = 0  # the erasure log's size when the contexts were cached
        if links_within is not None and not read_only:  # a write never goes through a link
            raise ConfigurationError("links_within is for a store opened read_only")
        self._writes = not read_only  # also the reads' repairs
        self._within = None if links_within is None else Path(links_within)
        self._write_caches = write_caches and not read_only
        self._listings = Listings(self._dir, keep=self._write_caches)
        self._gate = ListingGate()  # writes wait for the listings asked before them
        self._journal_keys = KeyIndexes()  # where each journal's keyed lines are
        name = f"sessionstore-jsonl {self._dir}"  # read_only: one thread (an archive read in turn)
        self._workers = Workers(THREADS if self._writes else 1, name, keyed=True)
        weakref.finalize(self, self._workers.stop, wait=False)  # dropped unclosed

    def __repr__(self) -> str:
        return f"JsonlStore({str(self._dir)!r})"

    def _writing(self, what: str) -> None:
        """Refuse a write to a store opened ``read_only``."""
        if not self._writes:
            raise ConfigurationError(f"{self!r} is open read_only: {what} refused")

    @property
    def directory(self) -> Path:
        """The directory holding the session files."""
        return self._dir

    def drop_caches(self) -> None:
        """Forget the contexts built and the journals' key indexes (the hint
        files beside the sessions stay: they are what a new process finds)."""
        super().drop_caches()
        self._contexts.clear()
        self._journal_keys.drop()

    def journal(self, name: str, *, durability: JournalDurability = "full") -> FileJournal:
        """The journal called ``name``, the file
        ``<dir>/journals/<name>/session_journal.jsonl``; ``durability`` and
        what it raises as `SessionStore.journal` says."""
        check_journal_durability(durability)
        validate_session_id(name)
        self._check_open(name)
        path = journal_path(self._dir, name)
        return FileJournal(
            path,
            erasures=self._erasures,
            own_dirs=2,
            indexes=self._journal_keys,
            synced=durability == "full" or self._full,
        )

    async def journals(self) -> builtins.list[str]:
        self._check_open()
        return await self._run(None, lambda: journals(self._dir)[0])

    def path(self, session_id: str) -> Path:
        """The file of a session (after checking the id)."""
        return self._dir / f"{validate_session_id(session_id)}{SUFFIX}"

    async def _run(self, session_id: str | None, call: Callable[[], _T]) -> _T:
        """File work in the session's thread; OS errors name the file (the session's)."""
        where = self._dir if session_id is None else partial(self.path, session_id)
        return await in_thread(
            call, where=where, session_id=session_id, workers=self._workers, key=session_id
        )

    async def close(self) -> None:
        """Closed: the calls running end, then the store's threads."""
        await super().close()
        await asyncio.to_thread(self._workers.stop)

    # ------------------------------------------------------------ create

    async def create(self, meta: SessionMeta) -> str:
        line = (header_line(meta) + "\n").encode()
        self._check_open(meta.id)
        self._writing("create")
        await self._gate.passed()
        await self._run(meta.id, lambda: self._create(meta.id, line))
        return meta.id

    def _create(self, session_id: str, line: bytes) -> None:
        # Written aside and linked into place: no reader finds the file without its header.
        temporary = Temporary.create(self.path(session_id), "create", swept=False)
        try:
            write_all(temporary.fd, line)
            temporary.publish(session_id, full=self._full)
        finally:
            temporary.close()

    # ------------------------------------------------------------ append

    async def append_many(
        self,
        session_id: str,
        entries: Sequence[SessionEntry],
        *,
        expect_last: str | None = None,
        expect_head: str | None = None,
    ) -> None:
        check_expectations(expect_last, expect_head, session_id=session_id)
        self._check(session_id)
        self._writing("append")
        data = "".join(line + "\n" for line in entry_lines(session_id, entries)).encode()
        await self._gate.passed()
        append = partial(self._append, session_id, data, expect_last, expect_head)
        await self._run(session_id, append)

    def _append(
        self,
        session_id: str,
        data: bytes,
        expect_last: str | None,
        expect_head: str | None,
    ) -> None:
        path = self.path(session_id)
        fd = open_locked(session_id, path, os.O_RDWR | os.O_APPEND)
        try:
            size = repair(session_id, path, fd, full=self._full)
            # Under the lock: no append in between, nor a move made from this
            # session's end (`_set_head` takes this lock before the head's).
            if expect_last is not None:
                check_last(session_id, expect_last, last_entry_id(session_id, str(path), fd, size))
            if expect_head is not None:
                current = head_files.last_session(expect_head, self._head(expect_head))
                check_head(expect_head, session_id, current, by="append")
            if data:
                batch = data.count(b"\n") > 1  # one line is whole or torn, never half
                if batch:
                    batch_started(path, size)
                try:
                    write_all(fd, data)
                    stamp(fd)
                    if self._full:
                        os.fdatasync(fd)
                except OSError as exc:  # a full disk took part of it: all or nothing
                    truncate_back(fd, size, exc)
                    raise
                if batch:  # on a failure the note stays: the next repair cuts back
                    batch_ended(path)
        finally:
            os.close(fd)  # releases the lock

    # ------------------------------------------------------------ load

    async def load(self, session_id: str) -> builtins.list[SessionEntry]:
        self._check(session_id)
        return await self._run(session_id, lambda: self._load(session_id))

    def _load(self, session_id: str) -> builtins.list[SessionEntry]:
        path = self.path(session_id)
        with open(open_session(session_id, path, os.O_RDONLY, within=self._within), "rb") as file:
            fd = file.fileno()
            size = complete_size(session_id, path, fd, full=self._full, repairs=self._writes)
            data = file.read(size)
        return parse(session_id, path, data)

    async def _built_context(self, session_id: str) -> BuiltContext[tuple[int, int]]:
        return await self._run(session_id, lambda: self._context(session_id))

    def _context(self, session_id: str) -> BuiltContext[tuple[int, int]]:
        path = self.path(session_id)
        self._forget_if_erased()
        fd = open_session(session_id, path, os.O_RDONLY, within=self._within)
        try:
            size = complete_size(session_id, path, fd, full=self._full, repairs=self._writes)
            status = os.fstat(fd)
            file = (status.st_dev, status.st_ino)
            built = self._contexts.get(session_id)
            # The bytes before a complete line never change: what was read
            # of this file holds, and only what follows is read.
            if built is not None and built.stamp == file and 0 <= size - built.extent <= READ:
                new = entries_between(session_id, str(path), fd, built.extent, size)
                built = built.extended(size, new)
            else:
                built = None
            if built is None:
                # Where the context starts, read from a hint beside the files
                # when the search would be long.
                earlier = partial(first_kept, self._dir, session_id, file, write=self._write_caches)
                built = read_context(session_id, str(path), fd, size, earlier, file)
            self._contexts.put(session_id, built)
            return built
        finally:
            os.close(fd)

    # ------------------------------------------------------------ archive

    def _locations(self, session_id: str) -> tuple[str, str]:
        path = str(self.path(session_id))
        return path, path

    async def raw_blocks(self, session_id: str) -> AsyncIterator[bytes]:
        self._check(session_id)
        path = self.path(session_id)
        size_of = partial(complete_size, session_id, path, full=self._full, repairs=self._writes)
        run = partial(self._run, session_id)
        async for block in read_blocks(session_id, path, run, size_of, self._within):
            yield block

    async def raw_lines(self, session_id: str) -> AsyncIterator[str]:
        async for block in self.raw_blocks(session_id):
            lines = block.decode("utf-8").split("\n")
            lines.pop()  # what follows the block's last newline: nothing
            for line in lines:
                yield line

    async def import_session(
        self, header: str, entries: AsyncIterable[str], *, after: int | None = None
    ) -> int:
        meta = imported_header(header)
        self._check(meta.id)
        self._writing("import")
        path = self.path(meta.id)
        await self._gate.passed()
        # Not in the session's thread: an import holds the session's lock
        # from one call to the next, and an append waiting for it there would
        # keep the import's next call from running.
        run = partial(in_thread, where=path, session_id=meta.id)
        writer = Importer(meta.id, path, self._full, run)
        if after is None:
            return await writer.new(header, entries)
        return await writer.more(header, entries, after)

    async def import_blocks(
        self, session_id: str, blocks: AsyncIterable[bytes], *, after: int | None = None
    ) -> int:
        """`import_session` of blocks another store's `raw_blocks` gave (lines it
        checked), written as they come, only the header decoded, no index of
        ids: with ``after`` None a new session from its header on, else the
        lines after its ``after`` entries, the file replaced whole, never
        extended in place (`sessionstore.backends.jsonl.blocks`)."""
        self._check(session_id)
        self._writing("import")
        await self._gate.passed()
        path = self.path(session_id)
        run = partial(in_thread, where=path, session_id=session_id)  # as an import's: a lock held
        return await BlockWriter(session_id, path, self._full, run).write(blocks, after)

    # ------------------------------------------------------------ branches

    async def _meta(self, session_id: str) -> SessionMeta:
        """The header, from the file's first line alone."""
        path = self.path(session_id)

        def meta() -> SessionMeta:
            try:
                return read_header(followed(path, self._within), session_id)
            except FileNotFoundError:
                raise SessionNotFoundError(session_id) from None

        return await self._run(session_id, meta)

    async def _fork(self, source_id: str, at: str | None, meta: SessionMeta, header: str) -> None:
        self._writing("fork")
        source, line = self.path(source_id), (header + "\n").encode()
        fork = partial(write_fork, source_id, source, at, meta.id, self.path(meta.id), line)
        fork = partial(fork, full=self._full, block=READ)
        await self._gate.passed()
        await self._run(meta.id, fork)

    def _head(self, name: str) -> Path:
        return self._dir / head_files.HEADS / f"{name}{SUFFIX}"

    async def _set_head(
        self,
        name: str,
        move: HeadMove,
        expect: str | EllipsisType | None,
        expect_last: str | None,
    ) -> None:
        self._writing("set_head")
        # With expect_last, the session ``expect`` names is locked first (as an
        # append locks it): no append lands on it between the check and the move.
        session_id, path = move.session_id, self._head(name)

        def set_head() -> None:
            # A session erased after this check leaves the head naming it,
            # as an erase after the move would: heads keep their history.
            os.close(open_session(session_id, self.path(session_id), os.O_RDONLY))
            if expect_last is None:
                head_files.append_move(name, path, move, full=self._full, expect=expect)
                return
            assert isinstance(expect, str)
            left = self.path(expect)
            fd = open_locked(expect, left, os.O_RDWR | os.O_APPEND)
            try:
                size = repair(expect, left, fd, full=self._full)
                last = last_entry_id(expect, str(left), fd, size)
                check_last(expect, expect_last, last, by="move")
                head_files.append_move(name, path, move, full=self._full, expect=expect)
            finally:
                os.close(fd)  # releases the lock

        await in_thread(set_head, where=path, workers=self._workers, key=path)

    async def _import_head(self, name: str, moves: builtins.list[HeadMove], after: int) -> None:
        self._writing("import_head")
        path = self._head(name)
        append = partial(head_files.append_moves, name, path, moves, full=self._full, after=after)
        await in_thread(append, where=path, workers=self._workers, key=path)

    async def _head_history(self, name: str) -> builtins.list[HeadMove]:
        path = self._head(name)
        read = partial(head_files.read_moves, name, path)
        return await in_thread(read, where=path, workers=self._workers, key=path)

    async def heads(self) -> builtins.list[str]:
        self._check_open()
        names, faults = await self._run(None, partial(head_files.names, self._dir))
        for fault in faults:
            logger.warning("skipping %s", fault)
        return names

    # ------------------------------------------------------------ titles

    async def _set_title(self, session_id: str, change: TitleChange) -> None:
        self._writing("set_title")
        record = partial(title_files.record_changes, self._dir, session_id, [change])
        await self._run(session_id, partial(record, full=self._full))

    async def _titles(self, session_id: str) -> builtins.list[TitleChange]:
        return await self._run(session_id, partial(title_files.read_changes, self._dir, session_id))

    async def _import_titles(
        self, session_id: str, changes: builtins.list[TitleChange], after: int
    ) -> int:
        self._writing("import_titles")
        record = partial(title_files.record_changes, self._dir, session_id, changes)
        return await self._run(session_id, partial(record, full=self._full, after=after))

    # ------------------------------------------------------------ summaries

    async def _summaries(
        self, owner: str | None, order: Order, limit: int | None, after: str | None, kind: str
    ) -> builtins.list[SessionSummary]:
        # A page: positions in the order the listing's first page kept
        # (`sessionstore.backends.jsonl.listing`); only the sessions given are read whole.
        erased: set[str] = set()  # since the listing's first page
        if after is None:
            with self._gate.scanning():
                begin = partial(self._listings.begin, kind, order, owner)
                kept = await self._run(None, begin)
            start = 0
        else:
            cursor = Cursor.decode(after, kind, length=2)
            if cursor.mark == "":  # an order not kept: the rows after its key, now
                later = partial(after_key, self._dir, order, owner, cursor.key)
                kept, start = Kept("", 0, await self._run(None, later)), 0
            else:
                kept, start = await self._run(None, partial(self._listings.resume, cursor))
                erased = await self._run(None, partial(self._erasures.erased_since, kept.begun_ns))
        page: builtins.list[SessionSummary] = []
        # A cursor for the rows read alone: made for every row of the order,
        # on the loop, they cost a page 0.3 s among 30,000 sessions.
        for at in range(start, len(kept.rows)):
            if limit is not None and len(page) == limit:
                break
            row = kept.rows[at]
            if row.session_id in erased:
                continue
            key = (str(at + 1) if kept.token else str(row.key), row.session_id)
            summary = await self._summary_of(
                row.session_id, row.inode, Cursor(kind, kept.token, key)
            )
            if summary is not None:  # erased since the listing began: left out
                page.append(summary)
        return page

    async def _summary_of(
        self, session_id: str, inode: int, cursor: Cursor
    ) -> SessionSummary | None:
        """The summary of a session a listing found (None: gone since)."""
        found = await self._run(session_id, partial(facts, self._dir, session_id, inode))
        if found is None:
            return None
        summary = await self._summary(
            found.meta,
            title=current_title(found.meta, found.changes),
            last_activity=rfc3339_of_ns(found.active_ns),
            cursor=cursor.encode(),
        )
        if summary is not None and found.fault is not None and summary.fault is None:
            summary = dataclasses.replace(summary, fault=found.fault)
        return summary

    # ------------------------------------------------------------ lifecycle

    async def _erase(self, session_id: str, reason: str, digest: str | None) -> Erasure:
        self._writing("erase")
        erase = partial(self._erase_file, session_id, reason, digest)
        return await self._run(session_id, erase)

    def _erase_file(self, session_id: str, reason: str, digest: str | None) -> Erasure:
        path = self.path(session_id)
        try:
            fd = open_locked(session_id, path, os.O_RDWR)
        except SessionNotFoundError:
            self._erasures.done("session", session_id)  # a finished erase's note
            raise
        try:
            size = repair(session_id, path, fd, full=self._full)
            fresh = digest_file("session", session_id, reason, fd, size, block=READ)
            check_unchanged(fresh, digest)
            # Recorded before the file goes: a crash in between leaves both,
            # and erasing again finishes without a second record.
            record = self._erasures.record(fresh, file_id(fd))
            # Its titles first: a crash before the unlink leaves the erase
            # unfinished (erasing again finishes it), never titles of no session.
            title_files.forget(self._dir, session_id)
            hints.forget_ids(self._dir, session_id)  # an older version's, under this lock
            path.unlink()  # under the lock: a writer waiting for it finds no file
        finally:
            os.close(fd)
        self._contexts.discard(session_id)
        hints.forget(self._dir, session_id)
        fsync_directory(self._dir)  # the name's removal survives a power loss
        self._erasures.done("session", session_id)
        return record

    def _forget_if_erased(self) -> None:
        """Forget every cached context once the erasure log grew (an erase by any
        process): a session created again may get the erased file's inode."""
        try:
            mark = os.stat(self._erasures.path).st_size
        except FileNotFoundError:
            mark = 0
        if mark != self._erasure_mark:
            self._contexts.clear()
            self._erasure_mark = mark

    async def erasures(self) -> builtins.list[Erasure]:
        self._check_open()
        return await self._run(None, self._erasures.read)

    # ------------------------------------------------------------ list

    async def list(self) -> builtins.list[SessionMeta]:
        self._check_open()
        return await self._run(None, self._list)

    def _list(self) -> builtins.list[SessionMeta]:
        metas, faults = sessions(self._dir, within=self._within)
        for fault in faults:
            logger.warning("skipping %s", fault)
        return metas

    async def integrity(self) -> builtins.list[str]:
        # Also a head file's line that does not decode; a dead writer's
        # temporary is no fault (the next fork or import deletes it).
        self._check_open()
        faults = partial(survey.faults, self._dir, self._erasures, torn=not self._writes)
        faults = partial(faults, within=self._within)
        return await self._run(None, faults)
