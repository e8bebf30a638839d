"""pydantic-ai message history kept in a session store.

A run's new messages go in as one batch; the next run's history comes out
of the store's context::

    history = await load_history(store, session_id)
    result = await agent.run("And tomorrow?", message_history=history)
    await save_messages(store, session_id, result.new_messages())

A long-lived agent keeps one `MessageHistories`, whose turns convert only
what was added since the last one. docs/integrations.md (pydantic-ai) tells
how each message is stored and how a compaction reads.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from operator import attrgetter
from typing import Any

try:
    from pydantic_ai.messages import (
        ModelMessage,
        ModelMessagesTypeAdapter,
        ModelRequest,
        ModelRequestPart,
        ModelResponse,
        ModelResponsePart,
        RetryPromptPart,
        SystemPromptPart,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
    from pydantic_ai.tools import RunContext
    from pydantic_ai.toolsets import WrapperToolset
    from pydantic_ai.toolsets.abstract import ToolsetTool
except ImportError as exc:
    raise ImportError(
        f"sessionstore.integrations.pydantic_ai needs pydantic-ai ({exc}): "
        "pip install 'sessionstore[pydantic-ai]'"
    ) from exc

import sessionstore.integrations.turns as turns
from sessionstore import (
    MAX_DEPTH,
    Effect,
    EffectLog,
    InvalidRecordError,
    Message,
    MessageEntry,
    SessionStore,
    validate_session_id,
)
from sessionstore.integrations.kept import KeptContext, Latest
from sessionstore.sync import SyncStore

__all__ = [
    "PYDANTIC_AI_FIELD",
    "MessageHistories",
    "OnceToolset",
    "from_context",
    "load_history",
    "load_history_sync",
    "save_messages",
    "save_messages_sync",
    "to_entries",
    "to_message",
]

PYDANTIC_AI_FIELD = "pydantic_ai"
"""The `Message` field holding pydantic-ai's serialization of the message."""


async def load_history(store: SessionStore, session_id: str) -> list[ModelMessage]:
    """A session's context as pydantic-ai's ``message_history``.

    Raises:
        SessionNotFoundError, CorruptSessionError: as `SessionStore.load_context`.
    """
    return from_context(await store.load_context(session_id))


async def save_messages(
    store: SessionStore, session_id: str, messages: Sequence[ModelMessage]
) -> None:
    """Append pydantic-ai messages (a run's ``new_messages()``) to a session,
    all or none, one entry each.

    Raises:
        SessionNotFoundError: no such session; nothing is stored.
        InvalidRecordError: a message holds what the wire format cannot
            carry; nothing is stored.
    """
    await store.append_many(session_id, _entries(session_id, messages))


def load_history_sync(store: SyncStore, session_id: str) -> list[ModelMessage]:
    """`load_history` on a blocking store."""
    return from_context(store.load_context(session_id))


def save_messages_sync(store: SyncStore, session_id: str, messages: Sequence[ModelMessage]) -> None:
    """`save_messages` on a blocking store."""
    store.append_many(session_id, _entries(session_id, messages))


@dataclass
class OnceToolset(WrapperToolset[Any]):
    """A toolset whose every tool call runs through `EffectLog.once`
    (docs/effects.md): a run replayed after a crash gets the recorded
    result of each call that finished, without the tool running again::

        toolset = OnceToolset(FunctionToolset([send_email]), store.journal("mailer").effects,
                              session=session_id)
        agent = Agent(model, toolsets=[toolset])

    With ``session`` (the conversation's session id), each call is keyed
    by what a model asked again does not change (`turns.turn_key`), read
    from the run's messages: a rerun loads the history the cut run loaded,
    so its calls get the keys they had. Without it, by the model's
    tool-call id. For a call in doubt, ``check`` and ``idempotent`` are
    `EffectLog.once`'s; without either, `EffectInDoubtError` ends the run.
    """

    effects: EffectLog
    session: str | None = None
    check: Callable[[Effect], Any] | None = None
    idempotent: bool = False

    async def call_tool(
        self,
        name: str,
        tool_args: dict[str, Any],
        ctx: RunContext[Any],
        tool: ToolsetTool[Any],
    ) -> Any:
        return await self.effects.once(
            partial(self.wrapped.call_tool, name, tool_args, ctx, tool),
            tool=name,
            args=tool_args,
            session=self.session,
            call_id=ctx.tool_call_id,
            key=None if self.session is None else _turn_key(self.session, name, tool_args, ctx),
            check=self.check,
            idempotent=self.idempotent,
        )


