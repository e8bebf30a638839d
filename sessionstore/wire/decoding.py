"""Decoding: lines to records, as strictly as serde_json (see `sessionstore.wire`)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any, TypeVar, get_args

from pydantic import BaseModel, ValidationError

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
from sessionstore.wire.encoding import Record
from sessionstore.wire.jsontext import SPACE, SkipError, lone_surrogate_escape, nesting, skip_value
from sessionstore.wire.limits import I64_MIN, MAX_DEPTH, SURROGATE, U64_MAX, refuse_long

__all__ = ["decode_entry", "decode_journal_line", "decode_message", "decode_meta", "line_key"]

_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_BOM = "\ufeff"

_M = TypeVar("_M", bound=BaseModel)
_Data = str | bytes | bytearray | memoryview


class _NumberError(ValueError):
    pass


def _parse_int(text: str) -> int | float:
    if text == "-0":
        return -0.0  # serde_json reads -0 as a float
    if len(text) < 19:
        return int(text)
    value = int(text) if len(text) <= 40 else None
    if value is not None and I64_MIN <= value <= U64_MAX:
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
_KINDS = {list: "an array", str: "a string", type(None): "null", bool: "a boolean"}


def _text_of(data: _Data) -> str:
    """The record's text: valid UTF-8 (for bytes), no surrogate, no byte-order mark."""
    if isinstance(data, str):
        text = data
        bad = SURROGATE.search(text)
        if bad is not None:
            raise InvalidRecordError(f"lone surrogate at character {bad.start()}")
    else:
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidRecordError(f"invalid UTF-8 at byte {exc.start}") from None
    if text.startswith(_BOM):
        raise InvalidRecordError("byte-order mark at the start of the record")
    return text


def _refuse_text(text: str) -> None:
    """Refuse what serde refuses anywhere in a value, even one a repeated key replaces."""
    # Read on the text, not a parsed value: they see every value, and deeper
    # than serde's limit is refused before Python's parser would recurse.
    if text.count("[") + text.count("{") > MAX_DEPTH and nesting(text) > MAX_DEPTH:
        raise InvalidRecordError(f"nested deeper than {MAX_DEPTH} levels")
    if _SURROGATE_ESCAPE.search(text):
        at = lone_surrogate_escape(text)
        if at is not None:
            raise InvalidRecordError(f"lone surrogate escape at character {at}")


def _parse_json(text: str) -> tuple[Any, _Repeats]:
    """Parse JSON text strictly; also report which objects repeated keys."""
    _refuse_text(text)
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
    except RecursionError:  # not reached: _refuse_text bounds the depth; a deep caller, then
        raise InvalidRecordError(f"nested deeper than {MAX_DEPTH} levels") from None
    return value, repeats


_SCALAR = json.JSONDecoder(
    parse_int=_parse_int, parse_float=_parse_float, parse_constant=_refuse_constant
)


def _lenient_header(text: str) -> dict[str, Any]:
    """A header's known fields, read as serde reads them; refused as serde refuses.

    serde reads the known fields and every key strictly, and only skips the
    other values (``ignore_value``): any depth, number or escape passes.
    """
    known = _REFERENCE_HEADER
    fields: dict[str, Any] = {}

    def space(at: int) -> int:
        return SPACE.match(text, at).end()  # type: ignore[union-attr]

    def expect(char: str, at: int) -> int:
        if text[at : at + 1] != char:
            raise InvalidRecordError(f"invalid JSON at character {at}: expected {char!r}")
        return space(at + 1)

    try:
        at = expect("{", space(0))
        more = text[at : at + 1] != "}"
        while more:
            if text[at : at + 1] != '"':
                raise InvalidRecordError(f"invalid JSON at character {at}: expected a key")
            key, at = _SCALAR.raw_decode(text, at)
            if SURROGATE.search(key):
                raise InvalidRecordError(f"{key!r}: lone surrogate escape")
            at = expect(":", space(at))
            if key not in known:
                at = skip_value(text, at)
            elif key in fields:
                raise InvalidRecordError(f"{key}: repeated field")
            elif text[at : at + 1] in ("[", "{"):
                raise InvalidRecordError(f"{key}: expected a scalar")  # as serde: a type error
            else:
                value, at = _SCALAR.raw_decode(text, at)
                if isinstance(value, str) and SURROGATE.search(value):
                    raise InvalidRecordError(f"{key}: lone surrogate escape")
                fields[key] = value
            at = space(at)
            more = text[at : at + 1] == ","
            if more:
                at = space(at + 1)
        at = expect("}", at)
    except (json.JSONDecodeError, SkipError, _NumberError) as exc:
        raise InvalidRecordError(str(exc)) from None
    if at != len(text):
        raise InvalidRecordError(f"invalid JSON at character {at}: trailing characters")
    return fields


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


def _load_object(text: str, what: str) -> tuple[dict[str, Any], _Repeats]:
    value, repeats = _parse_json(text)
    if not isinstance(value, dict):
        raise InvalidRecordError(
            f"invalid {what}: expected a JSON object, got {_KINDS.get(type(value), 'a number')}"
        )
    return value, repeats


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
    _refuse_repeats(obj, repeats, _FIELDS[model], "")
    return model


def _known(obj: dict[str, Any], model: type[BaseModel]) -> dict[str, Any]:
    """The fields of ``obj`` the model has: serde ignores the others."""
    fields = _FIELDS[model]
    if obj.keys() <= fields:
        return obj
    return {key: value for key, value in obj.items() if key in fields}


# The header fields the reference implementation reads.
_REFERENCE_HEADER = frozenset({"id", "version", "parent_session", "created_at"})

