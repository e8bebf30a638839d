"""The one exception tree of sessionstore.

Everything the library raises to a caller derives from `SessionStoreError`.
Leaves also derive from the builtin a caller would reach for first, so
``except ValueError`` or ``except LookupError`` keeps working::

    SessionStoreError
     ├── InvalidRecordError        (also ValueError)   a record breaks the wire format
     ├── InvalidSessionIdError     (also ValueError)   an id breaks the session-id rule
     ├── StreamingMessageError     (also ValueError)   a streaming message was appended
     ├── SessionNotFoundError      (also LookupError)  no session with that id
     ├── EntryNotFoundError        (also LookupError)  no entry with that id in the session
     ├── DuplicateSessionError                         a session with that id exists
     ├── SessionConflictError                          a session or head is not as a write expects
     ├── CapabilityError           (also NotImplementedError)  a capability the store lacks
     ├── CorruptSessionError                           stored data does not decode
     ├── InvalidCursorError        (also ValueError)   a paging cursor is not one given
     ├── ConfigurationError        (also ValueError)   a target or option is not valid
     │    └── EncryptionKeyError                       keys missing, wrong, or not wanted
     ├── SchemaError                                   the database schema does not fit
     │    ├── SchemaOutdatedError                      older than this code: migrate it
     │    └── SchemaTooNewError                        newer than this code: upgrade sessionstore
     ├── ArchiveError                                  an export or import refused files
     ├── EffectInDoubtError                            an effect began and has no outcome
     │    └── EffectDeadLetterError                    found in doubt too often: settle it
     ├── EffectNotInDoubtError                         an effect to settle has an outcome
     ├── EffectFailedError                             an effect's outcome is a failure
     ├── EffectConflictError                           an effect key names another call
     └── StorageError                                  the OS or a driver failed
          └── ClosedError          (also RuntimeError) used after close

Adapters add leaves beside a framework's own exception, named in their
module (``sessionstore.integrations.openai_agents.InvalidItemError``, an
`InvalidRecordError` also ``TypeError``, and ``ToolCallInDoubtError``, an
`EffectInDoubtError` also ``AgentsException``;
``sessionstore.integrations.adk.SessionExistsError``, a
`DuplicateSessionError` also ADK's ``AlreadyExistsError``, and
``ADKSessionNotFoundError``, a `SessionNotFoundError` also ADK's). Driver
and OS errors are translated at one boundary per backend, chained: none
reaches a caller.
"""

from __future__ import annotations

import re
import shlex
from enum import Enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sessionstore.models import Effect

__all__ = [
    "ArchiveError",
    "CapabilityError",
    "ClosedError",
    "ConfigurationError",
    "CorruptSessionError",
    "DuplicateSessionError",
    "EffectConflictError",
    "EffectDeadLetterError",
    "EffectFailedError",
    "EffectInDoubtError",
    "EffectNotInDoubtError",
    "EncryptionKeyError",
    "EntryNotFoundError",
    "InvalidCursorError",
    "InvalidRecordError",
    "InvalidSessionIdError",
    "SchemaError",
    "SchemaOutdatedError",
    "SchemaTooNewError",
    "SessionConflictError",
    "SessionNotFoundError",
    "SessionStoreError",
    "StorageError",
    "StreamingMessageError",
    "validate_session_id",
]

MAX_SESSION_ID_BYTES = 200

# Control characters (below U+0020, and DEL), slash and backslash.
_FORBIDDEN_ID_CHARS = re.compile(r"[\x00-\x1f\x7f/\\]")


class SessionStoreError(Exception):
    """Base class of every error sessionstore raises."""


class InvalidRecordError(SessionStoreError, ValueError):
    """A record does not follow the wire format; the message says what and
    where (the field path, or the line and column of the JSON text)."""


class InvalidSessionIdError(SessionStoreError, ValueError):
    """A session id (or journal name) breaks the session-id rule."""

    def __init__(self, session_id: str, reason: str) -> None:
        super().__init__(f"invalid session id {session_id!r}: {reason}")
        self.session_id = session_id
        self.reason = reason


