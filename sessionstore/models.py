"""The records of the wire format, as strict pydantic models (SPEC section 1).

A session is a `SessionMeta` header followed by `SessionEntry` records:
finalized `Message` entries and non-destructive compaction markers. The
session journal is made of `JournalLine` records.

Validation is strict, as serde's is: a ``str`` field takes only a string, an
integer field only an integer in range (``1.0``, ``"5"``, ``true`` and ``-1``
are refused), and ``null`` only where a field is optional. Ids are any
string here, as in serde; the session-id rule belongs to the stores. Models
are frozen: a record, once made, is history.

A record takes only its own fields: constructing one with another
(``SessionMeta(id="s1", title="Trip")``) is a `pydantic.ValidationError`
naming it, where silently dropping it would lose what the caller meant to
store. Decoding stays as tolerant as serde: `sessionstore.wire` ignores a
line's unknown fields. A `Message` is the exception: its further fields are
part of the format and are kept.

Use `sessionstore.wire` to turn records into bytes and back; the models
never do their own JSON.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainValidator

from sessionstore.timestamps import Timestamp, now_rfc3339

__all__ = [
    "CommentWrite",
    "CompactionEntry",
    "Erasure",
    "HeadMove",
    "JournalLine",
    "Message",
    "MessageEntry",
    "PostWrite",
    "SessionEntry",
    "SessionHeader",
    "SessionMeta",
    "TitleChange",
    "Written",
]

U32 = Annotated[int, Field(ge=0, le=2**32 - 1)]
U64 = Annotated[int, Field(ge=0, le=2**64 - 1)]

_HEX32 = re.compile(r"[0-9a-fA-F]{32}", re.ASCII)
_HYPHENATED = re.compile(
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}", re.ASCII
)


def parse_uuid(value: object) -> uuid.UUID:
    """Read a UUID the way the reference does.

    Accepts a `uuid.UUID`, or a string in hyphenated 8-4-4-4-12 form (either
    case), 32-hex simple form, ``{braced}`` form or ``urn:uuid:`` form; any
    version. `uuid.UUID` alone is laxer (hyphens anywhere), hence this.

    Raises:
        ValueError: any other value.
    """
    if isinstance(value, uuid.UUID):
        return value
    if not isinstance(value, str):
        raise ValueError("expected a UUID string")
    text = value
    if text.startswith("urn:uuid:"):
        text = text[len("urn:uuid:") :]
    elif text.startswith("{") and text.endswith("}"):
        text = text[1:-1]
    if _HYPHENATED.fullmatch(text) or (text is value and _HEX32.fullmatch(text)):
        return uuid.UUID(text)
    raise ValueError(f"not a UUID: {value!r}")


Uuid = Annotated[uuid.UUID, PlainValidator(parse_uuid)]


class _Record(BaseModel):
    model_config = ConfigDict(strict=True, frozen=True, extra="forbid")


def _tuple_of_strings(value: object) -> object:
    """``tags`` given as a list (as JSON has it) is kept as a tuple."""
    return tuple(value) if isinstance(value, list) else value


class SessionMeta(_Record):
    """The header of a session: line 1 of its file.

    The first four fields are the reference implementation's; the others
    are this project's, written after them and each left out when unset.
    The reference skips them when it reads the file (SPEC section 1: a
    header's unknown fields are ignored), so a file carrying them still
    loads there, and their line is kept verbatim everywhere.

    Attributes:
        id: the session id (a UUID v4 for sessions made by `new`).
        version: schema version of the session file; 1.
        parent_session: the session this one was forked from; left out when None.
        created_at: RFC 3339 creation time, a plain string never parsed.
        title: what to call the session in a listing. A title chosen later
            is set with `SessionStore.set_title`, beside the log.
        owner: who the session belongs to (a user id, a tenant...): the key
            `SessionStore.summaries` and `search` filter on.
        tags: labels, in the order given.
        metadata: any further JSON object the application keeps with the
            session, written as given.
    """

    id: str
    version: U32 = 1
    parent_session: str | None = None
    created_at: str = ""
    title: str | None = None
    owner: str | None = None
    tags: Annotated[tuple[str, ...], BeforeValidator(_tuple_of_strings)] = ()
    metadata: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def new(
        cls,
        parent_session: str | None = None,
        *,
        title: str | None = None,
        owner: str | None = None,
        tags: Sequence[str] = (),
        metadata: dict[str, Any] | None = None,
    ) -> Self:
        """A header with a fresh UUID v4 id, created now."""
        return cls(
            id=str(uuid.uuid4()),
            parent_session=parent_session,
            created_at=now_rfc3339(),
            title=title,
            owner=owner,
            tags=tuple(tags),
            metadata=metadata or {},
        )


class Message(BaseModel):
    """A finalized chat message.

    ``role`` and ``content`` are required; ``content`` is any JSON value (a
    string, or a list of content parts). ``streaming`` is written only when
    true. Any further fields (``name``, ``tool_calls``, ``tool_call_id``,
    provider data...) are kept, in their order, and written after the known
    ones: pass them as keyword arguments, read them from `extra`.
    """

    model_config = ConfigDict(strict=True, frozen=True, extra="allow")

    role: str
    content: Any
    streaming: bool = False

    @classmethod
    def user(cls, text: str) -> Self:
        """A user message with plain-text content."""
        return cls(role="user", content=text)

    @classmethod
    def assistant(cls, text: str) -> Self:
        """An assistant message with plain-text content."""
        return cls(role="assistant", content=text)

    @classmethod
    def system(cls, text: str) -> Self:
        """A system message with plain-text content."""
        return cls(role="system", content=text)

    @property
    def extra(self) -> dict[str, Any]:
        """The fields beyond role, content and streaming, in their order."""
        return dict(self.__pydantic_extra__ or {})

    def text(self) -> str:
        """The message's text.

        The content itself when it is a string; otherwise the concatenation of
        the ``"text"`` string fields of the content's list items.
        """
        content = self.content
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            return "".join(
                part["text"]
                for part in content
                if isinstance(part, dict) and isinstance(part.get("text"), str)
            )
        return ""


class MessageEntry(_Record):
    """A session entry holding one finalized message."""

    type: Literal["message"] = "message"
    id: str
    parent_id: str | None = None
    timestamp: str
    message: Message

    @classmethod
    def new(cls, message: Message) -> Self:
        """An entry with a fresh UUID v4 id, stamped now."""
        return cls(id=str(uuid.uuid4()), timestamp=now_rfc3339(), message=message)


class CompactionEntry(_Record):
    """A non-destructive compaction marker.

    The history before ``first_kept_id`` is summarized in the built context
    (see `build_context`) but stays in the store.
    """

    type: Literal["compaction"] = "compaction"
    id: str
    parent_id: str | None = None
    timestamp: str
    summary: str
    first_kept_id: str
    tokens_before: U64 | None = None

    @classmethod
    def new(cls, summary: str, first_kept_id: str, tokens_before: int | None = None) -> Self:
        """A marker with a fresh UUID v4 id, stamped now."""
        return cls(
            id=str(uuid.uuid4()),
            timestamp=now_rfc3339(),
            summary=summary,
            first_kept_id=first_kept_id,
            tokens_before=tokens_before,
        )


SessionEntry = Annotated[MessageEntry | CompactionEntry, Field(discriminator="type")]
"""One record of a session's log, tagged by ``type``."""


class HeadMove(_Record):
    """One position of a named head: the session it named from ``at`` on.

    A head ("the current session of conversation X") is never overwritten:
    each move is a new `HeadMove`, and the last one is where it stands.

    Attributes:
        session_id: the session the head named.
        at: RFC 3339 time of the move, a plain string never parsed.
    """

    model_config = ConfigDict(defer_build=True)  # rarely used: built when first used

    session_id: str
    at: str

    @classmethod
    def new(cls, session_id: str) -> Self:
        """A move to ``session_id``, stamped now."""
        return cls(session_id=session_id, at=now_rfc3339())


class TitleChange(_Record):
    """A title given to a session after it was created.

    A header never changes, so a later title is kept beside the log, one
    `TitleChange` per change; the last one is the session's title (None:
    back to the header's). The reference implementation never reads them.

    Attributes:
        session_id: the session retitled.
        title: its title from ``at`` on; left out when None.
        at: RFC 3339 time of the change, a plain string never parsed.
    """

    model_config = ConfigDict(defer_build=True)  # rarely used: built when first used

    session_id: str
    title: str | None = None
    at: str

    @classmethod
    def new(cls, session_id: str, title: str | None) -> Self:
        """A change of ``session_id``'s title, stamped now."""
        return cls(session_id=session_id, title=title, at=now_rfc3339())


class Erasure(_Record):
    """The record an erasure leaves: what was removed, when, why.

    A session (or journal) is removed only whole, and only by `erase`, which
    writes this record in the same step; a journal's keyed lines alone only
    by `drop`, which writes one too (``keys``). The record holds no content of
    what it removed: only how much there was and a digest of it.

    Attributes:
        kind: ``"session"`` or ``"journal"``.
        name: the session's id, or the journal's name.
        at: RFC 3339 time of the erasure.
        reason: why, as the caller gave it.
        lines: how many lines were removed: a session's entries (its
            header not counted), a journal's lines.
        digest: BLAKE2b-256, in hex, of the bytes removed as a file holds
            them: a session's file (header and entries, each line ending in
            a newline, as `raw_blocks` gives it), a journal's bytes. An
            archive's copy can be checked against it.
        key: in an encrypted store, the id (hex) of the data key destroyed
            with it, which every copy of the removed rows was sealed with
            (docs/encryption.md); left out otherwise.
        keys: a journal's keyed lines dropped (`JournalBase.drop`): how many
            keys' lines went, the journal itself staying (``lines`` and
            ``digest`` are then of the lines dropped, in journal order);
            left out for an erasure of the whole journal or session.
    """

    model_config = ConfigDict(defer_build=True)  # rarely used: built when first used

    kind: Literal["session", "journal"]
    name: str
    at: str
    reason: str
    lines: U64
    digest: str
    key: str | None = None
    keys: U64 | None = None


class Anchor(_Record):
    """Where a session stood when it was anchored: what its store must still hold.

    A store only ever adds to a session, so the session must still begin
    with the ``lines`` entries anchored, byte for byte, unless an erasure
    recorded since removed it. Kept outside the store (`sessionstore.anchors`),
    anchors show what a writer with the database's file could otherwise hide:
    entries deleted from the end, a session deleted, history rewritten with
    its digests.

    Attributes:
        session: the session's id.
        lines: its entries when anchored (its header not counted).
        digest: BLAKE2b-256, in hex, of its header and those entries as its
            file holds them (each line ending in a newline, as `raw_blocks`
            gives them): an `Erasure`'s digest of the session then.
        erasures: how many erasure records the store held when anchored;
            those after them were made since.
        at: RFC 3339 time it was anchored.
    """

    model_config = ConfigDict(defer_build=True)  # rarely used: built when first used

    session: str
    lines: U64
    digest: str
    erasures: U64
    at: str


class Effect(_Record):
    """A line of a journal's effects (`sessionstore.effects`): a side effect's
    intent, made durable before it runs, or its outcome, after.

    Attributes:
        effect: ``intent`` (about to run), ``done`` (it ran: ``result``),
            ``failed`` (it raised: ``error``) or ``not-done`` (an operator
            found it did not happen: the next run of the key runs it).
        key: what names the effect across runs (by default the session and
            the model's tool-call id).
        tool: the intent's tool name.
        args: the intent's digest of its arguments (SHA-256 of their JSON, hex).
        session: the intent's session id, when it belongs to one.
        result: a ``done``'s result, any JSON value (written even when null).
        error: a ``failed``'s error, as text.
        reason: on an outcome an operator settled (`EffectLog.settle`), why.
        by: on an outcome an operator settled, who (when given).
        at: RFC 3339 time the line was written.
    """

    model_config = ConfigDict(defer_build=True)  # rarely used: built when first used

    effect: Literal["intent", "done", "failed", "not-done"]
    key: str
    tool: str | None = None
    args: str | None = None
    session: str | None = None
    result: Any = None
    error: str | None = None
    reason: str | None = None
    by: str | None = None
    at: str


class ArchivedKey(_Record):
    """A data key as an encrypted archive's ``keys.jsonl`` holds it: wrapped
    by a master key, as the store's keyring held it when exported
    (`sessionstore.archive`, docs/encryption.md).

    Attributes:
        key: the data key's id, in hex.
        scope: what it seals: ``session`` or ``journal``.
        name: the session's id or the journal's name.
        master: the fingerprint of the master key that wrapped it.
        wrapped: the wrapped key, in base64.
    """

    model_config = ConfigDict(defer_build=True)  # rarely used: built when first used

    key: str
    scope: str
    name: str
    master: str
    wrapped: str


class SessionHeader(_Record):
    """The journal line that opens a session: when it began, on what model."""

    model_config = ConfigDict(defer_build=True)  # rarely used: built when first used

    line: Literal["session"] = "session"
    started_at: Timestamp
    model: str


class PostWrite(_Record):
    """A post the session created."""

    model_config = ConfigDict(defer_build=True)  # rarely used: built when first used

    line: Literal["post"] = "post"
    at: Timestamp
    id: Uuid


class CommentWrite(_Record):
    """A comment the session created, and the post it is on when known."""

    model_config = ConfigDict(defer_build=True)  # rarely used: built when first used

    line: Literal["comment"] = "comment"
    at: Timestamp
    id: Uuid
    on: Uuid | None = None


Written = PostWrite | CommentWrite
"""One write a session made."""

JournalLine = Annotated[SessionHeader | PostWrite | CommentWrite, Field(discriminator="line")]
"""One line of the session journal, tagged by ``line``."""
