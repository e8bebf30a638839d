"""sessionstore: a safe, append-only store for the conversations of LLM agents.

Everything a user needs is importable from here. What a program needs to
start (the records, the codec, the store protocol, `open_store`) loads with
the package; the stores, the archive and the encryption load on first use,
so a process started for one agent turn pays only for what it touches.
"""

import importlib
import typing

from sessionstore.backends import open_store
from sessionstore.context import (
    SYNTHETIC_FIELD,
    Orphan,
    build_context,
    check_pairing,
    context_entries,
    context_message,
    moves_start,
    repair_pairing,
    safe_cut,
)
from sessionstore.effect_journals import JournalEffect, effects_in_doubt, forget_effects
from sessionstore.effects import NOT_DONE, EffectLog, EffectState, args_digest
from sessionstore.errors import (
    ArchiveError,
    CapabilityError,
    ClosedError,
    ConfigurationError,
    CorruptSessionError,
    DuplicateSessionError,
    EffectConflictError,
    EffectDeadLetterError,
    EffectFailedError,
    EffectInDoubtError,
    EffectNotInDoubtError,
    EncryptionKeyError,
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
    Anchor,
    CommentWrite,
    CompactionEntry,
    Effect,
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
from sessionstore.scoped import ScopedStore
from sessionstore.store import (
    Capability,
    CoreStore,
    EntrySlice,
    SearchHit,
    SessionJournal,
    SessionStore,
    SessionSummary,
)
from sessionstore.timestamps import Timestamp
from sessionstore.wire import (
    MAX_DEPTH,
    MAX_LINE,
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
    from sessionstore.archive import (
        ArchiveIssue,
        ArchiveReport,
        RetireIssue,
        RetireReport,
        export_archive,
        import_archive,
        retire,
    )
    from sessionstore.backends.jsonl import FileJournal, JsonlStore
    from sessionstore.backends.memory import MemoryStore
    from sessionstore.backends.space import VacuumReport, vacuum
    from sessionstore.backends.sql import SqlStore
    from sessionstore.backends.sql.keyring import SqlKeyring
    from sessionstore.encryption.keyring import Keyring, WrappedKey
    from sessionstore.encryption.keys import generate_key

_LAZY = {
    "ArchiveIssue": "sessionstore.archive",
    "ArchiveReport": "sessionstore.archive",
    "RetireIssue": "sessionstore.archive",
    "RetireReport": "sessionstore.archive",
    "export_archive": "sessionstore.archive",
    "import_archive": "sessionstore.archive",
    "retire": "sessionstore.archive",
    "FileJournal": "sessionstore.backends.jsonl",
    "JsonlStore": "sessionstore.backends.jsonl",
    "MemoryStore": "sessionstore.backends.memory",
    "VacuumReport": "sessionstore.backends.space",
    "vacuum": "sessionstore.backends.space",
    "SqlStore": "sessionstore.backends.sql",
    "SqlKeyring": "sessionstore.backends.sql.keyring",
    "Keyring": "sessionstore.encryption.keyring",
    "WrappedKey": "sessionstore.encryption.keyring",
    "generate_key": "sessionstore.encryption.keys",
}
"""Names loaded on first use, and their modules."""

__version__ = "0.1.0"

__all__ = [
    "MAX_DEPTH",
    "MAX_LINE",
    "NOT_DONE",
    "SYNTHETIC_FIELD",
    "Anchor",
    "ArchiveError",
    "ArchiveIssue",
    "ArchiveReport",
    "Capability",
    "CapabilityError",
    "ClosedError",
    "CommentWrite",
    "CompactionEntry",
    "ConfigurationError",
    "CoreStore",
    "CorruptSessionError",
    "DuplicateSessionError",
    "Effect",
    "EffectConflictError",
    "EffectDeadLetterError",
    "EffectFailedError",
    "EffectInDoubtError",
    "EffectLog",
    "EffectNotInDoubtError",
    "EffectState",
    "EncryptionKeyError",
    "EntryNotFoundError",
    "EntrySlice",
    "Erasure",
    "FileJournal",
    "HeadMove",
    "InvalidCursorError",
    "InvalidRecordError",
    "InvalidSessionIdError",
    "Journal",
    "JournalEffect",
    "JournalLine",
    "JournalSession",
    "JsonlStore",
    "Keyring",
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
    "ScopedStore",
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
    "SqlKeyring",
    "SqlStore",
    "StorageError",
    "StreamingMessageError",
    "Timestamp",
    "TitleChange",
    "VacuumReport",
    "WrappedKey",
    "Written",
    "__version__",
    "args_digest",
    "build_context",
    "check_pairing",
    "context_entries",
    "context_message",
    "decode_entry",
    "decode_head_move",
    "decode_journal_line",
    "decode_message",
    "decode_meta",
    "decode_title_change",
    "effects_in_doubt",
    "encode",
    "encode_line",
    "export_archive",
    "forget_effects",
    "generate_key",
    "import_archive",
    "moves_start",
    "open_store",
    "repair_pairing",
    "retire",
    "safe_cut",
    "vacuum",
    "validate_session_id",
]


def __getattr__(name: str) -> typing.Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # loaded once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