class StreamingMessageError(SessionStoreError, ValueError):
    """A message still marked ``streaming`` was appended: only finalized ones are stored."""

    def __init__(self, session_id: str, entry_id: str) -> None:
        super().__init__(
            f"session {session_id!r}: entry {entry_id!r} holds a streaming message; "
            "only finalized messages can be stored"
        )
        self.session_id = session_id
        self.entry_id = entry_id


class SessionNotFoundError(SessionStoreError, LookupError):
    """No session with this id exists in the store."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"session not found: {session_id!r}")
        self.session_id = session_id

    def __str__(self) -> str:
        # LookupError's str() would quote the whole message again.
        return str(self.args[0])


class EntryNotFoundError(SessionStoreError, LookupError):
    """A session holds no entry with this id (a fork ``at`` it, say).

    Attributes:
        session_id: the session.
        entry_id: the id it does not hold.
    """

    def __init__(self, session_id: str, entry_id: str) -> None:
        super().__init__(f"session {session_id!r} has no entry {entry_id!r}")
        self.session_id = session_id
        self.entry_id = entry_id

    def __str__(self) -> str:
        return str(self.args[0])


class DuplicateSessionError(SessionStoreError):
    """A session with this id already exists."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"session already exists: {session_id!r}")
        self.session_id = session_id


class SessionConflictError(SessionStoreError):
    """A session or head is not as the write expected (a conditional write, an
    import finding another header or count, an erase refused); nothing was written.

    Attributes:
        session_id: the session, or the head's name (``what`` says which).
        reason: how it differs.
        what: ``"session"`` or ``"head"``.
        expected: for a conditional write, the last entry's id it expected
            (``""``: none), or the session the head was to name (None:
            never set); None otherwise.
        actual: for a conditional write, what was found, in the same terms.
    """

    def __init__(
        self,
        session_id: str,
        reason: str,
        what: str = "session",
        *,
        expected: str | None = None,
        actual: str | None = None,
    ) -> None:
        super().__init__(f"{what} {session_id!r}: {reason}")
        self.session_id = session_id
        self.reason = reason
        self.what = what
        self.expected = expected
        self.actual = actual

    @classmethod
    def last_entry(
        cls, session_id: str, expected: str, actual: str, *, by: str = "append"
    ) -> SessionConflictError:
        """An append's ``expect_last`` (or, ``by="move"``, a head move's) failed:
        the session ends at ``actual``."""
        found = "holds no entry" if actual == "" else f"ends at entry {actual!r}"
        wanted = "to hold none" if expected == "" else f"to end at {expected!r}"
        reason = f"{found}, but the {by} expected it {wanted}; nothing was written"
        return cls(session_id, reason, expected=expected, actual=actual)

    @classmethod
    def head_moved(
        cls, name: str, expected: str | None, actual: str | None, *, by: str = "move"
    ) -> SessionConflictError:
        """A head move's ``expect`` (``by="move"``), an append's or a read's
        ``expect_head`` (``by="append"``, ``"read"``) failed: the head stands at ``actual``."""
        found = "was never set" if actual is None else f"names {actual!r}"
        wanted = "never set" if expected is None else f"to name {expected!r}"
        done = "read" if by == "read" else "written"
        reason = f"{found}, but the {by} expected it {wanted}; nothing was {done}"
        return cls(name, reason, "head", expected=expected, actual=actual)


class CapabilityError(SessionStoreError, NotImplementedError):
    """An operation of a `Capability` the store does not declare; nothing was
    read or written.

    Attributes:
        backend: the store's class name.
        capability: the `Capability` it lacks.
        operation: the operation called.
    """

    def __init__(self, backend: str, capability: Enum, operation: str) -> None:
        super().__init__(
            f"{backend} does not declare the capability {capability.value!r},"
            f" so it has no {operation}"
        )
        self.backend = backend
        self.capability = capability
        self.operation = operation


