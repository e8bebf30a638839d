"""sessionstore: a safe, append-only store for the conversations of LLM agents.

Sessions (a header, then finalized messages and compaction markers), a
crash-recovery journal, and a JSONL wire format byte-compatible with the
Rust implementation. Everything a user needs is importable from here.

`SqlStore` loads SQLAlchemy when it is first used (``sessionstore.SqlStore``,
or `open_store` with a SQL target), so a JSONL or memory store never pays
for it.
"""

import typing

from sessionstore.archive import (
    ArchiveIssue,
    ArchiveReport,
    RetireIssue,
    RetireReport,
    export_archive,
    import_archive,
    retire,
)
from sessionstore.backends import FileJournal, JsonlStore, MemoryStore, open_store
from sessionstore.context import (
    SYNTHETIC_FIELD,
    Orphan,
    build_context,
    check_pairing,
    repair_pairing,
    safe_cut,
)
from sessionstore.errors import (
    ArchiveError,
    ConfigurationError,
    CorruptSessionError,
    DuplicateSessionError,
    EntryNotFoundError,
    InvalidCursorError,
    InvalidRecordError,
    InvalidSessionIdError,
    SchemaError,
    SchemaOutdatedError,
    SchemaTooNewError,
    SessionConflictError,
    SessionNotFoundError,
    SessionStoreError,
    StorageError,
    StreamingMessageError,
    validate_session_id,
)
from sessionstore.journal import Journal, JournalSession
from sessionstore.models import (
    CommentWrite,
    CompactionEntry,
    Erasure,
    HeadMove,
    JournalLine,
    Message,
    MessageEntry,
    PostWrite,
    SessionEntry,
    SessionHeader,
    SessionMeta,
    TitleChange,
    Written,
)
from sessionstore.store import SearchHit, SessionJournal, SessionStore, SessionSummary
from sessionstore.timestamps import Timestamp
from sessionstore.wire import (
    decode_entry,
    decode_head_move,
    decode_journal_line,
    decode_message,
    decode_meta,
    decode_title_change,
    encode,
    encode_line,
)

if typing.TYPE_CHECKING:
    from sessionstore.backends.sql import SqlStore

__version__ = "0.1.0"

__all__ = [
    "SYNTHETIC_FIELD",
    "ArchiveError",
    "ArchiveIssue",
    "ArchiveReport",
    "CommentWrite",
    "CompactionEntry",
    "ConfigurationError",
    "CorruptSessionError",
    "DuplicateSessionError",
    "EntryNotFoundError",
    "Erasure",
    "FileJournal",
    "HeadMove",
    "InvalidCursorError",
    "InvalidRecordError",
    "InvalidSessionIdError",
    "Journal",
    "JournalLine",
    "JournalSession",
    "JsonlStore",
    "MemoryStore",
    "Message",
    "MessageEntry",
    "Orphan",
    "PostWrite",
    "RetireIssue",
    "RetireReport",
    "SchemaError",
    "SchemaOutdatedError",
    "SchemaTooNewError",
    "SearchHit",
    "SessionConflictError",
    "SessionEntry",
    "SessionHeader",
    "SessionJournal",
    "SessionMeta",
    "SessionNotFoundError",
    "SessionStore",
    "SessionStoreError",
    "SessionSummary",
    "SqlStore",
    "StorageError",
    "StreamingMessageError",
    "Timestamp",
    "TitleChange",
    "Written",
    "__version__",
    "build_context",
    "check_pairing",
    "decode_entry",
    "decode_head_move",
    "decode_journal_line",
    "decode_message",
    "decode_meta",
    "decode_title_change",
    "encode",
    "encode_line",
    "export_archive",
    "import_archive",
    "open_store",
    "repair_pairing",
    "retire",
    "safe_cut",
    "validate_session_id",
]


def __getattr__(name: str) -> typing.Any:
    if name == "SqlStore":
        from sessionstore.backends.sql import SqlStore

        return SqlStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
