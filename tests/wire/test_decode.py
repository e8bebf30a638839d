"""Strict decoding: what serde accepts, and nothing it refuses (SPEC section 1)."""

import uuid
from datetime import UTC, datetime

import pytest

from sessionstore import (
    CommentWrite,
    CompactionEntry,
    InvalidRecordError,
    MessageEntry,
    PostWrite,
    SessionHeader,
    Timestamp,
    decode_entry,
    decode_journal_line,
    decode_message,
    decode_meta,
    encode,
)
from sessionstore.wire import encode_string

ENTRY = '{"type":"message","id":"e1","timestamp":"t","message":{"role":"user","content":"hi"}}'
POST_ID = "3425d7c5-0000-4000-8000-000000000000"


def refused(decode: object, data: str | bytes, match: str) -> None:
    with pytest.raises(InvalidRecordError, match=match):
        decode(data)  # type: ignore[operator]


# ---------------------------------------------------------------- invalid JSON


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ('{"id":"s","version":NaN}', "NaN is not a JSON number"),
        ('{"id":"s","version":Infinity}', "Infinity"),
        ('{"id":"s","version":-Infinity}', "Infinity"),
        ('{"id":1e400}', "out of range"),
        ('{"id":"s","version":-1e400}', "out of range"),
        ('{"id":"s","version":' + "9" * 400 + "}", "out of range"),
        ('{"id":"s\\ud800"}', "lone surrogate"),
        ('{"id":"s","created_at":"\\udc00"}', "lone surrogate"),
        ('{"id":"s","\\ud800":1}', "lone surrogate"),
        ('{"id":"s\x01"}', "invalid JSON at line 1, column 9: Invalid control"),
        ('{"id":"s\n"}', "invalid JSON"),
        ("\ufeff" + '{"id":"s"}', "byte-order mark"),
        ('{"id":"s"} x', "invalid JSON at line 1, column 12"),
        ('{"id":"s"}{}', "invalid JSON"),
        ('[{"id":"s"}]', "expected a JSON object, got an array"),
        ('"s"', "got a string"),
        ("null", "got null"),
        ("12", "got a number"),
        ("", "invalid JSON"),
        ('{"id":"s",}', "invalid JSON"),
        ("{'id':'s'}", "invalid JSON"),
        ('{"id":"s","x":01}', "invalid JSON"),
        ('{"id":"s","x":.5}', "invalid JSON"),
        ('{"id":"s","x":1.}', "invalid JSON"),
        ('{"id":"s","x":"\\x"}', "invalid JSON"),
        ('{"id":"s"', "invalid JSON"),
    ],
)
def test_invalid_json_is_refused_with_what_and_where(data: str, match: str) -> None:
    refused(decode_meta, data, match)


@pytest.mark.parametrize(
    ("value", "match"),
    [
        ("1e400", "out of range"),
        ("-1e400", "out of range"),
        ("9" * 400, "out of range"),
        ("NaN", "NaN"),
        ('"\\udc00"', "lone surrogate"),
        ('"\\ud800x"', "lone surrogate"),
        ('"\\ud800\\u0041"', "lone surrogate"),
        ('"\\ud800\\ud800\\udc00"', "lone surrogate"),
        ('{"\\ud800":1}', "lone surrogate"),
        ('["\\\\", "\\udfff"]', "lone surrogate"),
    ],
)
def test_invalid_json_anywhere_in_a_message_is_refused(value: str, match: str) -> None:
    # A message keeps its content and extra fields, an entry reads even
    # the fields it ignores: serde reads every value of them as JSON.
    refused(decode_message, '{"role":"r","content":' + value + "}", match)
    refused(decode_message, '{"role":"r","content":1,"name":' + value + "}", match)
    refused(decode_entry, ENTRY[:-1] + ',"future":' + value + "}", match)
    refused(decode_journal_line, '{"line":"post","future":' + value + "}", match)


@pytest.mark.parametrize(
    "number", ["18446744073709551616.", "-123456789012345678901.", "123456789012345678901.e5"]
)
def test_a_point_without_a_digit_after_it_is_refused_after_any_integer(number: str) -> None:
    # JSON wants a digit after the point; serde_json takes an integer part
    # beyond u64 followed by one as a float (docs/wire-format.md).
    refused(decode_message, '{"role":"r","content":' + number + "}", "invalid JSON")
    refused(decode_entry, ENTRY[:-1] + ',"future":' + number + "}", "invalid JSON")
    refused(decode_meta, '{"id":"s","x":' + number + "}", "invalid JSON")