def _turn_key(session: str, tool: str, args: Any, ctx: RunContext[Any]) -> str:
    """The key of the call ``ctx`` names; the turn begins at the last user prompt."""
    messages = ctx.messages
    start = next(
        (
            at
            for at in range(len(messages) - 1, -1, -1)
            if isinstance(messages[at], ModelRequest)
            and any(isinstance(part, UserPromptPart) for part in messages[at].parts)
        ),
        0,
    )
    before = ModelMessagesTypeAdapter.dump_json(list(messages[max(0, start - 1) : start]))
    prompt = [
        part.content
        for part in (messages[start].parts if start < len(messages) else ())
        if isinstance(part, UserPromptPart)
    ]
    anchor = turns.digest([start, before.decode(), [_prompt_text(each) for each in prompt]])[:16]
    calls = [
        part
        for message in messages[start:]
        if isinstance(message, ModelResponse)
        for part in message.parts
        if isinstance(part, ToolCallPart) and part.tool_name == tool
    ]
    at = next((i for i, part in enumerate(calls) if part.tool_call_id == ctx.tool_call_id), None)
    if at is None:  # not a call of the run's messages: the turn's calls so far come first
        return turns.turn_key(session, anchor, tool, args, len(calls))
    wanted = turns.digest(calls[at].args_as_dict())
    rank = sum(turns.digest(part.args_as_dict()) == wanted for part in calls[:at])
    return turns.turn_key(session, anchor, tool, args, rank)


class MessageHistories:
    """`load_history` and `save_messages` for a store's sessions, each
    session's history kept converted between calls.

    A long-lived agent makes one for every turn: a turn then converts only
    the messages added since the last one, for the last `SESSIONS` used::

        histories = MessageHistories(store)
        history = await histories.load(session_id)
        result = await agent.run("And tomorrow?", message_history=history)
        await histories.save(session_id, result.new_messages())

    The lists returned are new; the messages in them are the kept objects
    (as ``result.all_messages()`` hands them on): don't change them.

    Args:
        store: any store; the caller keeps it open.
    """

    SESSIONS = 256
    """Sessions whose conversions are kept at most, the latest used."""

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self._kept: Latest[KeptContext[ModelMessage]] = Latest(
            lambda name: KeptContext(_converted), most=self.SESSIONS, weigh=attrgetter("weight")
        )

    def __repr__(self) -> str:
        return f"MessageHistories({self.store!r})"

    async def load(self, session_id: str) -> list[ModelMessage]:
        """`load_history`: the session's context as pydantic-ai's ``message_history``.

        Raises:
            SessionNotFoundError, CorruptSessionError: as `SessionStore.load_context`.
            InvalidSessionIdError: ``session_id`` breaks the session-id rule.
        """
        validate_session_id(session_id)
        return await self._kept.get(session_id).read(self.store, session_id)

    async def save(self, session_id: str, messages: Sequence[ModelMessage]) -> None:
        """`save_messages`: a run's new messages appended, all or none.

        Raises:
            as `save_messages`.
        """
        await save_messages(self.store, session_id, messages)


# ---------------------------------------------------------------- messages


def to_entries(messages: Sequence[ModelMessage]) -> list[MessageEntry]:
    """New entries holding ``messages``, one each, in order.

    Raises:
        InvalidRecordError: a message cannot be serialized (nested too deep...).
    """
    payloads = _payloads(messages)
    return [
        MessageEntry.new(_stored(message, payload))
        for message, payload in zip(messages, payloads, strict=True)
    ]


def to_message(message: ModelMessage) -> Message:
    """A pydantic-ai message as the store keeps it; `from_context` gives it back equal.

    Raises:
        InvalidRecordError: as `to_entries`.
    """
    return _stored(message, _payloads([message])[0])


def _entries(session_id: str, messages: Sequence[ModelMessage]) -> list[MessageEntry]:
    """`to_entries`, a refusal naming the session."""
    try:
        return to_entries(messages)
    except InvalidRecordError as exc:
        raise InvalidRecordError(f"session {session_id!r}: {exc}") from None


