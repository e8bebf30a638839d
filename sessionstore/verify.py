"""`verify_store`: check that everything a store holds reads back sound."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from sessionstore.anchors import anchor_session, check_anchor
from sessionstore.errors import CorruptSessionError, SessionNotFoundError
from sessionstore.models import Anchor, CompactionEntry, MessageEntry
from sessionstore.store import SessionStore

__all__ = ["VerifyReport", "verify_store"]


@dataclass
class VerifyReport:
    """What `verify_store` checked and found.

    Attributes:
        sessions: sessions checked.
        entries: entries decoded.
        faults: every problem, each naming its session (and file or line).
        notes: what is sound but may surprise, each naming its session.
        anchors: when anchors were checked, every session's new anchor.
    """

    sessions: int = 0
    entries: int = 0
    faults: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    anchors: list[Anchor] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether no fault was found."""
        return not self.faults


async def verify_store(
    store: SessionStore,
    *,
    progress: Callable[[int, int], None] | None = None,
    anchors: Iterable[Anchor] | None = None,
) -> VerifyReport:
    """Check every session of a store, streamed: every line must decode and the
    storage's own checks (`SessionStore.integrity`) pass. A compaction whose
    ``first_kept_id`` names no message is valid history: a note, not a fault.

    With ``anchors`` (`sessionstore.anchors`), each session anchored must
    still begin with its anchored entries and be there, unless erased since
    (a note), and the store hold as many erasure records; each session is
    read a second time for its new anchor (``report.anchors``).

    Args:
        store: any store.
        progress: called as ``progress(done, total)`` after each session.
        anchors: older anchors to check (an empty list: none yet); None
            checks none and makes none.

    Returns:
        The report; ``report.ok`` when nothing is wrong.
    """
    report = VerifyReport()
    anchoring = None
    if anchors is not None:
        older = {anchor.session: anchor for anchor in anchors}
        held = max((anchor.erasures for anchor in older.values()), default=0)
        anchoring = _Anchoring(older, len(await store.erasures()), held)
    try:
        metas = await store.list()
    except CorruptSessionError as exc:
        report.faults.append(str(exc))
        metas = []
    total = len(metas) + 1
    for done, meta in enumerate(metas, 1):
        report.sessions += 1
        messages: set[str] = set()
        compactions: list[CompactionEntry] = []
        stream = store.iter_entries(meta.id)
        try:
            async for entry in stream:
                report.entries += 1
                if isinstance(entry, MessageEntry):
                    messages.add(entry.id)
                else:
                    compactions.append(entry)
        except CorruptSessionError as exc:
            report.faults.append(str(exc))
        except SessionNotFoundError:  # erased since it was listed: as if never there
            report.sessions -= 1
            report.notes.append(f"session {meta.id!r}: erased while verifying: not checked")
            continue
        finally:
            await stream.aclose()
        if anchoring is not None:
            await anchoring.anchor(store, meta.id, report)
        report.notes += [
            f"session {meta.id!r}: compaction {c.id!r} keeps from {c.first_kept_id!r}, "
            "which no message has: its context keeps what follows the compaction"
            for c in compactions
            if c.first_kept_id not in messages
        ]
        if progress is not None:
            progress(done, total)
    report.faults += await store.integrity()
    if anchoring is not None:
        await anchoring.judge(store, report)
    if progress is not None:
        progress(total, total)
    return report


@dataclass
class _Anchoring:
    """Older anchors being checked, while every session gets its new one."""

    older: dict[str, Anchor]  # not yet matched by their session
    erasures: int  # records the store held before any session was read
    held: int  # the most records the store held when the older ones were made
    changed: list[tuple[Anchor, Anchor, str | None]] = field(default_factory=list)

    async def anchor(self, store: SessionStore, session_id: str, report: VerifyReport) -> None:
        """Anchor the session anew, and match its older anchor, if any."""
        old = self.older.pop(session_id, None)
        try:
            now, early = await anchor_session(
                store, session_id, erasures=self.erasures, prefix=None if old is None else old.lines
            )
        except SessionNotFoundError:  # erased while verifying: as if never listed
            if old is not None:
                self.older[session_id] = old
            return
        report.anchors.append(now)
        if old is not None and early != old.digest:
            self.changed.append((old, now, early))

    async def judge(self, store: SessionStore, report: VerifyReport) -> None:
        """Say what the older anchors not matched mean: sessions rewritten,
        cut short or gone, unless erased since; erasure records deleted."""
        erasures = await store.erasures()  # read last: those made meanwhile too
        gone = [(old, None, None) for old in self.older.values()]
        for old, now, early in [*self.changed, *gone]:
            fault, note = check_anchor(old, now, early, erasures)
            report.faults += [fault] if fault else []
            report.notes += [note] if note else []
        if len(erasures) < self.held:
            report.faults.append(
                f"the store holds {len(erasures)} erasure records, fewer than the "
                f"{self.held} it held when anchored: erasure records were deleted"
            )
