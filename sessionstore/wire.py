"""The wire codec: serde_json-identical encoding and strict decoding.

Every byte sessionstore writes goes through `encode`, and every byte it reads
is checked by one of the ``decode_*`` functions, so files and rows are
interchangeable with the Rust implementation (serde + serde_json).

Encoding (SPEC section 2) is canonical: no whitespace; UTF-8 without
``\\u`` escapes for non-ASCII; ``"`` and ``\\`` escaped; ``\\b \\f \\n \\r \\t``
as short escapes and other characters below U+0020 as ``\\u00XX`` (lowercase
hex); DEL, ``/``, U+2028 and U+2029 as themselves. Integers in i64..u64 as
digits, others as floats. Floats in the shortest form that round-trips
(ryu's, as serde_json uses): plain when 1e-5 <= |x| < 1e16 (``0.00001``,
``1.0``, ``-0.0``, ``1000000000000000.0``), otherwise ``<mantissa>e<exp>``
with no ``+`` and no padding (``1e16``, ``1e-7``, ``1.5e300``). Fields come in
the order of SPEC section 1; optional fields without a value are left out.

Decoding (SPEC section 1) is as strict as serde_json: the input must be one
JSON object in valid UTF-8, with nothing after it but whitespace. Refused:
``NaN``/``Infinity``, numbers beyond the float range (``1e400``), lone
surrogates, raw control characters in strings, a byte-order mark, invalid
UTF-8, arrays and other non-objects, nesting deeper than serde_json's limit
(127 containers), and a repeated known field or tag. Unknown fields are
ignored, the tag may stand anywhere, and among a message's extra fields (and
inside any JSON value) a repeated key keeps its first position with its last
value. As in serde_json, ``-0`` and integers outside i64..u64 read as floats.

Every refusal is an `InvalidRecordError` whose message says what is wrong
and where (the field path, or the line and column of the text).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from sessionstore.errors import InvalidRecordError
from sessionstore.models import (
    CommentWrite,
    CompactionEntry,
    Message,
    MessageEntry,
    PostWrite,
    SessionHeader,
    SessionMeta,
)

__all__ = [
    "Record",
    "decode_entry",
    "decode_journal_line",
    "decode_message",
    "decode_meta",
    "encode",
    "encode_line",
    "encode_string",
]

Record = (
    SessionMeta
    | MessageEntry
    | CompactionEntry
    | Message
    | SessionHeader
    | PostWrite
    | CommentWrite
)

_I64_MIN = -(2**63)
_U64_MAX = 2**64 - 1
# serde_json refuses to enter a 128th nested array or object.
MAX_DEPTH = 127

_escape: Callable[[str], str] = json.encoder.encode_basestring
_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_BOM = "\ufeff"

_M = TypeVar("_M", bound=BaseModel)

# ---------------------------------------------------------------- encoding


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
            raise InvalidRecordError(f"{path}: nested deeper than {MAX_DEPTH} levels")
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


def _encode_fields(items: Any, out: list[str], depth: int, path: str, *, first: bool) -> None:
    for key, item in items:
        if type(key) is not str:
            raise InvalidRecordError(f"{path}: object key {key!r} is not a string")
        out.append(_escape(key) + ":" if first else "," + _escape(key) + ":")
        first = False
        _encode_value(item, out, depth + 1, f"{path}.{key}" if path else key)


def _encode_int(value: int, path: str) -> str:
    if _I64_MIN <= value <= _U64_MAX:
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
    elif isinstance(record, CompactionEntry):
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
            + "}"
        )
    elif isinstance(record, Message):
        _encode_message(record, out, 1, "")
    elif isinstance(record, SessionHeader):
        out.append(
            f'{{"line":"session","started_at":"{record.started_at}","model":'
            + _escape(record.model)
            + "}"
        )
    elif isinstance(record, PostWrite):
        out.append(f'{{"line":"post","at":"{record.at}","id":"{record.id}"}}')
    elif isinstance(record, CommentWrite):
        on = "" if record.on is None else f',"on":"{record.on}"'
        out.append(f'{{"line":"comment","at":"{record.at}","id":"{record.id}"{on}}}')
    else:
        raise InvalidRecordError(f"{type(record).__name__} is not a wire record")


def encode(record: Record) -> str:
    """Encode a record as one canonical JSON line, without the newline.

    Raises:
        InvalidRecordError: the record holds something JSON cannot carry (a
            NaN, a non-string key, a lone surrogate, nesting too deep...).
    """
    out: list[str] = []
    _encode_record(record, out)
    text = "".join(out)
    found = _SURROGATE.search(text)
    if found is not None:
        raise InvalidRecordError(f"lone surrogate {found.group()!r} cannot be written as UTF-8")
    return text


def encode_string(text: str) -> str:
    """The canonical JSON spelling of a string, quotes included."""
    return _escape(text)


def encode_line(record: Record) -> bytes:
    """The record's canonical line as UTF-8 bytes, ending in a single ``\\n``."""
    return (encode(record) + "\n").encode("utf-8")