def test_a_repeated_key_does_not_hide_an_invalid_value_it_replaces() -> None:
    # serde reads each value before the last one wins.
    why = "surrogate|out of range|nested deeper"
    for earlier in ['"\\ud800"', '["\\udc00"]', "1e400", "[" * 127 + "]" * 127]:
        refused(decode_message, '{"role":"","content":0,"x":' + earlier + ',"x":0}', why)
        refused(decode_message, '{"role":"","content":{"x":' + earlier + ',"x":0}}', why)
        refused(decode_entry, ENTRY[:-1] + ',"x":' + earlier + ',"x":0}', why)
    assert decode_message('{"role":"","content":0,"x":"\\ud83d\\ude00","x":0}').extra == {"x": 0}


@pytest.mark.parametrize(
    "value",
    [
        "1e400",
        "-1e400",
        "9" * 400,
        '"\\ud800"',
        '["\\udc00"]',
        '{"\\ud800":1e999}',
        "[" * 200 + "]" * 200,
    ],
)
def test_a_header_skips_its_unknown_fields_unread_as_serde_does(value: str) -> None:
    # serde_json's ignore_value checks only JSON's grammar there (SPEC section 1).
    meta = decode_meta('{"id":"a","x":' + value + ',"version":2}')
    assert (meta.id, meta.version) == ("a", 2)
    assert decode_meta('{"id":"a","x":' + value + ',"x":0}').id == "a"


@pytest.mark.parametrize(
    "line",
    [
        '{"id":"a","x":NaN}',
        '{"id":"a","x":[1,]}',
        '{"id":"a","x":{"k" 1}}',
        '{"id":"a","x":"\x01"}',
        '{"id":"a","x":"\\x"}',
        '{"id":"a","x":01}',
        '{"id":"a","x":[1e400}',
        '{"id":"a","\\ud800":1}',
        '{"id":"a","x":1,}',
        '{"id":"a","x":1} x',
        '{"id":"a","id":"b","x":1e400}',
        '{"id":[1],"x":1e400}',
        '{"id":"\\udc00","x":1e400}',
        '{"id":"a","version":1e400,"x":1e400}',
    ],
)
def test_a_header_unknown_field_must_still_be_json(line: str) -> None:
    with pytest.raises(InvalidRecordError):
        decode_meta(line)


def test_raw_lone_surrogate_in_str_input_is_refused() -> None:
    refused(decode_meta, '{"id":"\ud800"}', "lone surrogate at character 7")


def test_surrogate_pair_escape_is_one_character() -> None:
    assert decode_meta('{"id":"\\ud83d\\ude00"}').id == "😀"


def test_escaped_backslash_before_u_is_not_a_surrogate() -> None:
    assert decode_meta('{"id":"\\\\ud800"}').id == "\\ud800"


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (b'{"id":"\xff"}', "invalid UTF-8 at byte 7"),
        (b'{"id":"\xc3"}', "invalid UTF-8 at byte 7"),
        (b'{"id":"\xed\xa0\x80"}', "invalid UTF-8"),  # an encoded surrogate
        (b'\xef\xbb\xbf{"id":"s"}', "byte-order mark"),
        ('{"id":"s"}'.encode("utf-16"), "invalid UTF-8|byte-order"),
    ],
)
def test_bytes_must_be_strict_utf8_without_bom(data: bytes, match: str) -> None:
    refused(decode_meta, data, match)


def test_bytes_and_str_decode_alike() -> None:
    assert decode_entry(ENTRY.encode()) == decode_entry(ENTRY)
    assert decode_entry(bytearray(ENTRY.encode())) == decode_entry(memoryview(ENTRY.encode()))


def test_surrounding_json_whitespace_is_accepted() -> None:
    assert decode_meta(' \t{"id" : "s"}\r\n ').id == "s"


def test_nesting_beyond_serde_limit_is_refused() -> None:
    def content(arrays: int) -> str:
        return ENTRY.replace('"hi"', "[" * arrays + "]" * arrays)

    assert decode_entry(content(125)).type == "message"  # 127 containers in all
    refused(decode_entry, content(126), "nested deeper than 127")
    refused(decode_entry, content(5000), "nested deeper than 127")


# ---------------------------------------------------------------- numbers


def number(text: str) -> object:
    return decode_message('{"role":"r","content":' + text + "}").content