class CorruptSessionError(SessionStoreError):
    """Stored data of a session does not decode.

    Attributes:
        session_id: the session whose data is corrupt, or the head's name
            (``what`` says which).
        path: the file (or table) holding it, when there is one.
        line: the 1-based line number, when there is one.
        reason: what is wrong.
        what: ``"session"`` or ``"head"``.
    """

    def __init__(
        self,
        session_id: str,
        reason: str,
        *,
        path: str | None = None,
        line: int | None = None,
        what: str = "session",
    ) -> None:
        where = f"{what} {session_id!r}"
        if path is not None:
            where += f", {path}"
        if line is not None:
            where += f" line {line}"
        super().__init__(f"{where}: {reason}")
        self.session_id = session_id
        self.reason = reason
        self.path = path
        self.line = line
        self.what = what


class InvalidCursorError(SessionStoreError, ValueError):
    """A paging cursor (``after=``) is not one this listing or search gave, or
    continues one the store no longer holds: start again."""


class ConfigurationError(SessionStoreError, ValueError):
    """A store target (URL, path) or an option is not valid."""


class EncryptionKeyError(ConfigurationError):
    """The keys given do not fit the store (missing, wrong, a keyring not its
    own, or keys given to a plain store); nothing was read or written.

    Attributes:
        needs_keys: the store is sealed and was opened without keys.
    """

    def __init__(self, message: str, *, needs_keys: bool = False) -> None:
        super().__init__(message)
        self.needs_keys = needs_keys


class SchemaError(SessionStoreError):
    """The database's schema is not one this code can use; nothing was written."""


class SchemaOutdatedError(SchemaError):
    """The database's schema is older than this code; the message names the
    command that upgrades it."""


class SchemaTooNewError(SchemaError):
    """The database was migrated by a newer sessionstore; it is not touched."""


class ArchiveError(SessionStoreError):
    """An archive export or import refused some files; the others went through.

    Attributes:
        report: the `ArchiveReport` of the whole run, with every refusal.
    """

    def __init__(self, message: str, report: object) -> None:
        super().__init__(message)
        self.report = report


class EffectInDoubtError(SessionStoreError):
    """An effect was started and has no outcome (a crash between, or it runs
    elsewhere); it is not run again. The message says how to settle it.

    Attributes:
        intent: the recorded intent.
        journal: the name of its journal, when known.
        options: the ``sessionstore`` options that open its store, when the
            command line can reach it.
    """

    def __init__(
        self,
        intent: Effect,
        *,
        journal: str | None = None,
        options: tuple[str, ...] | None = None,
    ) -> None:
        where = "" if journal is None else f" in journal {journal!r}"
        super().__init__(
            f"effect {intent.key!r} ({intent.tool}){where} is in doubt: started at {intent.at} "
            "and never finished (a crash, or still running elsewhere). When no process runs "
            "it any more, find out whether it happened, then settle it:\n"
            + _settle_commands(intent.key, journal, options)
            + "\nor, in code, give the call check= (to find out) or idempotent=True "
            "(it may run again)"
        )
        self.intent = intent
        self.journal = journal
        self.options = options


class EffectDeadLetterError(EffectInDoubtError):
    """An effect was dead-lettered: more of its runs were found in doubt than
    `EffectLog.once`'s ``dead_letter`` allows (work that keeps dying). No run
    resolves it by itself any more, not even with ``check=`` or
    ``idempotent=True``: an operator settles it. The message says how.

    Attributes:
        found: how many of its runs were found in doubt.
    """

    def __init__(
        self,
        intent: Effect,
        found: int,
        *,
        journal: str | None = None,
        options: tuple[str, ...] | None = None,
    ) -> None:
        where = "" if journal is None else f" in journal {journal!r}"
        SessionStoreError.__init__(
            self,
            f"effect {intent.key!r} ({intent.tool}){where} is dead-lettered: {found} of its "
            f"runs were found in doubt (the last started at {intent.at}), so no run checks "
            "or runs it again by itself. Find out whether it happened (and why its runs "
            "never finish), then settle it:\n" + _settle_commands(intent.key, journal, options),
        )
        self.intent = intent
        self.journal = journal
        self.options = options
        self.found = found