# ---------------------------------------------------------------- decoding


class _NumberError(ValueError):
    pass


def _parse_int(text: str) -> int | float:
    if text == "-0":
        return -0.0  # serde_json reads -0 as a float
    if len(text) < 19:
        return int(text)
    value = int(text) if len(text) <= 40 else None
    if value is not None and _I64_MIN <= value <= _U64_MAX:
        return value
    return _parse_float(text)


def _parse_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise _NumberError(f"number out of range: {text[:40]}")
    return value


def _refuse_constant(text: str) -> Any:
    raise _NumberError(f"{text} is not a JSON number")


_Repeats = dict[int, tuple[dict[str, Any], list[str]]]


def _parse_json(data: str | bytes | bytearray | memoryview) -> tuple[Any, _Repeats]:
    """Parse JSON text strictly; also report which objects repeated keys."""
    if isinstance(data, str):
        text = data
        bad = _SURROGATE.search(text)
        if bad is not None:
            raise InvalidRecordError(f"lone surrogate at character {bad.start()}")
    else:
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidRecordError(f"invalid UTF-8 at byte {exc.start}") from None
    if text.startswith(_BOM):
        raise InvalidRecordError("byte-order mark at the start of the record")

    repeats: _Repeats = {}

    def pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(pairs)
        if len(obj) != len(pairs):
            seen: set[str] = set()
            repeated = [key for key, _ in pairs if key in seen or seen.add(key)]  # type: ignore[func-returns-value]
            repeats[id(obj)] = (obj, repeated)  # the reference pins the id
        return obj

    decoder = json.JSONDecoder(
        object_pairs_hook=pairs_hook,
        parse_int=_parse_int,
        parse_float=_parse_float,
        parse_constant=_refuse_constant,
    )
    try:
        value = decoder.decode(text)
    except json.JSONDecodeError as exc:
        raise InvalidRecordError(
            f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from None
    except _NumberError as exc:
        raise InvalidRecordError(str(exc)) from None
    except RecursionError:
        raise InvalidRecordError(f"nested deeper than {MAX_DEPTH} levels") from None
    if _SURROGATE_ESCAPE.search(text):
        _refuse_lone_surrogates(value, "")
    if text.count("[") + text.count("{") > MAX_DEPTH and _depth(value) > MAX_DEPTH:
        raise InvalidRecordError(f"nested deeper than {MAX_DEPTH} levels")
    return value, repeats


def _refuse_lone_surrogates(value: Any, path: str) -> None:
    if isinstance(value, str):
        if _SURROGATE.search(value):
            raise InvalidRecordError(f"{path or 'value'}: lone surrogate escape")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _refuse_lone_surrogates(item, f"{path}[{index}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            _refuse_lone_surrogates(key, path)
            _refuse_lone_surrogates(item, f"{path}.{key}" if path else key)


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    return 0


def _refuse_repeats(obj: dict[str, Any], repeats: _Repeats, known: Any, path: str) -> None:
    found = repeats.get(id(obj))
    if found is None:
        return
    for key in found[1]:
        if key in known:
            raise InvalidRecordError(f"{path}{key}: repeated field")


def _validate(model: type[_M], obj: dict[str, Any], what: str) -> _M:
    try:
        return model.model_validate(obj)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc']) or '(record)'}: {error['msg']}"
            for error in exc.errors()
        )
        raise InvalidRecordError(f"invalid {what}: {problems}") from None


def _load_object(
    data: str | bytes | bytearray | memoryview, what: str
) -> tuple[dict[str, Any], _Repeats]:
    value, repeats = _parse_json(data)
    if not isinstance(value, dict):
        raise InvalidRecordError(f"invalid {what}: expected a JSON object, got {_json_kind(value)}")
    return value, repeats


def _json_kind(value: Any) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return "a number"


def _variant(
    obj: dict[str, Any], repeats: _Repeats, tag: str, variants: dict[str, type[_M]], what: str
) -> type[_M]:
    """The model a tagged object names, after refusing a repeated known field."""
    if tag not in obj:
        raise InvalidRecordError(f"invalid {what}: missing field '{tag}'")
    value = obj[tag]
    if not isinstance(value, str):
        raise InvalidRecordError(f"invalid {what}: {tag}: expected a string")
    model = variants.get(value)
    if model is None:
        expected = ", ".join(repr(name) for name in variants)
        raise InvalidRecordError(
            f"invalid {what}: unknown {tag} {value!r}, expected one of {expected}"
        )
    _refuse_repeats(obj, repeats, model.model_fields, "")
    return model


_ENTRIES: dict[str, type[MessageEntry | CompactionEntry]] = {
    "message": MessageEntry,
    "compaction": CompactionEntry,
}
_JOURNAL_LINES: dict[str, type[SessionHeader | PostWrite | CommentWrite]] = {
    "session": SessionHeader,
    "post": PostWrite,
    "comment": CommentWrite,
}


def decode_meta(data: str | bytes | bytearray | memoryview) -> SessionMeta:
    """Decode a session header.

    Raises:
        InvalidRecordError: not a valid header; the message says why and where.
    """
    obj, repeats = _load_object(data, "session header")
    _refuse_repeats(obj, repeats, SessionMeta.model_fields, "")
    return _validate(SessionMeta, obj, "session header")


def decode_entry(data: str | bytes | bytearray | memoryview) -> MessageEntry | CompactionEntry:
    """Decode a session entry (tagged by ``type``).

    Raises:
        InvalidRecordError: not a valid entry; the message says why and where.
    """
    obj, repeats = _load_object(data, "session entry")
    model = _variant(obj, repeats, "type", _ENTRIES, "session entry")
    nested = obj.get("message")
    if model is MessageEntry and isinstance(nested, dict):
        _refuse_repeats(nested, repeats, Message.model_fields, "message.")
    return _validate(model, obj, "session entry")


def decode_message(data: str | bytes | bytearray | memoryview) -> Message:
    """Decode a chat message.

    Raises:
        InvalidRecordError: not a valid message; the message says why and where.
    """
    obj, repeats = _load_object(data, "message")
    _refuse_repeats(obj, repeats, Message.model_fields, "")
    return _validate(Message, obj, "message")


def decode_journal_line(
    data: str | bytes | bytearray | memoryview,
) -> SessionHeader | PostWrite | CommentWrite:
    """Decode a journal line (tagged by ``line``).

    Raises:
        InvalidRecordError: not a valid journal line; the message says why.
    """
    obj, repeats = _load_object(data, "journal line")
    model = _variant(obj, repeats, "line", _JOURNAL_LINES, "journal line")
    return _validate(model, obj, "journal line")
