"""`retire`: old sessions out of a store, into an archive, never lost on the way.

A session leaves the store only through `SessionStore.erase`, once the
archive's copy has been synced and read back equal, byte for byte, to what
the store holds, and with that copy's digest (docs/archive.md, "Retire").
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import BinaryIO

from sessionstore.archive.choosing import (
    children_first,
    idle_since,
    instant,
    named,
    verdict,
    without_kept_forks,
)
from sessionstore.archive.exporting import (
    LEFT_OUT,
    Against,
    Differs,
    export_chosen,
    record_lines,
)
from sessionstore.archive.report import (
    SESSIONS,
    SUFFIX,
    TITLES,
    ArchiveReport,
    Progress,
    Refused,
    io,
    open_inside,
    parent_cycles,
)
from sessionstore.backends.files import fsync_directory
from sessionstore.errors import (
    ArchiveError,
    ConfigurationError,
    CorruptSessionError,
    SessionConflictError,
    SessionNotFoundError,
)
from sessionstore.store import SessionStore, SessionSummary
from sessionstore.timestamps import Timestamp

__all__ = ["RetireIssue", "RetireReport", "retire"]

REASON = "retired to {archive}"
"""The reason each erasure records; ``{archive}`` is the archive's absolute path."""

ERASED = "erased meanwhile, by another"
"""Why a session chosen is not retired: another writer erased it first (no fault)."""


@dataclass(frozen=True)
class RetireIssue:
    """A session `retire` did not retire (or retired with a problem), and why.

    Attributes:
        session_id: the session.
        reason: what stopped it, in a sentence.
        fault: True when something is wrong (the archive's copy differs, the
            store's data does not read back, the store refused the erase);
            False when the session was left by rule (forks that stay, an
            age that cannot be told, already retired).
    """

    session_id: str
    reason: str
    fault: bool

    def __str__(self) -> str:
        return f"{self.session_id}: {self.reason}"


@dataclass
class RetireReport:
    """What a `retire` run did.

    Attributes:
        archive: the archive's absolute path, as the erasures' reason names it.
        retired: the sessions erased from the store by this run, each after
            its archive copy was checked; children before their parents.
        skipped: the sessions chosen (or named) but left in the store, and why.
        bytes: the size of the retired sessions' files: what now lives only
            in the archive.
        exported: the report of the export this run made (None when it
            chose nothing).
    """

    archive: str
    retired: list[str] = field(default_factory=list)
    skipped: list[RetireIssue] = field(default_factory=list)
    bytes: int = 0
    exported: ArchiveReport | None = None

    @property
    def ok(self) -> bool:
        """Whether nothing was skipped for a fault."""
        return not any(issue.fault for issue in self.skipped)