def test_integers_within_i64_to_u64_stay_integers() -> None:
    assert number("18446744073709551615") == 2**64 - 1
    assert number("-9223372036854775808") == -(2**63)
    assert type(number("7")) is int


def test_integers_outside_i64_to_u64_read_as_floats_like_serde() -> None:
    big = number("18446744073709551616")
    assert type(big) is float
    assert big == 2.0**64
    assert type(number("-9223372036854775809")) is float


def test_minus_zero_reads_as_float_like_serde() -> None:
    value = number("-0")
    assert type(value) is float
    assert str(value) == "-0.0"
    assert encode(decode_message('{"role":"r","content":-0}')) == '{"role":"r","content":-0.0}'


def test_exponent_forms_read_as_floats() -> None:
    assert number("1E2") == 100.0
    assert type(number("1e2")) is float


# ---------------------------------------------------------------- fields


@pytest.mark.parametrize(
    ("decode", "data", "match"),
    [
        (decode_meta, '{"id":"a","id":"b"}', "id: repeated field"),
        (decode_meta, '{"id":"a","version":1,"version":1}', "version: repeated field"),
        (decode_entry, ENTRY[:-1] + ',"type":"message"}', "type: repeated field"),
        (decode_entry, ENTRY[:-1] + ',"id":"e2"}', "id: repeated field"),
        (decode_entry, ENTRY.replace('"hi"', '"hi","role":"x"'), "message.role: repeated"),
        (decode_entry, ENTRY.replace('"hi"', '"hi","content":1'), "message.content: repeated"),
        (
            decode_message,
            '{"role":"r","content":1,"streaming":false,"streaming":true}',
            "streaming",
        ),
        (decode_journal_line, '{"line":"post","line":"post","at":"2026-01-01T00:00:00Z"}', "line"),
    ],
)
def test_repeated_known_field_or_tag_is_refused(decode: object, data: str, match: str) -> None:
    refused(decode, data, match)


def test_repeated_extra_message_field_keeps_first_position_with_last_value() -> None:
    message = decode_message('{"role":"r","name":"a","content":1,"x":0,"name":"b"}')
    assert message.extra == {"name": "b", "x": 0}
    assert list(message.extra) == ["name", "x"]
    assert encode(message) == '{"role":"r","content":1,"name":"b","x":0}'


def test_repeated_key_inside_content_keeps_first_position_with_last_value() -> None:
    message = decode_message('{"role":"r","content":{"a":1,"b":2,"a":3}}')
    assert message.content == {"a": 3, "b": 2}
    assert list(message.content) == ["a", "b"]


def test_repeated_unknown_field_is_ignored_like_any_unknown_field() -> None:
    assert decode_meta('{"id":"s","future":1,"future":2}').id == "s"


def test_tag_may_stand_anywhere_in_the_object() -> None:
    last = '{"id":"e1","timestamp":"t","message":{"role":"user","content":"hi"},"type":"message"}'
    middle = '{"id":"e1","type":"message","timestamp":"t","message":{"role":"user","content":"hi"}}'
    assert decode_entry(last) == decode_entry(middle) == decode_entry(ENTRY)
    assert encode(decode_entry(last)) == ENTRY


def test_any_key_order_decodes_to_the_same_record() -> None:
    shuffled = '{"first_kept_id":"e","summary":"s","timestamp":"t","id":"c","type":"compaction"}'
    assert encode(decode_entry(shuffled)) == (
        '{"type":"compaction","id":"c","timestamp":"t","summary":"s","first_kept_id":"e"}'
    )


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ('{"id":"e1","timestamp":"t","message":{"role":"r","content":1}}', "missing field 'type'"),
        ('{"type":"vote","id":"e1"}', "unknown type 'vote'"),
        ('{"type":1,"id":"e1"}', "type: expected a string"),
        (
            '{"type":"message","timestamp":"t","message":{"role":"r","content":1}}',
            "id: Field required",
        ),
        ('{"type":"message","id":"e","timestamp":"t","message":{"content":1}}', "message.role"),
        ('{"type":"message","id":"e","timestamp":"t","message":{"role":"r"}}', "message.content"),
        ('{"type":"message","id":"e","timestamp":"t","message":"hi"}', "message"),
        ('{"type":"compaction","id":"c","timestamp":"t","summary":"s"}', "first_kept_id"),
    ],
)
def test_missing_or_unknown_entry_parts_are_refused(data: str, match: str) -> None:
    refused(decode_entry, data, match)


