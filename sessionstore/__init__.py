"""sessionstore: a safe, append-only store for the conversations of LLM agents.

Sessions (a header, then finalized messages and compaction markers), a
crash-recovery journal, and a JSONL wire format byte-compatible with the
Rust implementation. Everything a user needs is importable from here.
"""

from sessionstore.archive import ArchiveIssue, ArchiveReport, export_archive, import_archive
from sessionstore.backends import FileJournal, JsonlStore, MemoryStore, SqlStore, open_store
from sessionstore.context import build_context
from sessionstore.errors import (
    ArchiveError,
    ConfigurationError,
    CorruptSessionError,
    DuplicateSessionError,
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
    JournalLine,
    Message,
    MessageEntry,
    PostWrite,
    SessionEntry,
    SessionHeader,
    SessionMeta,
    Written,
)
from sessionstore.store import Entry, JournalRecord, SessionJournal, SessionStore
from sessionstore.timestamps import Timestamp
from sessionstore.wire import (
    decode_entry,
    decode_journal_line,
    decode_message,
    decode_meta,
    encode,
    encode_line,
)

__version__ = "0.1.0"

__all__ = [
    "ArchiveError",
    "ArchiveIssue",
    "ArchiveReport",
    "CommentWrite",
    "CompactionEntry",
    "ConfigurationError",
    "CorruptSessionError",
    "DuplicateSessionError",
    "Entry",
    "FileJournal",
    "InvalidRecordError",
    "InvalidSessionIdError",
    "Journal",
    "JournalLine",
    "JournalRecord",
    "JournalSession",
    "JsonlStore",
    "MemoryStore",
    "Message",
    "MessageEntry",
    "PostWrite",
    "SchemaError",
    "SchemaOutdatedError",
    "SchemaTooNewError",
    "SessionConflictError",
    "SessionEntry",
    "SessionHeader",
    "SessionJournal",
    "SessionMeta",
    "SessionNotFoundError",
    "SessionStore",
    "SessionStoreError",
    "SqlStore",
    "StorageError",
    "StreamingMessageError",
    "Timestamp",
    "Written",
    "__version__",
    "build_context",
    "decode_entry",
    "decode_journal_line",
    "decode_message",
    "decode_meta",
    "encode",
    "encode_line",
    "export_archive",
    "import_archive",
    "open_store",
    "validate_session_id",
]
