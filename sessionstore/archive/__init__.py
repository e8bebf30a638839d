"""The archive: lossless JSONL export and import over any store (SPEC section 6),
and `retire`, which moves old sessions out of a store into one, checked.

An archive is a directory::

    <archive>/sessions/<id>.jsonl                      a valid directory store
    <archive>/journals/<name>/session_journal.jsonl    a valid journal file
    <archive>/journals/<name>/session_effects.jsonl    its side effects (`sessionstore.effects`)
    <archive>/heads/<name>.jsonl                       every position of a named head
    <archive>/titles/<id>.jsonl                        every title a session was given later

An encrypted store's archive can stay encrypted (``export_archive(...,
encrypted=True)``): its sessions, titles and journals in ``.sealed``
files, with the data keys wrapped in ``keys.jsonl``
(`sessionstore.archive.sealing`); import opens them given the master keys.

A fork's file is its whole history (what `SessionStore.raw_lines` gives,
the part it shares with its source included), so every session file
stands alone; imported, a fork is a session of its own. A head's file
holds each `HeadMove` in canonical form, oldest first; import records them
with `SessionStore.import_head`, keeping their times. A session's titles
file holds each `TitleChange` the same way, written with the session and
recorded with `SessionStore.import_titles`; ``sessions/`` is untouched by
them, so the Rust implementation reads it as before.

Lines travel byte for byte: what was imported exports back identical
(unknown fields, key order, spacing, ``\\r``, escapes), so export, import
into an empty store and export again gives identical trees, and
``sessions/`` is a directory the Rust implementation can load.

Both directions stream: memory stays flat however large the archive (but
for a head's history, read and written as one list).

Export writes each file under a temporary name, ``fsync``s it, renames it
into place and ``fsync``s the directory, so a crash never leaves a partial
file under a final name. Exporting into an existing archive is
incremental: a session file gets only the entries it lacks, once the file
is checked to be a byte-exact prefix of the session; a file that is not is
refused and never overwritten; a head file grows the same way. A journal
file is replaced by the journal as it stands (journals are cleared by
design).

Import reads, never writes, its source. Each session is all or nothing.
Importing the same archive again changes nothing; a file that extends an
imported session adds only its new entries, after the shared part is
checked byte for byte. A torn last line (a crash of whoever wrote the
file) is skipped with a warning. A file that cannot be imported is refused
with its file and line and leaves the store as it was; the other files
still import, and the run ends in an `ArchiveError` listing every refusal.

Only regular files are read or written, and no symbolic link is followed
out of the archive (refused). What an import does not read (a FIFO, a
dot-named file, a directory) is named in the report's ``skipped``; what a
store holds but cannot give to an export of everything is named in its
``faults`` (`SessionStore.integrity`), and ends the run in an `ArchiveError`.
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