def test_defaults_apply_when_missing_but_null_is_refused() -> None:
    assert decode_meta('{"id":"s"}').version == 1
    refused(decode_meta, '{"id":"s","version":null}', "version")
    refused(decode_meta, '{"id":"s","created_at":null}', "created_at")
    refused(decode_meta, '{"id":null}', "id")
    refused(decode_message, '{"role":"r","content":1,"streaming":null}', "streaming")


def test_optional_fields_accept_null_as_absent() -> None:
    assert decode_meta('{"id":"s","parent_session":null}').parent_session is None
    entry = decode_entry(ENTRY[:-1] + ',"parent_id":null}')
    assert entry.parent_id is None
    assert encode(entry) == ENTRY
    compaction = decode_entry(
        '{"type":"compaction","id":"c","timestamp":"t","summary":"s","first_kept_id":"e",'
        '"tokens_before":null}'
    )
    assert isinstance(compaction, CompactionEntry)
    assert compaction.tokens_before is None


def test_content_may_be_null_but_not_missing() -> None:
    assert decode_message('{"role":"r","content":null}').content is None


@pytest.mark.parametrize("version", ["1.0", '"5"', "-1", "true", "4294967296", "1e0", "-0"])
def test_lax_coercions_to_u32_are_refused(version: str) -> None:
    refused(decode_meta, '{"id":"s","version":' + version + "}", "version")


def test_u32_and_u64_edges() -> None:
    assert decode_meta('{"id":"s","version":4294967295}').version == 2**32 - 1
    base = '{"type":"compaction","id":"c","timestamp":"t","summary":"s","first_kept_id":"e"'
    entry = decode_entry(base + ',"tokens_before":18446744073709551615}')
    assert isinstance(entry, CompactionEntry)
    assert entry.tokens_before == 2**64 - 1
    refused(decode_entry, base + ',"tokens_before":18446744073709551616}', "tokens_before")
    refused(decode_entry, base + ',"tokens_before":-1}', "tokens_before")


@pytest.mark.parametrize("value", ["1", "true", "null", "[]", '{"a":1}'])
def test_string_fields_take_only_strings(value: str) -> None:
    refused(decode_meta, '{"id":' + value + "}", "id")
    refused(decode_entry, ENTRY.replace('"t"', value), "timestamp")


def test_streaming_must_be_a_boolean() -> None:
    refused(decode_message, '{"role":"r","content":1,"streaming":1}', "streaming")
    refused(decode_message, '{"role":"r","content":1,"streaming":"true"}', "streaming")
    assert decode_message('{"role":"r","content":1,"streaming":true}').streaming is True


def test_session_timestamps_are_plain_strings_never_parsed() -> None:
    entry = decode_entry(ENTRY.replace('"t"', '"not a date at all"'))
    assert isinstance(entry, MessageEntry)
    assert entry.timestamp == "not a date at all"


# ---------------------------------------------------------------- journal lines


def post_at(at: str) -> str:
    return '{"line":"post","at":' + encode_string(at) + ',"id":"' + POST_ID + '"}'


def journal_at(at: str) -> str:
    line = decode_journal_line(post_at(at))
    assert isinstance(line, PostWrite)
    return str(line.at)


@pytest.mark.parametrize(
    ("given", "written"),
    [
        ("2026-10-13T11:00:00Z", "2026-10-13T11:00:00Z"),
        ("2026-10-13T11:00:00.1Z", "2026-10-13T11:00:00.100Z"),
        ("2026-10-13T11:00:00.12Z", "2026-10-13T11:00:00.120Z"),
        ("2026-10-13T11:00:00.123Z", "2026-10-13T11:00:00.123Z"),
        ("2026-10-13T11:00:00.1234Z", "2026-10-13T11:00:00.123400Z"),
        ("2026-10-13T11:00:00.12345Z", "2026-10-13T11:00:00.123450Z"),
        ("2026-10-13T11:00:00.123456Z", "2026-10-13T11:00:00.123456Z"),
        ("2026-10-13T11:00:00.1234567Z", "2026-10-13T11:00:00.123456700Z"),
        ("2026-10-13T11:00:00.12345678Z", "2026-10-13T11:00:00.123456780Z"),
        ("2026-10-13T11:00:00.123456789Z", "2026-10-13T11:00:00.123456789Z"),
        ("2026-10-13T11:00:00.1234567891Z", "2026-10-13T11:00:00.123456789Z"),
        ("2026-10-13T11:00:00.000Z", "2026-10-13T11:00:00Z"),
        ("2026-10-13T11:00:00.000001Z", "2026-10-13T11:00:00.000001Z"),
        ("2026-10-13T11:00:00z", "2026-10-13T11:00:00Z"),
        ("2026-10-13 11:00:00Z", "2026-10-13T11:00:00Z"),
        ("2026-10-13T13:30:00+02:30", "2026-10-13T11:00:00Z"),
        ("2026-10-13T06:00:00-05:00", "2026-10-13T11:00:00Z"),
        ("2026-10-13T11:00:00+00:00", "2026-10-13T11:00:00Z"),
        ("2026-10-13T11:00:00-00:00", "2026-10-13T11:00:00Z"),
        ("2026-10-14T00:30:00+13:30", "2026-10-13T11:00:00Z"),
        ("2026-12-31T23:30:00-01:00", "2027-01-01T00:30:00Z"),
        ("0099-01-01T00:00:00Z", "0099-01-01T00:00:00Z"),
    ],
)
def test_journal_timestamps_are_written_in_utc_with_0_3_6_or_9_digits(
    given: str, written: str
) -> None:
    assert journal_at(given) == written


