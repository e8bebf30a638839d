"""Canonical encoding: the bytes serde_json writes (SPEC section 2)."""

import pytest

from sessionstore import (
    CommentWrite,
    CompactionEntry,
    InvalidRecordError,
    Message,
    MessageEntry,
    SessionMeta,
    encode,
    encode_line,
)
from sessionstore.wire import format_float

SHORT_ESCAPES = {"\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def content_of(value: object) -> str:
    """The encoded form of ``value`` as a message's content."""
    line = encode(Message(role="r", content=value))
    prefix, suffix = '{"role":"r","content":', "}"
    assert line.startswith(prefix)
    assert line.endswith(suffix)
    return line[len(prefix) : -len(suffix)]


@pytest.mark.parametrize("code", range(0x20))
def test_every_control_character_is_escaped_like_serde(code: int) -> None:
    char = chr(code)
    expected = SHORT_ESCAPES.get(char, f"\\u{code:04x}")
    assert content_of(char) == f'"{expected}"'


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('"', '"\\""'),
        ("\\", '"\\\\"'),
        ("/", '"/"'),
        ("\x7f", '"\x7f"'),
        ("\u2028\u2029", '"\u2028\u2029"'),
        ("Ünïcode ✓ 😀", '"Ünïcode ✓ 😀"'),
        ("\x1b", '"\\u001b"'),
    ],
)
def test_strings_are_written_raw_except_quote_backslash_and_controls(
    text: str, expected: str
) -> None:
    assert content_of(text) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1e20, "1e20"),
        (1e-7, "1e-7"),
        (1e16, "1e16"),
        (1e15, "1000000000000000.0"),
        (0.00001, "0.00001"),
        (1e-6, "1e-6"),
        (-0.0, "-0.0"),
        (0.0, "0.0"),
        (5e-324, "5e-324"),
        (1.5e300, "1.5e300"),
        (0.1, "0.1"),
        (1.0, "1.0"),
        (-2.5, "-2.5"),
        (123456.789, "123456.789"),
        (1.7976931348623157e308, "1.7976931348623157e308"),
        (2.2250738585072014e-308, "2.2250738585072014e-308"),
        (9999999999999998.0, "9999999999999998.0"),
        (1.2345e-5, "0.000012345"),
        (-1.5e-9, "-1.5e-9"),
    ],
)
def test_floats_are_written_like_ryu(value: float, expected: str) -> None:
    assert format_float(value) == expected
    assert content_of(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0, "0"),
        (-1, "-1"),
        (2**63 - 1, "9223372036854775807"),
        (-(2**63), "-9223372036854775808"),
        (2**64 - 1, "18446744073709551615"),
        (2**64, "1.8446744073709552e19"),
        (-(2**63) - 1, "-9.223372036854776e18"),
        (10**30, "1e30"),
    ],
)
def test_integers_within_i64_to_u64_are_digits_and_others_floats(value: int, expected: str) -> None:
    assert content_of(value) == expected


def test_non_finite_floats_are_refused() -> None:
    for value in (float("nan"), float("inf"), float("-inf")):
        with pytest.raises(InvalidRecordError, match="content"):
            encode(Message(role="r", content=value))


def test_integer_beyond_float_range_is_refused() -> None:
    with pytest.raises(InvalidRecordError, match="beyond the float range"):
        encode(Message(role="r", content=10**400))


def test_non_json_values_are_refused_with_their_path() -> None:
    with pytest.raises(InvalidRecordError, match=r"content\[1\]: set"):
        encode(Message(role="r", content=[1, {1, 2}]))
    with pytest.raises(InvalidRecordError, match="key 1 is not a string"):
        encode(Message(role="r", content={1: "x"}))


def test_lone_surrogate_is_refused() -> None:
    with pytest.raises(InvalidRecordError, match="surrogate"):
        encode(Message.user("\ud800"))


def test_nesting_beyond_serde_limit_is_refused() -> None:
    def nested(levels: int) -> object:
        value: object = 0
        for _ in range(levels):
            value = [value]
        return value

    # record object + message object + 125 arrays = 127 containers: serde's limit.
    encode(MessageEntry(id="e", timestamp="t", message=Message(role="r", content=nested(125))))
    with pytest.raises(InvalidRecordError, match="nested deeper"):
        encode(MessageEntry(id="e", timestamp="t", message=Message(role="r", content=nested(126))))


def test_header_fields_in_order_with_optionals_left_out() -> None:
    assert (
        encode(SessionMeta(id="s1", created_at="c")) == '{"id":"s1","version":1,"created_at":"c"}'
    )
    assert (
        encode(SessionMeta(id="s1", version=2, parent_session="p", created_at=""))
        == '{"id":"s1","version":2,"parent_session":"p","created_at":""}'
    )


def test_message_entry_fields_in_order_with_extras_after_known_ones() -> None:
    message = Message(role="assistant", content="x", streaming=True, tool_calls=[], name="n")
    entry = MessageEntry(id="e1", parent_id="e0", timestamp="t", message=message)
    assert encode(entry) == (
        '{"type":"message","id":"e1","parent_id":"e0","timestamp":"t",'
        '"message":{"role":"assistant","content":"x","streaming":true,"tool_calls":[],"name":"n"}}'
    )


def test_streaming_false_is_left_out() -> None:
    assert encode(Message(role="r", content="x", streaming=False)) == '{"role":"r","content":"x"}'


def test_compaction_fields_in_order() -> None:
    entry = CompactionEntry(id="c", timestamp="t", summary="s", first_kept_id="e", tokens_before=0)
    assert encode(entry) == (
        '{"type":"compaction","id":"c","timestamp":"t","summary":"s",'
        '"first_kept_id":"e","tokens_before":0}'
    )
    assert "tokens_before" not in encode(
        CompactionEntry(id="c", timestamp="t", summary="s", first_kept_id="e")
    )


def test_object_keys_keep_insertion_order_in_content() -> None:
    assert content_of({"b": 1, "a": {"z": None, "y": True}}) == '{"b":1,"a":{"z":null,"y":true}}'


def test_encode_line_is_utf8_with_one_newline() -> None:
    line = encode_line(Message.user("é"))
    assert line == '{"role":"user","content":"é"}\n'.encode()
    assert line.count(b"\n") == 1


def test_journal_line_uuid_and_timestamp_are_canonical() -> None:
    write = CommentWrite(
        at="2026-10-13T13:34:00.5+02:00",  # type: ignore[arg-type]
        id="{4666639C-0000-4000-8000-000000000000}",  # type: ignore[arg-type]
    )
    assert encode(write) == (
        '{"line":"comment","at":"2026-10-13T11:34:00.500Z",'
        '"id":"4666639c-0000-4000-8000-000000000000"}'
    )