def _payloads(messages: Sequence[ModelMessage]) -> list[Any]:
    """The JSON form of messages, as pydantic-ai serializes them.

    Raises:
        InvalidRecordError: pydantic-ai cannot serialize one, or nests too deep.
    """
    try:
        payloads: list[Any] = json.loads(ModelMessagesTypeAdapter.dump_json(list(messages)))
    except RecursionError:
        raise InvalidRecordError(f"a message is nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:  # PydanticSerializationError: "serialization depth exceeded"
        deep = "depth exceeded" in str(exc)
        raise InvalidRecordError(
            f"a message is nested deeper than {MAX_DEPTH} levels"
            if deep
            else f"a message cannot be serialized: {exc}"
        ) from None
    return payloads


def from_context(messages: Sequence[Message]) -> list[ModelMessage]:
    """pydantic-ai messages from stored ones (`SessionStore.load_context` gives them).

    A message `to_message` made comes back as pydantic-ai's own JSON round
    trip gives it; any other is mapped by role (docs/integrations.md).
    """
    return _converted(messages, ())


def _converted(messages: Sequence[Message], before: Sequence[ModelMessage]) -> list[ModelMessage]:
    """`from_context` of ``messages`` after ``before`` (where a tool's result finds its call)."""
    history: list[ModelMessage] = []
    for message in messages:
        payload = message.extra.get(PYDANTIC_AI_FIELD)
        if isinstance(payload, dict):  # pydantic-ai's own reader, on its JSON
            history.extend(ModelMessagesTypeAdapter.validate_json(json.dumps([payload])))
        else:
            history.append(_by_role(message, [*before, *history] if before else history))
    return history


def _stored(message: ModelMessage, payload: Any) -> Message:
    fields: dict[str, Any] = {}
    if isinstance(message, ModelResponse):
        role = "assistant"
        text = _joined(part.content for part in message.parts if isinstance(part, TextPart))
        calls = [
            turns.openai_call(part.tool_call_id, part.tool_name, part.args_as_json_str())
            for part in message.parts
            if isinstance(part, ToolCallPart)
        ]
        if calls:
            fields["tool_calls"] = calls
    else:
        role, text = _request_role_and_text(message.parts)
    fields[PYDANTIC_AI_FIELD] = payload
    return Message(role=role, content=text, **fields)


def _request_role_and_text(parts: Sequence[ModelRequestPart]) -> tuple[str, str]:
    """A request's role, and the text of its user prompts, else tool results, else system."""
    prompts: list[str] = []
    results: list[str] = []
    systems: list[str] = []
    for part in parts:
        feedback = getattr(part, "model_response", None)
        if isinstance(part, UserPromptPart):
            prompts.append(_prompt_text(part.content))
        elif isinstance(part, ToolReturnPart):  # a retried tool call too, from pydantic-ai 2
            results.append(part.model_response_str())
        elif isinstance(part, RetryPromptPart) and part.tool_name is not None:
            results.append(part.model_response())
        elif isinstance(part, SystemPromptPart):
            systems.append(part.content)
        elif callable(feedback):  # a retry no tool asked for: RetryPromptPart, RetryFeedbackPart
            prompts.append(str(feedback()))
    for role, texts in (("user", prompts), ("tool", results), ("system", systems)):
        if texts:
            return role, _joined(texts)
    return "user", ""


def _prompt_text(content: Any) -> str:
    """The text of a user prompt: itself, or its text items (images and files left out)."""
    if isinstance(content, str):
        return content
    return _joined(item for item in content if isinstance(item, str))


def _joined(texts: Any) -> str:
    return "\n\n".join(text for text in texts if text)


def _by_role(message: Message, before: Sequence[ModelMessage]) -> ModelMessage:
    """A message stored without pydantic-ai's form of it, mapped by its role."""
    text = message.text()
    if message.role == "assistant":
        parts: list[ModelResponsePart] = [TextPart(content=text)] if text else []
        for call_id, name, arguments in turns.openai_calls(message):
            if isinstance(name, str):
                parts.append(
                    ToolCallPart(
                        tool_name=name,
                        args=arguments if isinstance(arguments, str | dict) else None,
                        tool_call_id=str(call_id or ""),
                    )
                )
        return ModelResponse(parts=parts)
    if message.role == "system":
        return ModelRequest(parts=[SystemPromptPart(content=text)])
    if message.role == "tool":
        call_id = str(message.extra.get("tool_call_id") or "")
        return ModelRequest(
            parts=[
                ToolReturnPart(
                    tool_name=_tool_name(call_id, before), content=text, tool_call_id=call_id
                )
            ]
        )
    return ModelRequest(parts=[UserPromptPart(content=text)])


def _tool_name(call_id: str, before: Sequence[ModelMessage]) -> str:
    """The name of the tool the last call with ``call_id`` called; empty when unknown."""
    for message in reversed(before):
        if isinstance(message, ModelResponse):
            for part in message.parts:
                if isinstance(part, ToolCallPart) and part.tool_call_id == call_id:
                    return part.tool_name
    return ""
