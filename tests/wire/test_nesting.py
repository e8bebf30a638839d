"""Nesting at any depth: every refusal is an InvalidRecordError (SPEC section 1).

Python's json recurses once per level and raises RecursionError near a
thousand levels; serde_json refuses a 128th level, except in a session
header's unknown fields, which it skips at any depth.
"""

from collections.abc import Callable

import pytest

from sessionstore import (
    CorruptSessionError,
    InvalidRecordError,
    Journal,
    Message,
    MessageEntry,
    decode_entry,
    decode_journal_line,
    decode_message,
    decode_meta,
    encode,
    encode_line,
)
from sessionstore.backends.records import decode_stored_entry
from sessionstore.testing.journal_contract import post
from sessionstore.wire.stored import read_stored_entry, read_stored_meta, trusted_entry

DEPTHS = [128, 600, 1_000, 10_000, 100_000]


def arrays(depth: int) -> str:
    return "[" * depth + "]" * depth


def entry_with(value: str) -> str:
    head = '{"type":"message","id":"e","timestamp":"t","message":{"role":"r","content":'
    return head + value + "}}"


def refuses(decode: Callable[[str | bytes], object], line: str) -> None:
    for data in (line, line.encode()):
        with pytest.raises(InvalidRecordError, match="nested deeper than 127"):
            decode(data)


@pytest.mark.parametrize("depth", DEPTHS)
def test_the_issue_example_is_refused_by_decode_message(depth: int) -> None:
    refuses(decode_message, '{"role":"","content":' + arrays(depth) + "}")


@pytest.mark.parametrize("depth", DEPTHS)
def test_deep_content_extra_or_unknown_field_is_refused_by_every_strict_decoder(depth: int) -> None:
    refuses(decode_entry, entry_with(arrays(depth)))
    refuses(decode_entry, entry_with('"x","name":' + arrays(depth)))
    refuses(decode_entry, entry_with('"x"},"future":' + arrays(depth)).removesuffix("}"))
    refuses(decode_message, '{"role":"r","content":1,"name":' + arrays(depth) + "}")
    refuses(decode_journal_line, '{"line":"post","future":' + arrays(depth) + "}")


@pytest.mark.parametrize("depth", DEPTHS)
def test_the_stored_line_readers_refuse_deep_lines(depth: int) -> None:
    line = entry_with(arrays(depth))
    for data in (line, line.encode()):
        with pytest.raises(InvalidRecordError, match="nested deeper"):
            read_stored_entry(data)
        with pytest.raises(CorruptSessionError, match="nested deeper"):
            decode_stored_entry("s", data, path=None, line_no=2)
        assert trusted_entry(data) is None


@pytest.mark.parametrize("depth", DEPTHS)
def test_journal_parse_skips_a_deep_line_like_any_other(depth: int) -> None:
    p = post(1)
    deep = b'{"line":"post","at":"2026-10-13T11:00:00Z","x":' + arrays(depth).encode() + b"}"
    journal = Journal.parse(deep + b"\n" + encode_line(p) + b"[" * depth + b"\n")
    assert journal.skipped == [1, 3]
    assert journal.writes() == 1


@pytest.mark.parametrize("depth", DEPTHS)
def test_a_header_skips_its_unknown_fields_at_any_depth_as_serde_does(depth: int) -> None:
    line = '{"id":"s","x":' + arrays(depth) + ',"created_at":"c"}'
    for data in (line, line.encode()):
        assert decode_meta(data).created_at == "c"
        assert read_stored_meta(data).created_at == "c"


@pytest.mark.parametrize("depth", DEPTHS)
def test_a_header_known_field_holding_a_deep_value_is_refused(depth: int) -> None:
    with pytest.raises(InvalidRecordError):
        decode_meta('{"id":' + arrays(depth) + "}")
    with pytest.raises(InvalidRecordError):
        decode_meta('{"id":"s","x":' + "[" * depth + "}")  # unclosed: not JSON at all


def test_exactly_127_levels_are_kept() -> None:
    entry = decode_entry(entry_with(arrays(125)))  # entry + message + 125 arrays
    assert isinstance(entry, MessageEntry)
    assert encode(entry) == entry_with(arrays(125))
    assert read_stored_entry(entry_with(arrays(125))) == entry


@pytest.mark.parametrize("depth", [128, 1_000, 10_000, 100_000])
def test_encoding_a_deep_python_value_is_refused(depth: int) -> None:
    value: object = 0
    for _ in range(depth):
        value = [value]
    with pytest.raises(InvalidRecordError, match="nested deeper than 127"):
        encode(Message(role="r", content=value))
    with pytest.raises(InvalidRecordError, match="nested deeper than 127"):
        encode(Message(role="r", content="", name={"x": value}))


def test_encoding_a_value_that_contains_itself_is_refused() -> None:
    loop: list[object] = []
    loop.append(loop)
    with pytest.raises(InvalidRecordError, match="nested deeper than 127"):
        encode(Message(role="r", content=loop))