async def retire(
    store: SessionStore,
    dest: str | os.PathLike[str],
    *,
    before: datetime | str | Timestamp | None = None,
    idle_for: timedelta | None = None,
    sessions: Sequence[str] | None = None,
    progress: Progress | None = None,
    confirm: Callable[[Sequence[str], int], Awaitable[bool]] | None = None,
) -> RetireReport:
    """Move sessions out of the store into the archive at ``dest``, checked.

    Chooses the sessions that pass every filter given (they combine as AND;
    giving none is an error, so nothing is retired by accident), exports
    them, then, forks before the sessions they came from, erases each one
    whose archive copy is read back equal to the store's bytes, on the
    condition that they still have its digest. What stays in the store and
    why, and what holds across crashes: docs/archive.md, "Retire".

    Args:
        store: any store.
        dest: the archive directory; created when missing.
        before: only sessions whose ``created_at`` is strictly earlier: an
            aware `datetime`, a `Timestamp` or an RFC 3339 string (instants
            are compared, offsets and leap seconds included).
        idle_for: only sessions whose last entry (their creation, when they
            have none) is at least this old.
        sessions: only these session ids. A named session that is not in the
            store is skipped: not a fault when an erasure records it retired
            to this archive, a fault otherwise.
        progress: called as ``progress(done, total)`` after each session
            exported and after each one checked: ``total`` is twice the
            sessions chosen.
        confirm: called as ``await confirm(retiring, held)`` once the
            sessions are chosen, before anything is written: the ids about
            to be retired and how many sessions the store holds. When it
            returns False nothing is retired (the report names none).

    Returns:
        The report; check `RetireReport.ok`.

    Raises:
        ConfigurationError: no filter given, a naive datetime, a ``before``
            that is not a time, a negative ``idle_for``, or ``sessions``
            given as one string.
        InvalidSessionIdError: a session id breaks the session-id rule.
        StorageError: the archive or the store could not be read or written;
            every session is still in the store, the archive, or both.
    """
    cutoff = instant(before) if before is not None else None
    idle_from = idle_since(idle_for) if idle_for is not None else None
    listed = named(sessions)
    if cutoff is None and idle_from is None and listed is None:
        raise ConfigurationError(
            "retire needs before=, idle_for= or sessions=: it never retires everything"
        )
    root = Path(dest)
    archive = str(await io(root.absolute, root))
    report = RetireReport(archive=archive)
    reason = REASON.format(archive=archive)

    summaries = await store.summaries(order="created", limit=None)
    in_store = {summary.meta.id: summary for summary in summaries}
    links = {s.meta.id: s.meta.parent_session for s in summaries if s.meta.parent_session}
    # A cycle of parent_session links (no fork makes one; an import of
    # hand-made headers can) has no fork to retire first: its links are
    # no family's, and its sessions retire as sessions of their own.
    on_cycle = parent_cycles(links)
    children: dict[str, list[str]] = {}
    for summary in summaries:
        parent = summary.meta.parent_session
        if parent is not None and parent in in_store and summary.meta.id not in on_cycle:
            children.setdefault(parent, []).append(summary.meta.id)

    if listed is not None:
        await _absent(store, listed, in_store, reason, report)
    chosen: set[str] = set()
    for summary in summaries:
        choice = verdict(summary, cutoff, idle_from, listed)
        if choice is True:
            chosen.add(summary.meta.id)
        elif choice is not False:
            report.skipped.append(RetireIssue(summary.meta.id, choice, summary.fault is not None))
    parents = {session_id: links.get(session_id) for session_id in in_store}
    for session_id in on_cycle:
        parents[session_id] = None
    retiring, left = without_kept_forks(chosen, children, parents)
    for session_id, kept in left.items():
        why = f"its fork(s) {', '.join(kept)} stay in the store (choose them too); left"
        report.skipped.append(RetireIssue(session_id, why, False))
    order = children_first(retiring, children)
    if not order or (confirm is not None and not await confirm(order, len(summaries))):
        return report

    total = 2 * len(order)

    def exported(done: int, _files: int) -> None:
        if progress is not None:
            progress(done, total)

    try:
        report.exported = await export_chosen(
            store,
            root,
            sessions=order,
            journals=None,
            heads=None,
            progress=exported,
            erased_left_out=True,
        )
    except ArchiveError as exc:
        if not isinstance(exc.report, ArchiveReport):
            raise
        report.exported = exc.report
    refused = {issue.file: issue for issue in report.exported.refused}
    gone = {issue.file for issue in report.exported.warnings if issue.reason == LEFT_OUT}

    erased: set[str] = set()
    for done, session_id in enumerate(order, len(order) + 1):
        path = root / SESSIONS / f"{session_id}{SUFFIX}"
        issue = refused.get(str(path))
        if issue is not None:
            why = f"the archive's copy was not written ({issue}); not erased"
            report.skipped.append(RetireIssue(session_id, why, True))
        elif str(path) in gone:  # left out of the export: erased since it was chosen
            report.skipped.append(RetireIssue(session_id, ERASED, False))
            erased.add(session_id)
        elif kept := [c for c in children.get(session_id, []) if c not in erased]:
            why = f"its fork(s) {', '.join(sorted(kept))} stay in the store; not erased"
            report.skipped.append(RetireIssue(session_id, why, False))
        else:
            if await _retire_one(store, root, path, session_id, reason, report):
                erased.add(session_id)  # gone: its parent may go
        if progress is not None:
            progress(done, total)
    return report


