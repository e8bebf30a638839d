"""Encoding: records to serde_json-identical canonical lines (docs/wire-format.md)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

from sessionstore.errors import InvalidRecordError
from sessionstore.models import (
    Anchor,
    ArchivedKey,
    CommentWrite,
    CompactionEntry,
    Effect,
    Erasure,
    HeadMove,
    Message,
    MessageEntry,
    PostWrite,
    SessionHeader,
    SessionMeta,
    TitleChange,
)
from sessionstore.wire.limits import I64_MIN, MAX_DEPTH, SURROGATE, U64_MAX

__all__ = ["Record", "encode", "encode_line", "encode_string", "encode_value", "format_float"]

Record = (
    SessionMeta
    | MessageEntry
    | CompactionEntry
    | Message
    | SessionHeader
    | PostWrite
    | CommentWrite
    | HeadMove
    | TitleChange
    | Erasure
    | Anchor
    | ArchivedKey
    | Effect
)

_escape: Callable[[str], str] = json.encoder.encode_basestring


def format_float(value: float) -> str:
    """Format a finite float exactly as serde_json (ryu) does."""
    if value == 0.0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign = "-" if value < 0 else ""
    text = repr(abs(value))
    mantissa, _, exp_text = text.partition("e")
    whole, _, frac = mantissa.partition(".")
    digits = whole + frac
    exponent = (int(exp_text) if exp_text else 0) - len(frac)
    stripped = digits.rstrip("0")
    exponent += len(digits) - len(stripped)
    digits = stripped.lstrip("0")
    length = len(digits)
    kk = length + exponent  # 10**(kk-1) <= |value| < 10**kk
    if exponent >= 0 and kk <= 16:
        body = digits + "0" * exponent + ".0"
    elif 0 < kk <= 16:
        body = digits[:kk] + "." + digits[kk:]
    elif -5 < kk <= 0:
        body = "0." + "0" * -kk + digits
    elif length == 1:
        body = f"{digits}e{kk - 1}"
    else:
        body = f"{digits[0]}.{digits[1:]}e{kk - 1}"
    return sign + body


def _encode_value(value: Any, out: list[str], depth: int, path: str) -> None:
    """Append the canonical JSON of an arbitrary JSON value to ``out``."""
    kind = type(value)
    if kind is str:
        out.append(_escape(value))
    elif value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif kind is int:
        out.append(_encode_int(value, path))
    elif kind is float:
        if not math.isfinite(value):
            raise InvalidRecordError(f"{path}: {value} is not a JSON number")
        out.append(format_float(value))
    elif kind is dict or kind is list:
        if depth > MAX_DEPTH:
            raise InvalidRecordError(f"{_outer(path)}: nested deeper than {MAX_DEPTH} levels")
        if kind is list:
            out.append("[")
            for index, item in enumerate(value):
                if index:
                    out.append(",")
                _encode_value(item, out, depth + 1, f"{path}[{index}]")
            out.append("]")
        else:
            out.append("{")
            _encode_fields(value.items(), out, depth, path, first=True)
            out.append("}")
    else:
        raise InvalidRecordError(f"{path}: {kind.__name__} is not a JSON value")


def _outer(path: str) -> str:
    """A deep value's path as an error names it: its first levels, not 127."""
    return path if len(path) <= 40 else path[:40] + "..."


def _encode_fields(items: Any, out: list[str], depth: int, path: str, *, first: bool) -> None:
    for key, item in items:
        if type(key) is not str:
            raise InvalidRecordError(f"{path}: object key {key!r} is not a string")
        out.append(_escape(key) + ":" if first else "," + _escape(key) + ":")
        first = False
        _encode_value(item, out, depth + 1, f"{path}.{key}" if path else key)


def _encode_int(value: int, path: str) -> str:
    if I64_MIN <= value <= U64_MAX:
        return str(value)
    try:
        return format_float(float(value))
    except OverflowError:
        raise InvalidRecordError(f"{path}: integer {value} is beyond the float range") from None


def _encode_message(message: Message, out: list[str], depth: int, path: str) -> None:
    out.append('{"role":' + _escape(message.role) + ',"content":')
    _encode_value(message.content, out, depth + 1, f"{path}content")
    if message.streaming:
        out.append(',"streaming":true')
    if message.__pydantic_extra__:
        _encode_fields(
            message.__pydantic_extra__.items(), out, depth, path.rstrip("."), first=False
        )
    out.append("}")