def _settle_commands(key: str, journal: str | None, options: tuple[str, ...] | None) -> str:
    """The commands that settle ``key``, or the call where no command reaches the store."""
    if journal is None or options is None:
        return "\n".join(
            f"  await journal.effects.settle({key!r}, {outcome}, reason=...)"
            for outcome in ("'done', result=...", "'not-done'", "'failed'")
        )
    start = shlex.join(["sessionstore", *options, "journal", journal, "--settle", key])
    return "\n".join(
        f"  {start} {outcome} --reason WHY"
        for outcome in ("done --result JSON", "not-done", "failed")
    )


class EffectNotInDoubtError(SessionStoreError):
    """An effect to settle is not in doubt: it has an outcome, or never started.

    Attributes:
        key: its key.
        standing: its last line (its outcome), or None when no such effect.
    """

    def __init__(self, key: str, standing: Effect | None, *, journal: str | None = None) -> None:
        where = "" if journal is None else f" in journal {journal!r}"
        if standing is None:
            message = f"no effect {key!r}{where}: nothing to settle"
        else:
            state = standing.effect.replace("-", " ")
            message = (
                f"effect {key!r}{where} is not in doubt: {state} at {standing.at}; "
                "only an effect in doubt is settled"
            )
        super().__init__(message)
        self.key = key
        self.standing = standing


class EffectFailedError(SessionStoreError):
    """An effect's recorded outcome is a failure, raised again rather than run.

    Attributes:
        outcome: the recorded ``failed`` line.
    """

    def __init__(self, outcome: Effect) -> None:
        if outcome.reason is None:
            error = outcome.error
        else:
            by = "" if outcome.by is None else f" by {outcome.by}"
            error = f"settled failed{by}: {outcome.reason}"
        super().__init__(f"effect {outcome.key!r} failed at {outcome.at}: {error}")
        self.outcome = outcome


class EffectConflictError(SessionStoreError):
    """A key already names another effect (another tool, other arguments)."""


class StorageError(SessionStoreError):
    """The storage underneath failed (an OS or driver error, chained as ``__cause__``)."""

    def __init__(self, message: str, *, session_id: str | None = None) -> None:
        super().__init__(message if session_id is None else f"session {session_id!r}: {message}")
        self.session_id = session_id


class ClosedError(StorageError, RuntimeError):
    """A store, sync store or adapter's session was used after ``close``;
    nothing was read or written."""


def validate_session_id(session_id: str) -> str:
    """Check a session id (or journal name) against the session-id rule: a
    non-empty string of at most 200 UTF-8 bytes, with no ``/``, backslash or
    control character (below U+0020, or DEL), not starting with ``.`` (a
    safe file name on every backend).

    Returns:
        The id, unchanged.

    Raises:
        InvalidSessionIdError: the id breaks the rule; the message says how.
    """
    if not isinstance(session_id, str):
        raise InvalidSessionIdError(repr(session_id), "not a string")
    if not session_id:
        raise InvalidSessionIdError(session_id, "empty")
    if session_id.startswith("."):
        raise InvalidSessionIdError(session_id, "starts with '.'")
    bad = _FORBIDDEN_ID_CHARS.search(session_id)
    if bad is not None:
        raise InvalidSessionIdError(
            session_id, f"forbidden character {bad.group()!r} at index {bad.start()}"
        )
    try:
        size = len(session_id.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidSessionIdError(session_id, "not valid Unicode (lone surrogate)") from None
    if size > MAX_SESSION_ID_BYTES:
        raise InvalidSessionIdError(
            session_id, f"{size} UTF-8 bytes, at most {MAX_SESSION_ID_BYTES} allowed"
        )
    return session_id


def check_owner(owner: object) -> None:
    """Refuse an ``owner=`` filter that is neither None nor a string UTF-8 can
    carry: the one check of a store's and a scoped view's listings.

    Raises:
        ConfigurationError: not a string, or it holds a lone surrogate.
    """
    if owner is None:
        return
    if not isinstance(owner, str):
        raise ConfigurationError(f"owner must be a string or None, not {owner!r}")
    try:
        owner.encode("utf-8")
    except UnicodeEncodeError as exc:  # its start is the first lone surrogate's index
        raise ConfigurationError(
            f"owner holds a lone surrogate ({owner[exc.start]!r} at index {exc.start}), "
            "which UTF-8 cannot carry"
        ) from None
