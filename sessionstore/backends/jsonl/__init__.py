"""The JSONL backend: `JsonlStore`, one file per session, and `FileJournal`.

* `store`: the store, a directory of ``<id>.jsonl`` files.
* `file`: one session file: its complete length, crash repair, parsing.
* `context`: `load_context` read from the end of a file.
* `hints`: where a long session's context starts, remembered beside the files.
* `temporary`: new session files written aside, then published whole.
* `fork`: a fork's file, its header then a prefix of its source's lines.
* `heads`: named heads, a file of moves each.
* `titles`: titles chosen later, a file of changes per session.
* `listing`: what `summaries` pages through, and the orders kept between pages.
* `journal`: the crash-recovery journal as a file.
"""

from sessionstore.backends.jsonl.hints import HINTS
from sessionstore.backends.jsonl.journal import JOURNAL_FILE, FileJournal
from sessionstore.backends.jsonl.store import JsonlStore

__all__ = ["HINTS", "JOURNAL_FILE", "FileJournal", "JsonlStore"]