def _opt(name: str, value: str | None) -> str:
    return "" if value is None else f',"{name}":' + _escape(value)


# Records of strings, integers, timestamps and UUIDs only, written field by
# field in their model's order (the wire order), a None left out.
_FLAT: dict[type[Record], tuple[str, ...]] = {
    model: tuple(model.model_fields)
    for model in (
        SessionHeader,
        PostWrite,
        CommentWrite,
        HeadMove,
        TitleChange,
        Erasure,
        Anchor,
        ArchivedKey,
    )
}


def _encode_flat(record: Record, fields: tuple[str, ...], out: list[str]) -> None:
    sep = "{"
    for name in fields:
        value = getattr(record, name)
        if value is not None:
            text = str(value) if type(value) is int else _escape(str(value))
            out.append(f'{sep}"{name}":{text}')
            sep = ","
    out.append("}")


def _encode_record(record: Record, out: list[str]) -> None:
    if isinstance(record, MessageEntry):
        out.append(
            '{"type":"message","id":'
            + _escape(record.id)
            + _opt("parent_id", record.parent_id)
            + ',"timestamp":'
            + _escape(record.timestamp)
            + ',"message":'
        )
        _encode_message(record.message, out, 2, "message.")
        out.append("}")
    elif isinstance(record, CompactionEntry):  # an entry: appended, kept as quick as a message
        out.append(
            '{"type":"compaction","id":'
            + _escape(record.id)
            + _opt("parent_id", record.parent_id)
            + ',"timestamp":'
            + _escape(record.timestamp)
            + ',"summary":'
            + _escape(record.summary)
            + ',"first_kept_id":'
            + _escape(record.first_kept_id)
            + ("" if record.tokens_before is None else f',"tokens_before":{record.tokens_before}')
            + "}"
        )
    elif isinstance(record, SessionMeta):
        out.append(
            '{"id":'
            + _escape(record.id)
            + f',"version":{record.version}'
            + _opt("parent_session", record.parent_session)
            + ',"created_at":'
            + _escape(record.created_at)
            + _opt("title", record.title)
            + _opt("owner", record.owner)
        )
        if record.tags:
            out.append(',"tags":')
            _encode_value(list(record.tags), out, 1, "tags")
        if record.metadata:
            out.append(',"metadata":')
            _encode_value(record.metadata, out, 1, "metadata")
        out.append("}")
    elif isinstance(record, Message):
        _encode_message(record, out, 1, "")
    elif isinstance(record, Effect):
        out.append('{"effect":' + _escape(record.effect) + ',"key":' + _escape(record.key))
        for name in ("tool", "args", "session"):
            out.append(_opt(name, getattr(record, name)))
        if record.effect == "done":
            out.append(',"result":')
            _encode_value(record.result, out, 1, "result")
        for name in ("error", "reason", "by"):
            out.append(_opt(name, getattr(record, name)))
        for name in ("attempt", "found"):
            number = getattr(record, name)
            if number is not None:
                out.append(f',"{name}":{int(number)}')
        out.append(',"at":' + _escape(record.at) + "}")
    else:
        fields = _FLAT.get(type(record))
        if fields is None:
            raise InvalidRecordError(f"{type(record).__name__} is not a wire record")
        _encode_flat(record, fields, out)


def encode(record: Record) -> str:
    """Encode a record as one canonical JSON line, without the newline.

    Raises:
        InvalidRecordError: the record holds something JSON cannot carry (a
            NaN, a non-string key, a lone surrogate, nesting too deep...).
    """
    out: list[str] = []
    _encode_record(record, out)
    return _utf8_only("".join(out))


def _utf8_only(text: str) -> str:
    found = None if text.isascii() else SURROGATE.search(text)  # surrogates are not ASCII
    if found is not None:
        raise InvalidRecordError(f"lone surrogate {found.group()!r} cannot be written as UTF-8")
    return text


def encode_string(text: str) -> str:
    """The canonical JSON spelling of a string, quotes included."""
    return _escape(text)


def encode_value(value: Any) -> str:
    """The canonical JSON of any JSON value, as `encode` spells it inside a record.

    Raises:
        InvalidRecordError: as for `encode`.
    """
    out: list[str] = []
    _encode_value(value, out, 1, "")
    return _utf8_only("".join(out))


def encode_line(record: Record) -> bytes:
    """The record's canonical line as UTF-8 bytes, ending in a single ``\\n``."""
    return (encode(record) + "\n").encode("utf-8")