# ------------------------------------------------------------------ checking


async def _absent(
    store: SessionStore,
    named: list[str],
    in_store: dict[str, SessionSummary],
    reason: str,
    report: RetireReport,
) -> None:
    """Report the named sessions that are not in the store."""
    missing = [session_id for session_id in named if session_id not in in_store]
    if not missing:
        return
    retired = {e.name for e in await store.erasures() if e.kind == "session" and e.reason == reason}
    for session_id in missing:
        if session_id in retired:
            issue = RetireIssue(session_id, "already retired to this archive", False)
        else:
            issue = RetireIssue(session_id, "no such session in the store", True)
        report.skipped.append(issue)


def _open_synced(root: Path, path: Path) -> BinaryIO | None:
    """The archive's file, synced (and its directory), open to read; None when missing."""
    try:
        fd = open_inside(root, path)
    except FileNotFoundError:
        return None
    file = os.fdopen(fd, "rb")
    try:
        os.fsync(fd)
        fsync_directory(path.parent)
    except BaseException:
        file.close()
        raise
    return file


async def _compared(
    root: Path, path: Path, blocks: AsyncIterator[bytes], what: str
) -> tuple[str, int] | str:
    """The BLAKE2b-256 digest and size of the archive's file (its ``what``),
    synced, when it holds ``blocks`` byte for byte, else why not (no blocks
    and no file are the same)."""
    try:
        file = await io(partial(_open_synced, root, path), path)
    except Refused as refused:
        return f"the archive's {what} {path}: {refused.reason}"
    digest = hashlib.blake2b(digest_size=32)
    size = 0
    against = Against(file, path)
    try:
        async for block in blocks:
            if file is None:
                return f"the archive holds no {what} ({path} is missing)"
            try:
                if await against.beyond(block):  # the file ends before the store's bytes
                    raise Differs(against.lines + 1)
            except Differs as differs:
                return f"the archive's {what} {path} differs from the store at line {differs.line}"
            digest.update(block)
            size += len(block)
        if await against.longer():
            return f"the archive's {what} {path} holds more than the store"
    finally:
        if file is not None:
            file.close()
    return digest.hexdigest(), size


async def _retire_one(
    store: SessionStore, root: Path, path: Path, session_id: str, reason: str, report: RetireReport
) -> bool:
    """Check the archive's copy of one session, then erase it; whether it is gone
    from the store (by this run, or another meanwhile)."""
    try:
        why = await _erase_checked(store, root, path, session_id, reason, report)
    except SessionNotFoundError:
        report.skipped.append(RetireIssue(session_id, ERASED, False))
        return True
    except CorruptSessionError as exc:
        why = f"its stored data does not read back ({exc}); not erased"
    except SessionConflictError as exc:
        why = f"the store kept it: {exc}"
    if why is not None:
        report.skipped.append(RetireIssue(session_id, why, True))
    return why is None


async def _erase_checked(
    store: SessionStore, root: Path, path: Path, session_id: str, reason: str, report: RetireReport
) -> str | None:
    """Erase the session once the archive's copy and titles are found equal to
    the store's; None when erased, else why not (a fault)."""
    checked = await _compared(root, path, store.raw_blocks(session_id), "copy")
    if isinstance(checked, str):
        return f"{checked}; not trusted, not erased"
    # The erase takes the titles too: only once the archive holds them.
    titles = record_lines(await store.titles(session_id))
    differs = await _compared(root, root / TITLES / path.name, titles, "titles")
    if isinstance(differs, str):
        return f"{differs}; not erased"
    digest, size = checked
    # Only the bytes the archive holds: an entry appended since refuses it.
    await store.erase(session_id, reason=reason, digest=digest)
    report.retired.append(session_id)
    report.bytes += size
    return None
