"""The archive: lossless JSONL export and import over any store (SPEC section 6),
and `retire`, which moves old sessions out of a store into one, checked.

An archive is a directory::

    <archive>/sessions/<id>.jsonl                      a valid directory store
    <archive>/journals/<name>/session_journal.jsonl    a valid journal file
    <archive>/journals/<name>/session_effects.jsonl    its side effects (`sessionstore.effects`)
    <archive>/heads/<name>.jsonl                       every position of a named head
    <archive>/titles/<id>.jsonl                        every title a session was given later

An encrypted store's archive can stay encrypted (`sessionstore.archive.sealing`).
What it promises (byte for byte both ways, streamed, atomic per file,
incremental, refusals named with file and line, no link followed out of
it) is in docs/archive.md; `exporting`, `importing` and `retiring` say how
each direction keeps it.
"""

from __future__ import annotations

from sessionstore.archive.exporting import export_archive
from sessionstore.archive.importing import import_archive
from sessionstore.archive.report import ArchiveIssue, ArchiveReport, Progress
from sessionstore.archive.retiring import RetireIssue, RetireReport, retire

__all__ = [
    "ArchiveIssue",
    "ArchiveReport",
    "Progress",
    "RetireIssue",
    "RetireReport",
    "export_archive",
    "import_archive",
    "retire",
]
