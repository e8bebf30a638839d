"""The records of the wire format, as strict, frozen pydantic models (SPEC
section 1; docs/wire-format.md).

Validation is serde's: a ``str`` field takes only a string, an integer field
only an integer in range, ``null`` only where optional; ids are any string
(the session-id rule is the stores'). A record takes only its own fields
(another is a `pydantic.ValidationError`), but `sessionstore.wire`, which
does all the JSON, ignores a line's unknown fields; a `Message` keeps its
further fields, which are part of the format.
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
    """Read a UUID as the reference does: a `uuid.UUID`, or a hyphenated,
    32-hex, ``{braced}`` or ``urn:uuid:`` string, any case and version
    (`uuid.UUID` alone takes hyphens anywhere).

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


class _Rare(_Record):
    model_config = ConfigDict(defer_build=True)  # rarely used: built when first used


def _tuple_of_strings(value: object) -> object:
    """``tags`` given as a list (as JSON has it) is kept as a tuple."""
    return tuple(value) if isinstance(value, list) else value


class SessionMeta(_Record):
    """The header of a session: line 1 of its file.

    The first four fields are the reference implementation's; the others,
    this project's, follow them, each left out when unset (the reference
    ignores them).

    Attributes:
        id: the session id (a UUID v4 for sessions made by `new`).
        version: schema version of the session file; 1.
        parent_session: the session this one was forked from.
        created_at: RFC 3339 creation time, a plain string never parsed.
        title: what to call it in a listing (a later one: `SessionStore.set_title`).
        owner: who it belongs to (a user, a tenant): what `summaries` and
            `search` filter on.
        tags: labels, in the order given.
        metadata: any further JSON object the application keeps with it.
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

    ``content`` is any JSON value (a string, or a list of content parts);
    ``streaming`` is written only when true. Further fields (``tool_calls``,
    ``tool_call_id``, provider data...) are kept in order after the known
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
        """The content when a string, else its list items' ``"text"`` strings joined."""
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
    """A non-destructive compaction marker: the history before ``first_kept_id``
    is summarized in the built context (`build_context`) but stays stored."""

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


class HeadMove(_Rare):
    """One position of a named head, never overwritten: the last is where it stands.

    Attributes:
        session_id: the session the head named.
        at: RFC 3339 time of the move, a plain string never parsed.
    """

    session_id: str
    at: str

    @classmethod
    def new(cls, session_id: str) -> Self:
        """A move to ``session_id``, stamped now."""
        return cls(session_id=session_id, at=now_rfc3339())


class TitleChange(_Rare):
    """A title given to a session after its creation, kept beside the log; the
    last one is its title (None: back to the header's).

    Attributes:
        session_id: the session retitled.
        title: its title from ``at`` on; left out when None.
        at: RFC 3339 time of the change, a plain string never parsed.
    """

    session_id: str
    title: str | None = None
    at: str

    @classmethod
    def new(cls, session_id: str, title: str | None) -> Self:
        """A change of ``session_id``'s title, stamped now."""
        return cls(session_id=session_id, title=title, at=now_rfc3339())


class Erasure(_Rare):
    """The record an `erase` (or a journal's `drop`) leaves in the same step:
    what was removed, when, why; how much and a digest, never content.

    Attributes:
        kind: ``"session"`` or ``"journal"``.
        name: the session's id, or the journal's name.
        at: RFC 3339 time of the erasure.
        reason: why, as the caller gave it.
        lines: how many lines were removed: a session's entries (its
            header not counted), a journal's lines.
        digest: BLAKE2b-256, in hex, of the bytes removed as a file holds
            them (a session's as `raw_blocks` gives it): an archive's copy
            can be checked against it.
        key: in an encrypted store, the id (hex) of the data key destroyed
            with it (docs/encryption.md).
        keys: for a `drop`, how many keys' lines went (``lines`` and
            ``digest`` then of those lines, in journal order).
    """

    kind: Literal["session", "journal"]
    name: str
    at: str
    reason: str
    lines: U64
    digest: str
    key: str | None = None
    keys: U64 | None = None


class Anchor(_Rare):
    """Where a session stood when anchored (`sessionstore.anchors`): it must still
    begin with those entries, byte for byte, unless an erasure since removed it.

    Attributes:
        session: the session's id.
        lines: its entries when anchored (its header not counted).
        digest: an `Erasure`'s digest of the session then.
        erasures: how many erasure records the store held when anchored.
        at: RFC 3339 time it was anchored.
    """

    session: str
    lines: U64
    digest: str
    erasures: U64
    at: str


class Effect(_Rare):
    """A line of a journal's effects (`sessionstore.effects`): an intent, or an outcome.

    Attributes:
        effect: ``intent`` (about to run), ``done`` (it ran: ``result``),
            ``failed`` (it raised: ``error``), ``not-done`` (an operator
            found it did not happen: the next run of the key runs it);
            ``retry`` (attempt ``attempt`` raised ``error``; the next attempt
            follows), ``doubt`` (a run found it in doubt), ``dead-letter``
            (found in doubt too often: only an operator settles it) and
            ``forgotten`` (pruned: the key's earlier lines no longer count,
            its next run runs afresh).
        key: what names the effect across runs (by default the session and
            the model's tool-call id).
        tool: the intent's tool name.
        args: the intent's digest of its arguments (SHA-256 of their JSON, hex).
        session: the intent's session id, when it belongs to one.
        result: a ``done``'s result, any JSON value (written even when null).
        error: a ``failed``'s error, as text.
        reason: on an outcome an operator settled (`EffectLog.settle`), why.
        by: on an outcome an operator settled, or a ``forgotten``, who (when given).
        attempt: on a ``retry``, the attempt that failed; on the ``done`` or
            ``failed`` of a call given ``retries``, the attempt that ended it.
        found: on a ``doubt`` or ``dead-letter``, how many of the effect's
            runs have been found in doubt (finds of one run count once).
        at: RFC 3339 time the line was written.
    """

    effect: Literal[
        "intent", "done", "failed", "not-done", "retry", "doubt", "dead-letter", "forgotten"
    ]
    key: str
    tool: str | None = None
    args: str | None = None
    session: str | None = None
    result: Any = None
    error: str | None = None
    reason: str | None = None
    by: str | None = None
    attempt: int | None = None
    found: int | None = None
    at: str


class ArchivedKey(_Rare):
    """A data key, wrapped by a master key, in an encrypted archive's ``keys.jsonl``.

    Attributes:
        key: the data key's id, in hex.
        scope: what it seals: ``session`` or ``journal``.
        name: the session's id or the journal's name.
        master: the fingerprint of the master key that wrapped it.
        wrapped: the wrapped key, in base64.
    """

    key: str
    scope: str
    name: str
    master: str
    wrapped: str


class SessionHeader(_Rare):
    """The journal line that opens a session: when it began, on what model."""

    line: Literal["session"] = "session"
    started_at: Timestamp
    model: str


class PostWrite(_Rare):
    """A post the session created."""

    line: Literal["post"] = "post"
    at: Timestamp
    id: Uuid


class CommentWrite(_Rare):
    """A comment the session created, and the post it is on when known."""

    line: Literal["comment"] = "comment"
    at: Timestamp
    id: Uuid
    on: Uuid | None = None


Written = PostWrite | CommentWrite
"""One write a session made."""

JournalLine = Annotated[SessionHeader | PostWrite | CommentWrite, Field(discriminator="line")]
"""One line of the session journal, tagged by ``line``."""