@pytest.mark.parametrize(
    ("given", "written"),
    [
        # A leap second, at any minute and offset, stays one in UTC.
        ("2016-12-31T23:59:60Z", "2016-12-31T23:59:60Z"),
        ("2026-10-13T12:34:60.5+02:00", "2026-10-13T10:34:60.500Z"),
        ("2026-10-13T00:00:60-00:30", "2026-10-13T00:30:60Z"),
        # Year 0000, and offsets that move the instant out of 0001-9999.
        ("0000-01-01T00:00:00Z", "0000-01-01T00:00:00Z"),
        ("0001-01-01T00:00:00+00:01", "0000-12-31T23:59:00Z"),
        ("0000-01-01T00:00:00+00:01", "-0001-12-31T23:59:00Z"),
        ("9999-12-31T23:59:00-00:01", "+10000-01-01T00:00:00Z"),
        ("-0001-06-01T00:00:00Z", "-0001-06-01T00:00:00Z"),
        ("+12345-06-01T00:00:00Z", "+12345-06-01T00:00:00Z"),
        ("+0099-01-01T00:00:00Z", "0099-01-01T00:00:00Z"),
        ("0000-02-29T00:00:00Z", "0000-02-29T00:00:00Z"),
        # chrono's looser spellings of RFC 3339.
        ("26-1-5T1:2:3Z", "0026-01-05T01:02:03Z"),
        (" 2026 - 10 -13T 11 : 00 : 00 Z ", "2026-10-13T11:00:00Z"),
        ("2026-10-13   11:00:00Z", "2026-10-13T11:00:00Z"),
        ("2026-10-13T13:00:00+0200", "2026-10-13T11:00:00Z"),
        ("2026-10-13T13:00:00+02::: 00", "2026-10-13T11:00:00Z"),
        ("2026-10-13T11:00:00UTC", "2026-10-13T11:00:00Z"),
        ("2026-10-13T11:00:00 uTc", "2026-10-13T11:00:00Z"),
        ("2026-10-14T10:59:00+23:59", "2026-10-13T11:00:00Z"),
        ("2026-10-13T\u300011:00:00\xa0Z", "2026-10-13T11:00:00Z"),  # Unicode spaces
    ],
)
def test_journal_timestamps_are_read_as_chrono_reads_them(given: str, written: str) -> None:
    assert journal_at(given) == written


def test_a_leap_second_sorts_between_its_neighbours_and_reads_as_their_datetime() -> None:
    before, leap, after = (
        Timestamp.parse(at)
        for at in ("2016-12-31T23:59:59.999Z", "2016-12-31T23:59:60.5Z", "2017-01-01T00:00:00Z")
    )
    assert before < leap < after
    assert leap.is_leap_second
    assert leap.nanosecond == 1_500_000_000
    assert leap.to_datetime() == datetime(2016, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC)


def test_an_instant_outside_datetime_years_is_kept_but_has_no_datetime() -> None:
    year_zero = Timestamp.parse("0001-01-01T00:00:00+00:01")
    assert str(year_zero) == "0000-12-31T23:59:00Z"
    with pytest.raises(ValueError, match="outside the years"):
        year_zero.to_datetime()


