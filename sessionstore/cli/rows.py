"""What a message says on one line of the terminal: ``show``'s rows and
context, and the demo's. The pieces come from `sessionstore.parts`, the
reading the HTML page renders too; here they are put in words.

A tool call reads ``get_weather({"city": "Lisbon"})``, its result
``get_weather → {"high_c": 24}`` (the tool named by the result, or by the
call it answers when that was seen before it), each shortened to
`SHORT` characters on one line.
"""

from __future__ import annotations

from typing import Any

from sessionstore.errors import InvalidRecordError
from sessionstore.models import CompactionEntry, Message
from sessionstore.parts import Piece, Said, ToolCall, ToolResult, read_message
from sessionstore.wire import encode_value

__all__ = ["SHORT", "ToolNames", "compaction_text", "message_line"]

SHORT = 160
"""The most characters a tool's arguments or output take in a line."""


class ToolNames:
    """The names of the tool calls seen so far, by call id, until a result answers one."""

    def __init__(self) -> None:
        self._names: dict[str, str] = {}

    def saw(self, call: ToolCall) -> None:
        if call.call_id is not None and call.name is not None:
            self._names[call.call_id] = call.name

    def answered(self, result: ToolResult) -> str:
        """The name of the tool a result is from, as a line shows it."""
        known = None if result.call_id is None else self._names.pop(result.call_id, None)
        if result.name is not None:
            return result.name
        if known is not None:
            return known
        return "tool" if result.call_id is None else result.call_id


def message_line(message: Message, names: ToolNames) -> tuple[str, str]:
    """A message's label and what it says: its text as it is (lines kept),
    each tool call and result on one line. Not yet made safe to print:
    `sessionstore.cli.output` does that."""
    reading = read_message(message)
    said: list[tuple[str, str]] = []  # (text or tool, what it says)
    for piece in reading.pieces:
        shown = _piece(piece, names, reading.label)
        if said and isinstance(piece, Said) and said[-1][0] == "text":
            said[-1] = ("text", said[-1][1] + shown)  # text parts run on, as `Message.text`
        else:
            said.append(("text" if isinstance(piece, Said) else "tool", shown))
    return reading.label, " · ".join(text for _, text in said)


def compaction_text(entry: CompactionEntry) -> str:
    """A compaction's summary, then where the context it stands for resumes."""
    kept = entry.first_kept_id
    short = kept if len(kept) <= 13 else kept[:8] + "…"
    return f"{entry.summary} [keeps from {short}]"


def _piece(piece: Piece, names: ToolNames, label: str) -> str:
    if isinstance(piece, Said):
        return piece.text
    if isinstance(piece, ToolCall):
        names.saw(piece)
        arguments = "" if piece.arguments is None else _short(piece.arguments)
        called = f"{piece.name or 'tool'}({arguments})"
        return called if label == "tool call" else f"tool call {called}"
    if isinstance(piece, ToolResult):
        output = _short("".join(_piece(part, names, label) for part in piece.output))
        status = "" if piece.status is None else f"{piece.status}: "
        result = f"{names.answered(piece)} → {status}{output}"
        return result if label == "tool result" else f"tool result {result}"
    return f"[{piece.kind}]" if piece.kind is not None else _short(piece.value)


def _short(value: Any) -> str:
    """A value on one line, at most `SHORT` characters."""
    if not isinstance(value, str):
        try:
            value = encode_value(value)
        except InvalidRecordError:
            value = repr(value)  # not JSON (a memory store's odd value): shown anyway
    flat = " ".join(value.split())
    return flat if len(flat) <= SHORT else flat[: SHORT - 1] + "…"