# Each record's field names, read once: pydantic's model_fields is a slow
# class property.
_FIELDS: dict[type[BaseModel], frozenset[str]] = {
    model: frozenset(model.model_fields) for model in get_args(Record)
}

_ENTRIES: dict[str, type[MessageEntry | CompactionEntry]] = {
    "message": MessageEntry,
    "compaction": CompactionEntry,
}
_JOURNAL_LINES: dict[str, type[SessionHeader | PostWrite | CommentWrite]] = {
    "session": SessionHeader,
    "post": PostWrite,
    "comment": CommentWrite,
}


def decode_meta(data: _Data) -> SessionMeta:
    """Decode a session header.

    Raises:
        InvalidRecordError: not a valid header (or longer than `MAX_LINE`);
            the message says why and where.
    """
    refuse_long(data, "session header")
    text = _text_of(data)
    try:
        obj, repeats = _load_object(text, "session header")
        _refuse_repeats(obj, repeats, _REFERENCE_HEADER, "")
    except InvalidRecordError as strict:
        # serde skips a header's unknown fields without reading them as
        # values: deeper than its limit, 1e400 and \ud800 pass there.
        try:
            obj = _lenient_header(text)
        except InvalidRecordError:
            raise strict from None
        return _validate(SessionMeta, _known(obj, SessionMeta), "session header")
    fields = _known(obj, SessionMeta)
    if fields.keys() <= _REFERENCE_HEADER:
        return _validate(SessionMeta, fields, "session header")
    # This project's fields are unknown to the reference, which skips them:
    # one repeated, or not of its type, is skipped here too (its line is
    # kept as it is), where refusing it would refuse a file serde reads.
    found = repeats.get(id(obj))
    repeated = found[1] if found is not None else ()
    kept = {key: value for key, value in fields.items() if key in _REFERENCE_HEADER}
    for key in fields.keys() - _REFERENCE_HEADER:
        if key not in repeated and _fits(key, fields[key]):
            kept[key] = fields[key]
    return _validate(SessionMeta, kept, "session header")


def _fits(key: str, value: Any) -> bool:
    """Whether a header field of this project's holds a value of its type."""
    try:
        SessionMeta.model_validate({"id": "", key: value})
    except ValidationError:
        return False
    return True


def decode_entry(data: _Data) -> MessageEntry | CompactionEntry:
    """Decode a session entry (tagged by ``type``).

    Raises:
        InvalidRecordError: not a valid entry (or longer than `MAX_LINE`);
            the message says why and where.
    """
    refuse_long(data, "session entry")
    obj, repeats = _load_object(_text_of(data), "session entry")
    model = _variant(obj, repeats, "type", _ENTRIES, "session entry")
    nested = obj.get("message")
    if model is MessageEntry and isinstance(nested, dict):
        _refuse_repeats(nested, repeats, _FIELDS[Message], "message.")
    return _validate(model, _known(obj, model), "session entry")


def decode_journal_line(data: _Data) -> SessionHeader | PostWrite | CommentWrite:
    """Decode a journal line (tagged by ``line``).

    Raises:
        InvalidRecordError: not a valid journal line; the message says why.
    """
    obj, repeats = _load_object(_text_of(data), "journal line")
    model = _variant(obj, repeats, "line", _JOURNAL_LINES, "journal line")
    return _validate(model, _known(obj, model), "journal line")


def decode_value(data: _Data) -> Any:
    """Decode any JSON value, as strictly as a line (an effect's result an
    operator gives: ``sessionstore journal --settle KEY done --result JSON``).

    Raises:
        InvalidRecordError: not JSON; the message says where.
    """
    value, _ = _parse_json(_text_of(data))
    return value


def _record_decoder(model: type[_M], what: str, *, extra: bool = False) -> Callable[[_Data], _M]:
    """A decoder of one untagged record; ``extra``: it keeps unknown fields."""

    def decode(data: _Data) -> _M:
        obj, repeats = _load_object(_text_of(data), what)
        _refuse_repeats(obj, repeats, _FIELDS[model], "")
        return _validate(model, obj if extra else _known(obj, model), what)

    decode.__doc__ = f"""Decode a {what} line.

    Raises:
        InvalidRecordError: not a valid {what}; the message says why and where.
    """
    return decode


decode_anchor = _record_decoder(Anchor, "anchor")  # an anchors file's line
decode_archived_key = _record_decoder(ArchivedKey, "archived key")  # an archive's keys.jsonl
decode_effect = _record_decoder(Effect, "effect")  # a journal's effects
decode_erasure = _record_decoder(Erasure, "erasure")  # a JSONL store's erasure log
decode_head_move = _record_decoder(HeadMove, "head move")  # a JSONL store's head file
decode_message = _record_decoder(Message, "message", extra=True)  # a chat message
decode_title_change = _record_decoder(TitleChange, "title change")  # its title file


def line_key(line: bytes | bytearray | memoryview) -> str | None:
    """The key a journal line is indexed under: its top-level ``"key"``, a string.

    Args:
        line: one journal line, without its newline.

    Returns:
        The key; None when the line is not one valid JSON object (as the
        strict decoder reads it), has no top-level ``"key"``, has it more
        than once, or holds another value than a string there.
    """
    # Read as the strict decoder reads it, so the index never disagrees with
    # a record decoded from the line. Without ``"key"`` nor a ``\\u`` escape
    # (the name's only other spelling), the line has no key: no parse.
    data = bytes(line)
    if b'"key"' not in data and b"\\u" not in data:
        return None
    try:
        value, repeats = _parse_json(_text_of(data))
    except InvalidRecordError:
        return None
    if not isinstance(value, dict):
        return None
    repeated = repeats.get(id(value))
    if repeated is not None and "key" in repeated[1]:
        return None
    key = value.get("key")
    return key if isinstance(key, str) else None