@pytest.mark.parametrize(
    "at",
    [
        "2026-10-13T11:00:00",
        "2026-10-13T11:00:00.5",
        "2026-10-13",
        "2026-10-13T11:00Z",
        "2026-13-13T11:00:00Z",
        "2026-02-30T11:00:00Z",
        "2026-10-13T24:00:00Z",
        "2026-10-13T11:60:00Z",
        "2026-10-13T11:00:61Z",
        "2026-10-13T11:00:00+02:60",
        "2026-10-13T11:00:00+24:00",
        "2026-10-13T11:00:00+2:00",
        "2026-10-13T11:00:00.Z",
        "2026-10-13T11:00:00 .5Z",
        "2026-10-13X11:00:00Z",
        "2026-10-13t11:00:00Z",  # chrono takes a lowercase t only from 0.4.27 on
        "2026-10-13 t11:00:00Z",
        "2026-10-13T11:00:00UT",
        "2026-10-13T11:00:00Z x",
        "02026-10-13T11:00:00Z",
        "2026-010-13T11:00:00Z",
        "+262144-01-01T00:00:00Z",
        "-262144-01-01T00:00:00+00:01",
        "\uff12\uff10\uff12\uff16-10-13T11:00:00Z",  # fullwidth digits
        "\x1c2026-10-13T11:00:00Z",  # not whitespace to Rust
    ],
)
def test_journal_timestamps_without_offset_or_malformed_are_refused(at: str) -> None:
    refused(decode_journal_line, post_at(at), "at")


@pytest.mark.parametrize(
    "given",
    [
        "3425d7c5-0000-4000-8000-000000000000",
        "3425D7C5-0000-4000-8000-000000000000",
        "3425d7c5000040008000000000000000",
        "{3425d7c5-0000-4000-8000-000000000000}",
        "urn:uuid:3425d7c5-0000-4000-8000-000000000000",
    ],
)
def test_uuid_input_forms_are_written_hyphenated_lowercase(given: str) -> None:
    line = decode_journal_line('{"line":"post","at":"2026-10-13T11:00:00Z","id":"' + given + '"}')
    assert isinstance(line, PostWrite)
    assert line.id == uuid.UUID(POST_ID)
    assert encode(line) == ('{"line":"post","at":"2026-10-13T11:00:00Z","id":"' + POST_ID + '"}')


@pytest.mark.parametrize(
    "given",
    [
        "3425d7c5-0000-4000-8000-00000000000",
        "3425d7c50000-4000-8000-000000000000-",
        "3425d7c5-00004000-8000-000000000000",
        "{3425d7c5000040008000000000000000}",
        "urn:uuid:3425d7c5000040008000000000000000",
        "3425d7c5-0000-4000-8000-00000000000g",
        "(3425d7c5-0000-4000-8000-000000000000)",
        "",
    ],
)
def test_malformed_uuids_are_refused(given: str) -> None:
    refused(
        decode_journal_line,
        '{"line":"post","at":"2026-10-13T11:00:00Z","id":"' + given + '"}',
        "id",
    )


def test_journal_lines_follow_the_seed_wire_shape() -> None:
    comment = "4666639c-0000-4000-8000-000000000000"
    lines = [
        '{"line":"session","started_at":"2026-10-13T11:32:00Z","model":"claude-test"}',
        '{"line":"post","at":"2026-10-13T11:33:00Z","id":"' + POST_ID + '"}',
        '{"line":"comment","at":"2026-10-13T11:34:00Z","id":"'
        + comment
        + '","on":"'
        + POST_ID
        + '"}',
        '{"line":"comment","at":"2026-10-13T11:35:00Z","id":"' + comment + '"}',
    ]
    records = [decode_journal_line(line) for line in lines]
    assert [type(r) for r in records] == [SessionHeader, PostWrite, CommentWrite, CommentWrite]
    assert [encode(r) for r in records] == lines


def test_journal_line_unknown_tag_and_wrong_types_are_refused() -> None:
    refused(decode_journal_line, '{"line":"vote","at":"2026-10-13T11:00:00Z"}', "unknown line")
    refused(decode_journal_line, '{"line":"session","started_at":"2026-10-13T11:00:00Z"}', "model")
    refused(
        decode_journal_line,
        '{"line":"session","started_at":"2026-10-13T11:00:00Z","model":5}',
        "model",
    )
    refused(
        decode_journal_line,
        '{"line":"comment","at":"2026-10-13T11:00:00Z","id":"' + POST_ID + '","on":5}',
        "on",
    )
