"""How `sessionstore.integrations.adk` lays ADK sessions out in a store:
names (owners, session ids, heads, journals), events as entries, and the
state records beside them. docs/integrations.md (ADK) describes the layout.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

try:
    from google.adk.events.event import Event
    from google.genai import types
    from pydantic_core import to_jsonable_python
except ImportError as exc:
    raise ImportError(
        f"sessionstore.integrations.adk needs google-adk ({exc}): pip install 'sessionstore[adk]'"
    ) from exc

from sessionstore import (
    InvalidRecordError,
    InvalidSessionIdError,
    Message,
    MessageEntry,
    SessionEntry,
    validate_session_id,
)

__all__ = [
    "ADK_FIELD",
    "CREATED_FIELD",
    "STATE_AT_FIELD",
    "STATE_FIELD",
    "Names",
    "Tail",
    "created_entry",
    "event_entry",
    "event_of",
    "event_time",
    "json_safe",
    "message_of",
    "owner_of",
    "split_state",
    "state_line",
]

ADK_FIELD = "adk"
"""The `Message` field holding the whole ADK ``Event`` (its JSON form)."""

STATE_FIELD = "adk_state"
"""The `Message` field holding the session's own state after the entry,
written where the entry changed it (and in the session's first entry)."""

STATE_AT_FIELD = "adk_state_at"
"""The `Message` field of an entry that left the state as it was: the
position of the entry holding it."""

CREATED_FIELD = "adk_created"
"""The first entry's field: the session's creation time (seconds since the epoch)."""

APP_PREFIX, USER_PREFIX, TEMP_PREFIX = "app:", "user:", "temp:"

_SEPARATORS = (",", ":")
_RID_BYTES = 150  # an ADK session id up to this long is kept readable in the store's id


def _digest(*parts: str) -> str:
    text = json.dumps(parts, ensure_ascii=False, separators=_SEPARATORS)
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def owner_of(app_name: str, user_id: str) -> str:
    """The store owner of an ADK (app, user): ``adk:`` then the JSON array
    ``[app_name, user_id]``, which no other pair writes."""
    return "adk:" + json.dumps([app_name, user_id], ensure_ascii=False, separators=_SEPARATORS)


@dataclass(frozen=True)
class Names:
    """Where one ADK session lives in a store.

    Attributes:
        session_id: the ADK session id, stripped of surrounding whitespace.
        base: the id of the store session it starts as, and the name of the
            head that names the store session it continues in (a rewind
            forks): ``adk-<scope>-<session id>`` when the ADK id fits the
            session-id rule, else ``adk-<scope>=<digest>``, where ``scope``
            is a 128-bit digest of the app and the user.
        owner: `owner_of` the app and user.
    """

    app_name: str
    user_id: str
    session_id: str
    base: str
    owner: str

    @classmethod
    def of(cls, app_name: str, user_id: str, session_id: str) -> Names:
        """The names of a session; its id stripped of surrounding whitespace,
        as ADK's ``InMemorySessionService`` strips it on every call, so
        ``"s1\\n"`` and ``"s1"`` name one session."""
        session_id = session_id.strip()
        scope = _digest(app_name, user_id)
        readable = f"adk-{scope}-{session_id}"
        try:
            fits = len(session_id.encode("utf-8")) <= _RID_BYTES
            if fits:
                validate_session_id(readable)
        except (InvalidSessionIdError, UnicodeEncodeError):
            fits = False
        base = readable if fits else f"adk-{scope}={_digest(session_id)}"
        return cls(app_name, user_id, session_id, base, owner_of(app_name, user_id))

    def branch(self, number: int) -> str:
        """The id of the store session the ``number``-th rewind forks to."""
        scope = _digest(self.app_name, self.user_id)
        return f"adk-{scope}~{_digest(self.session_id)}-{number}"

    def metadata(self, branch: int) -> dict[str, Any]:
        """The header's ``metadata`` of the store session of ``branch`` (0: the first)."""
        return {
            ADK_FIELD: {
                "app_name": self.app_name,
                "user_id": self.user_id,
                "session_id": self.session_id,
                "branch": branch,
            }
        }

    @property
    def user_journal(self) -> str:
        """The journal of the user's state in the app."""
        return f"adk-user-{_digest(self.app_name, self.user_id)}"


def app_journal(app_name: str) -> str:
    """The journal of an app's state, and of the users who have sessions in it."""
    return f"adk-app-{_digest(app_name)}"


def json_safe(value: Any) -> Any:
    """``value`` as JSON data, as ADK's database service stores state.

    Raises:
        InvalidRecordError: it holds what JSON cannot carry.
    """
    try:
        return to_jsonable_python(value)
    except Exception as exc:  # pydantic_core's PydanticSerializationError, among others
        raise InvalidRecordError(f"an ADK state value cannot be stored as JSON: {exc}") from None


def split_state(state: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The app, user and session parts of a state (or delta), prefixes taken
    off the first two; ``temp:`` keys dropped."""
    app: dict[str, Any] = {}
    user: dict[str, Any] = {}
    session: dict[str, Any] = {}
    for key, value in state.items():
        if key.startswith(APP_PREFIX):
            app[key.removeprefix(APP_PREFIX)] = value
        elif key.startswith(USER_PREFIX):
            user[key.removeprefix(USER_PREFIX)] = value
        elif not key.startswith(TEMP_PREFIX):
            session[key] = value
    return app, user, session


def state_line(key: str, state: dict[str, Any]) -> bytes:
    """A keyed journal line holding a whole scope's state."""
    return json.dumps(
        {"key": key, "state": state}, ensure_ascii=False, separators=_SEPARATORS, allow_nan=False
    ).encode()


# ---------------------------------------------------------------- entries


def created_entry(names: Names, created: float, state: dict[str, Any]) -> MessageEntry:
    """A session's first entry: when it was made and its own initial state."""
    text = f"ADK session {names.session_id} (app {names.app_name}, user {names.user_id})"
    fields = {"role": "system", "content": text, CREATED_FIELD: created, STATE_FIELD: state}
    return MessageEntry.new(Message.model_validate(fields))


def event_entry(payload: dict[str, Any], event: Event, state: dict[str, Any] | int) -> MessageEntry:
    """The entry of an event: its message, the whole event, and the session's
    state after it (a dict) or where that is (a position)."""
    fields = dict(message_of(event))
    fields[ADK_FIELD] = payload
    fields[STATE_FIELD if isinstance(state, dict) else STATE_AT_FIELD] = state
    return MessageEntry.new(Message.model_validate(fields))


def message_of(event: Event) -> dict[str, Any]:
    """The role and content every view reads for an event: its text parts as
    text, its function calls and responses as ``tool_use`` and
    ``tool_result`` blocks, anything else a block of its own kind."""
    content = event.content
    if content is not None and content.role == "model":
        role = "assistant"
    elif (content is not None and content.role == "user") or event.author == "user":
        role = "user"
    else:
        role = "assistant"
    blocks = [block for part in (content.parts or [] if content else []) for block in _blocks(part)]
    if not blocks:  # an event that only acts: say what it does
        return {"role": role, "content": _acts(event)}
    if all(block.get("type") == "text" for block in blocks):
        return {"role": role, "content": "".join(block["text"] for block in blocks)}
    return {"role": role, "content": blocks}


def _acts(event: Event) -> str:
    """What an event without content does, in words (empty when nothing views show)."""
    actions = event.actions
    said = []
    if actions.rewind_before_invocation_id:
        said.append(f"[rewind to before invocation {actions.rewind_before_invocation_id}]")
    if actions.transfer_to_agent:
        said.append(f"[transfer to {actions.transfer_to_agent}]")
    if actions.escalate:
        said.append("[escalate]")
    return " ".join(said)


def _blocks(part: types.Part) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if part.text is not None:
        blocks.append({"type": "thinking" if part.thought else "text", "text": part.text})
    if part.function_call is not None:
        call = part.function_call
        blocks.append(
            {"type": "tool_use", "id": call.id, "name": call.name, "input": json_safe(call.args)}
        )
    if part.function_response is not None:
        response = part.function_response
        blocks.append(
            {
                "type": "tool_result",
                "tool_use_id": response.id,
                "name": response.name,
                "content": json.dumps(json_safe(response.response), ensure_ascii=False),
            }
        )
    for kind in ("inline_data", "file_data"):
        data = getattr(part, kind)
        if data is not None:
            blocks.append({"type": kind, "mime_type": data.mime_type})
    if part.executable_code is not None:
        blocks.append({"type": "executable_code", "code": part.executable_code.code})
    if part.code_execution_result is not None:
        result = part.code_execution_result
        blocks.append({"type": "code_execution_result", "output": result.output})
    return blocks


def event_of(entry: SessionEntry) -> Event | None:
    """The event an entry holds: the adapter's copy, exactly as appended; a
    message another writer stored, as a text event; None for the session's
    first entry and for compactions."""
    if not isinstance(entry, MessageEntry):
        return None
    message = entry.message
    extra = message.extra
    payload = extra.get(ADK_FIELD)
    if isinstance(payload, dict):
        return Event.model_validate(payload)
    if CREATED_FIELD in extra:
        return None
    user = message.role == "user"
    return Event(
        id=entry.id,
        author="user" if user else message.role,
        content=types.Content(
            role="user" if user else "model", parts=[types.Part(text=message.text())]
        ),
        timestamp=datetime.fromisoformat(entry.timestamp).timestamp(),
    )


def event_time(entry: SessionEntry) -> float | None:
    """The time of the event an entry holds (None: it holds none), read
    without building the event."""
    if isinstance(entry, MessageEntry):
        payload = entry.message.extra.get(ADK_FIELD)
        stamp = payload.get("timestamp") if isinstance(payload, dict) else None
        if isinstance(stamp, int | float) and not isinstance(stamp, bool):
            return float(stamp)
    event = event_of(entry)
    return None if event is None else event.timestamp


@dataclass(frozen=True)
class Tail:
    """Where a store session ends, as the next append needs it.

    Attributes:
        session: the store session's id.
        last: its last entry's id (``""``: none).
        length: how many entries it holds.
        state_at: the position of the entry holding its state (-1: none).
        updated: the time of its last event, else its creation.
        state: the session's own state, that entry's, when it was read
            (None: to read).
    """

    session: str
    last: str
    length: int
    state_at: int
    updated: float
    state: dict[str, Any] | None = None

    def marker(self) -> str:
        """The tail as ADK's ``Session`` keeps it between calls."""
        fields = [self.session, self.last, self.length, self.state_at, self.updated, self.state]
        return json.dumps(fields, ensure_ascii=False, separators=_SEPARATORS)

    @classmethod
    def from_marker(cls, marker: str | None) -> Tail | None:
        """The tail a `marker` wrote; None for anything else."""
        try:
            session, last, length, state_at, updated, state = json.loads(marker or "")
        except (ValueError, TypeError):
            return None
        values = (session, last, length, state_at, updated, state)
        kinds = (str, str, int, int, float, dict | None)
        if not all(isinstance(v, k) for v, k in zip(values, kinds, strict=True)):
            return None
        return cls(session, last, length, state_at, updated, state)


def state_of(entry: SessionEntry, position: int) -> dict[str, Any] | int | None:
    """The state an entry holds (a dict), where it is (a position), or None
    when the entry says neither."""
    if not isinstance(entry, MessageEntry):
        return None
    extra = entry.message.extra
    state = extra.get(STATE_FIELD)
    if isinstance(state, dict):
        return state
    at = extra.get(STATE_AT_FIELD)
    return at if isinstance(at, int) and 0 <= at < position else None


def updated_of(entries: Sequence[SessionEntry]) -> float | None:
    """The time of the last event among ``entries`` (the creation time when
    the first entry is the last); None when they hold neither."""
    for entry in reversed(entries):
        if isinstance(entry, MessageEntry):
            created = entry.message.extra.get(CREATED_FIELD)
            if isinstance(created, int | float):
                return float(created)
        event = event_of(entry)
        if event is not None:
            return event.timestamp
    return None
