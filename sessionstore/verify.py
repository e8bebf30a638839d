"""`verify_store`: check that everything a store holds reads back sound."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from sessionstore.errors import CorruptSessionError
from sessionstore.models import CompactionEntry, MessageEntry
from sessionstore.store import SessionStore

__all__ = ["VerifyReport", "verify_store"]


@dataclass
class VerifyReport:
    """What `verify_store` checked and found.

    Attributes:
        sessions: sessions checked.
        entries: entries decoded.
        faults: every problem, each naming its session (and file or line).
    """

    sessions: int = 0
    entries: int = 0
    faults: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether no fault was found."""
        return not self.faults


async def verify_store(
    store: SessionStore, *, progress: Callable[[int, int], None] | None = None
) -> VerifyReport:
    """Check every session of a store.

    Every line must decode, every compaction's ``first_kept_id`` must name a
    message of its session, and the storage's own checks must pass (on SQL:
    the database's integrity check and a gap-free ``seq``).

    Args:
        store: any store.
        progress: called as ``progress(done, total)`` after each session.

    Returns:
        The report; ``report.ok`` when nothing is wrong.
    """
    report = VerifyReport()
    try:
        metas = await store.list()
    except CorruptSessionError as exc:
        report.faults.append(str(exc))
        metas = []
    total = len(metas) + 1
    for done, meta in enumerate(metas, 1):
        report.sessions += 1
        try:
            entries = await store.load(meta.id)
        except CorruptSessionError as exc:
            report.faults.append(str(exc))
            entries = []
        report.entries += len(entries)
        messages = {e.id for e in entries if isinstance(e, MessageEntry)}
        report.faults += [
            f"session {meta.id!r}: compaction {e.id!r} keeps from {e.first_kept_id!r}, "
            "which no message of the session has"
            for e in entries
            if isinstance(e, CompactionEntry) and e.first_kept_id not in messages
        ]
        if progress is not None:
            progress(done, total)
    report.faults += await store.integrity()
    if progress is not None:
        progress(total, total)
    return report
