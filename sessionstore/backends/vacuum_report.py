"""`VacuumReport`: what a vacuum gave back (`sessionstore.vacuum`)."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["CHUNK", "VacuumReport"]

CHUNK = 0.02
"""Seconds a SQLite vacuum step is sized to take: the longest a writer waits for one."""


@dataclass
class VacuumReport:
    """What a vacuum gave back.

    Attributes:
        where: the store, fit for messages (no password).
        kind: ``"sqlite"``, ``"postgresql"``, ``"jsonl"`` or ``"memory"``.
        bytes_before: the store's size on disk before (SQLite: the file and
            its ``-wal``; PostgreSQL: the tables, their TOAST and indexes).
        bytes_after: the same after.
        converted: SQLite: the file was made incremental by a full VACUUM first.
        full: SQLite: a full VACUUM ran (asked for, or the conversion).
        pages_freed: SQLite: the pages given back by the incremental steps.
        chunks: SQLite: how many incremental steps ran.
        longest_step: seconds the longest step held writers off (a chunk,
            a checkpoint's try, the conversion, or a table's rewrite).
        complete: everything was done (SQLite: the WAL truncated as well;
            PostgreSQL: every step of the procedure ran).
        notes: what was left, and why, one sentence each.
        skipped: PostgreSQL: the tables left as they were, which the role may
            not vacuum (not their owner): their erased bytes stay.
    """

    where: str
    kind: str
    bytes_before: int = 0
    bytes_after: int = 0
    converted: bool = False
    full: bool = False
    pages_freed: int = 0
    chunks: int = 0
    longest_step: float = 0.0
    complete: bool = True
    notes: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    @property
    def given_back(self) -> int:
        """Bytes the store takes less than before (never below 0)."""
        return max(0, self.bytes_before - self.bytes_after)
