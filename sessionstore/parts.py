"""What a stored message says, in every shape the store keeps: text, tool
calls, tool results, and anything else (`Other`, shown as stored, never dropped).

`read_message` is the one reading every view renders (``sessionstore show``,
the demo, `sessionstore.transcript`). It knows OpenAI Chat Completions
(``tool_calls``, ``function_call``, ``tool`` and ``function`` results, as the
LangChain and pydantic-ai adapters store theirs too), Anthropic Messages
(``tool_use``, ``server_tool_use``, ``tool_result`` blocks), openai-agents
items (held as the message's content or in its fields: every ``..._call``
and ``..._call_output``, ``reasoning``), and pydantic-ai's requests as its
adapter keeps them. It reads no backend and no framework.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from sessionstore.models import Message

__all__ = ["Other", "Piece", "Reading", "Said", "ToolCall", "ToolResult", "read_message"]


@dataclass(frozen=True)
class Said:
    """Text the message says, with the other fields of its content part (an
    ``output_text`` part's ``annotations``)."""

    text: str
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ToolCall:
    """A tool the model asked to run.

    Attributes:
        call_id: the id its result names; None when it has none.
        name: the tool's name; None when the call does not say.
        arguments: what the tool is given: JSON text (OpenAI's), any other
            JSON value (Anthropic's ``input``), or None.
    """

    call_id: str | None
    name: str | None
    arguments: Any


@dataclass(frozen=True)
class ToolResult:
    """What a tool gave back.

    Attributes:
        call_id: the id of the call it answers; None when it names none.
        name: the tool's name, when the result says it (else the call's).
        output: what the tool returned, read as content is.
        status: None when it succeeded or does not say; else ``"error"``,
            pydantic-ai's ``"retry"``...
    """

    call_id: str | None
    name: str | None
    output: tuple[Piece, ...]
    status: str | None = None


@dataclass(frozen=True)
class Other:
    """A part or item none of the above, shown as stored; ``kind`` is its
    ``type`` when it has one (``"image_url"``)."""

    value: Any
    kind: str | None


Piece = Said | ToolCall | ToolResult | Other
"""One thing a message says."""


@dataclass(frozen=True)
class Reading:
    """A message as every view shows it.

    Attributes:
        label: ``"tool call"`` or ``"tool result"`` when it holds only those,
            an openai-agents item's type in words, else its role.
        pieces: what it says, in order.
        fields: its further fields that no piece shows, in their order.
    """

    label: str
    pieces: tuple[Piece, ...]
    fields: dict[str, Any]


_ITEM_FIELDS = ("function_call", "function_call_output")
"""The openai-agents items a message may hold in its own fields
(`sessionstore.pairing.openai_agents`)."""
_TEXT_PARTS = frozenset({"text", "input_text", "output_text", "summary_text"})
_ARGUMENTS = ("arguments", "input", "action", "operation", "queries", "code")
"""Where an openai-agents ``..._call`` item holds what its tool is given."""
_PYDANTIC_AI = "pydantic_ai"  # the pydantic-ai adapter's copy of the message
_LANGCHAIN = "langchain"  # the LangChain adapter's


def read_message(message: Message) -> Reading:
    """What a stored message says (the module docstring lists the shapes)."""
    extra = message.extra
    shown: set[str] = set()
    pieces: list[Piece] = []
    returned = list(_pydantic_ai_results(extra.get(_PYDANTIC_AI)))
    if extra.get("type") in _ITEM_FIELDS:  # openai-agents: the fields are the item
        pieces += _item(extra)
        shown |= set(extra)
        pieces += content_pieces(message.content)
    elif returned:
        pieces += returned
        if message.role != "tool":  # a tool message's text is its results'
            pieces += content_pieces(message.content)
    elif isinstance(extra.get("tool_call_id"), str) or _chat_result_role(message):
        pieces.append(_chat_result(message, extra, shown))
    else:
        pieces += content_pieces(message.content)
    calls = extra.get("tool_calls")
    if isinstance(calls, list):
        pieces += (_chat_call(call) for call in calls)
        shown.add("tool_calls")
    legacy = extra.get("function_call")
    if "function_call" not in shown and isinstance(legacy, dict):
        pieces.append(ToolCall(None, _string(legacy.get("name")), legacy.get("arguments")))
        shown.add("function_call")
    return Reading(
        _label(message, pieces),
        tuple(pieces),
        {key: value for key, value in extra.items() if key not in shown},
    )


def content_pieces(content: Any) -> list[Piece]:
    """The pieces of a message's content (or a tool's output): a string is
    text, an object one part, a list its parts in order."""
    if isinstance(content, str):
        return [Said(content)] if content else []
    if content is None:
        return []
    if isinstance(content, list):
        return [piece for part in content for piece in _part(part)]
    return _part(content)


def _label(message: Message, pieces: list[Piece]) -> str:
    kinds = {type(piece) for piece in pieces}
    if kinds == {ToolCall}:
        return "tool call"
    if kinds == {ToolResult}:
        return "tool result"
    content = message.content
    if isinstance(content, dict) and content.get("type") == message.role:
        return message.role.replace("_", " ")  # an openai-agents item: its type
    return message.role


def _part(part: Any) -> list[Piece]:
    if isinstance(part, str):  # LangChain's content lists hold bare strings too
        return [Said(part)] if part else []
    if not isinstance(part, dict):
        return [Other(part, None)]
    kind = _string(part.get("type"))
    text = part.get("text")
    if kind in _TEXT_PARTS and isinstance(text, str):
        return [Said(text, {k: v for k, v in part.items() if k not in ("type", "text")})]
    if kind in ("tool_use", "server_tool_use"):
        return [ToolCall(_string(part.get("id")), _string(part.get("name")), part.get("input"))]
    if kind is not None and kind.endswith("tool_result") and "tool_use_id" in part:
        status = "error" if part.get("is_error") is True else None
        output = content_pieces(part.get("content"))
        return [ToolResult(_string(part.get("tool_use_id")), None, tuple(output), status)]
    if kind is not None and (kind.endswith("_call") or kind.endswith("_call_output")):
        return _item(part)
    if kind == "reasoning":
        summary = part.get("summary")
        said = [piece for piece in content_pieces(summary) if isinstance(piece, Said)]
        return list(said) if said else [Other(part, kind)]
    return [Other(part, kind)]


def _item(item: dict[str, Any]) -> list[Piece]:
    """An openai-agents tool item: a call, an output, or (``mcp_call``) both."""
    kind = str(item.get("type"))
    call_id = _string(item.get("call_id")) or _string(item.get("id"))
    if kind.endswith("_output"):
        return [ToolResult(call_id, None, tuple(_output(item.get("output"))))]
    name = _string(item.get("name")) or kind.removesuffix("_call")
    arguments = next((item[key] for key in _ARGUMENTS if key in item), None)
    pieces: list[Piece] = [ToolCall(call_id, name, arguments)]
    if item.get("output") is not None or item.get("error") is not None:  # answered in place
        status = None if item.get("error") is None else "error"
        output = _output(item.get("output") if status is None else item.get("error"))
        pieces.append(ToolResult(call_id, name, tuple(output), status))
    return pieces


def _output(output: Any) -> list[Piece]:
    """A tool's output: text, content parts, or any other value as it is."""
    if isinstance(output, str | list) or output is None:
        return content_pieces(output)
    if isinstance(output, dict) and isinstance(output.get("type"), str):
        return _part(output)
    return [Other(output, None)]


def _chat_call(call: Any) -> Piece:
    """An OpenAI ``tool_calls`` entry."""
    if not isinstance(call, dict):
        return Other(call, None)
    function = call.get("function")
    if not isinstance(function, dict):
        return ToolCall(_string(call.get("id")), None, None)
    return ToolCall(
        _string(call.get("id")), _string(function.get("name")), function.get("arguments")
    )


def _chat_result_role(message: Message) -> bool:
    """A ``tool`` or ``function`` message that is the result itself, not one
    holding result items or blocks in its content."""
    if message.role not in ("tool", "function"):
        return False
    held = content_pieces(message.content)
    return not any(isinstance(piece, ToolCall | ToolResult) for piece in held)


def _chat_result(message: Message, extra: dict[str, Any], shown: set[str]) -> ToolResult:
    """An OpenAI ``tool`` (or ``function``) message, as LangChain stores its
    ``ToolMessage`` too."""
    call_id = _string(extra.get("tool_call_id"))
    shown.add("tool_call_id")
    name = _string(extra.get("name"))
    if name is not None:
        shown.add("name")
    kept = extra.get(_LANGCHAIN)
    data = kept.get("data") if isinstance(kept, dict) else None
    failed = isinstance(data, dict) and data.get("status") == "error"
    return ToolResult(call_id, name, tuple(_output(message.content)), "error" if failed else None)


def _pydantic_ai_results(kept: Any) -> Iterator[ToolResult]:
    """The tool returns and retries of a pydantic-ai request its adapter kept."""
    parts = kept.get("parts") if isinstance(kept, dict) else None
    if not isinstance(parts, list):
        return
    for part in parts:
        if not isinstance(part, dict) or not isinstance(part.get("tool_name"), str):
            continue
        call_id, name = _string(part.get("tool_call_id")), part["tool_name"]
        if part.get("part_kind") == "tool-return":
            outcome = part.get("outcome")
            status = None if outcome in (None, "success") else str(outcome)
            yield ToolResult(call_id, name, tuple(_output(part.get("content"))), status)
        elif part.get("part_kind") == "retry-prompt":
            yield ToolResult(call_id, name, tuple(_output(part.get("content"))), "retry")


def _string(value: Any) -> str | None:
    return value if isinstance(value, str) else None
