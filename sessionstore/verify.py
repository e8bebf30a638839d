"""`verify_store`: check that everything a store holds reads back sound."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from sessionstore.errors import CorruptSessionError, SessionNotFoundError
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
        notes: what is sound but may surprise, each naming its session: a
            compaction whose ``first_kept_id`` names no message (the
            reference's rule then keeps what follows the compaction).
    """

    sessions: int = 0
    entries: int = 0
    faults: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether no fault was found."""
        return not self.faults


async def verify_store(
    store: SessionStore, *, progress: Callable[[int, int], None] | None = None
) -> VerifyReport:
    """Check every session of a store.

    Every line must decode, and the storage's own checks must pass (on
    SQL: the database's integrity check, a gap-free ``seq``, the chains of
    digests). A compaction whose ``first_kept_id`` names no message of its
    session is valid history (the reference writes such compactions, and
    its rule keeps what follows them): it is a note, not a fault. Sessions
    are streamed, so memory stays bounded however long one is.

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
        report.notes += [
            f"session {meta.id!r}: compaction {c.id!r} keeps from {c.first_kept_id!r}, "
            "which no message has: its context keeps what follows the compaction"
            for c in compactions
            if c.first_kept_id not in messages
        ]
        if progress is not None:
            progress(done, total)
    report.faults += await store.integrity()
    if progress is not None:
        progress(total, total)
    return report
