"""Property tests: decode(encode(r)) == r, and any valid spelling decodes alike."""

import json
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sessionstore import (
    CommentWrite,
    CompactionEntry,
    CorruptSessionError,
    InvalidRecordError,
    Message,
    MessageEntry,
    PostWrite,
    SessionHeader,
    SessionMeta,
    Timestamp,
    decode_entry,
    decode_journal_line,
    decode_meta,
    encode,
)
from sessionstore.backends.records import decode_stored_entry
from sessionstore.wire import Record, encode_string
from sessionstore.wire.stored import read_stored_meta

KNOWN_MESSAGE_FIELDS = {"role", "content", "streaming"}

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)
optional_text = st.none() | st.text()

messages = st.builds(
    lambda role, content, streaming, extra: Message(
        role=role, content=content, streaming=streaming, **extra
    ),
    st.text(),
    json_values,
    st.booleans(),
    st.dictionaries(
        st.text().filter(lambda key: key not in KNOWN_MESSAGE_FIELDS), json_values, max_size=3
    ),
)
message_entries = st.builds(
    MessageEntry, id=st.text(), parent_id=optional_text, timestamp=st.text(), message=messages
)
compaction_entries = st.builds(
    CompactionEntry,
    id=st.text(),
    parent_id=optional_text,
    timestamp=st.text(),
    summary=st.text(),
    first_kept_id=st.text(),
    tokens_before=st.none() | st.integers(min_value=0, max_value=2**64 - 1),
)
metas = st.builds(
    SessionMeta,
    id=st.text(),
    version=st.integers(min_value=0, max_value=2**32 - 1),
    parent_session=optional_text,
    created_at=st.text(),
    title=optional_text,
    owner=optional_text,
    tags=st.lists(st.text(), max_size=3).map(tuple),
    metadata=st.dictionaries(st.text(), json_values, max_size=3),
)
timestamps = st.builds(
    lambda moment, nanos: Timestamp(moment, nanos),
    st.datetimes(timezones=st.timezones()).filter(lambda d: d.utcoffset() is not None),
    st.integers(min_value=0, max_value=999_999_999),
).filter(lambda t: 1 <= t.to_datetime().year <= 9999)
uuids = st.uuids()
journal_lines = (
    st.builds(SessionHeader, started_at=timestamps, model=st.text())
    | st.builds(PostWrite, at=timestamps, id=uuids)
    | st.builds(CommentWrite, at=timestamps, id=uuids, on=st.none() | uuids)
)


def decode_any(record: Record, text: str | bytes) -> Record:
    if isinstance(record, SessionMeta):
        return decode_meta(text)
    if isinstance(record, MessageEntry | CompactionEntry):
        return decode_entry(text)
    return decode_journal_line(text)


records = metas | message_entries | compaction_entries | journal_lines


@settings(max_examples=300)
@given(records)
def test_decode_inverts_encode_and_encode_is_stable(record: Record) -> None:
    line = encode(record)
    assert "\n" not in line
    again = decode_any(record, line)
    assert again == record
    assert encode(again) == line
    assert decode_any(record, line.encode("utf-8")) == record


def reorder(value: Any, data: st.DataObject) -> Any:
    """The same JSON value with every object's keys in a drawn order."""
    if isinstance(value, dict):
        keys = data.draw(st.permutations(list(value)))
        return {key: reorder(value[key], data) for key in keys}
    if isinstance(value, list):
        return [reorder(item, data) for item in value]
    return value


@settings(max_examples=300)
@given(records, st.data())
def test_any_key_order_and_spacing_decodes_to_the_same_record(
    record: Record, data: st.DataObject
) -> None:
    value = reorder(json.loads(encode(record)), data)
    spacing = data.draw(st.sampled_from(["", " ", "\t", "\r\n  "]))
    text = json.dumps(
        value,
        ensure_ascii=data.draw(st.booleans()),
        separators=(spacing + "," + spacing, spacing + ":" + spacing),
    )
    text = spacing + text + spacing
    assert decode_any(record, text) == record


def test_uuid_strategy_round_trip_sanity() -> None:
    # A fixed case next to the generated ones, so a broken strategy cannot hide.
    write = PostWrite(at=Timestamp.parse("2026-10-13T11:00:00Z"), id=uuid.UUID(int=1))
    assert decode_journal_line(encode(write)) == write


@settings(max_examples=300)
@given(message_entries | compaction_entries, st.data())
def test_stored_lines_read_back_as_the_strict_decoder_reads_them(
    record: MessageEntry | CompactionEntry, data: st.DataObject
) -> None:
    # Imported lines keep any valid spelling; the fast reader must agree.
    value = reorder(json.loads(encode(record)), data)
    spacing = data.draw(st.sampled_from(["", " ", "\r"]))
    text = json.dumps(value, ensure_ascii=data.draw(st.booleans())) + spacing
    strict = decode_entry(text)
    for line in (text, text.encode()):
        assert decode_stored_entry("s", line, path=None, line_no=2) == strict


ENTRY_LINE = '{"type":"message","id":"e","timestamp":"t","message":{"role":"r","content":"x"}}'
COMPACTION_LINE = '{"type":"compaction","id":"c","timestamp":"t","summary":"s","first_kept_id":"e"}'


def both_readers(line: str | bytes) -> tuple[str, str]:
    """What the stored-line reader and the strict decoder make of a line, or
    their refusals, as ``repr`` (which tells 0 from -0.0 and an int from a
    float, where == does not)."""
    try:
        fast: object = decode_stored_entry("s", line, path=None, line_no=2)
    except CorruptSessionError as exc:
        fast = exc.reason
    try:
        strict: object = decode_entry(line)
    except InvalidRecordError as exc:
        strict = str(exc)
    return repr(fast), repr(strict)


@pytest.mark.parametrize(
    "content",
    [
        "-0",
        "18446744073709551616",
        "-9223372036854775809",
        "[-0, 1e400]",
        '"-0"',
        "1e-0",
        "[1, -0 ]",
        '{"a": [18446744073709551616]}',
        '"2026-01-05 x-0, y"',
        "[18446744073709551615, -9223372036854775808]",
    ],
)
def test_numbers_the_fast_reader_would_read_differently_go_to_the_strict_one(
    content: str,
) -> None:
    line = '{"type":"message","id":"e","timestamp":"t","message":{"role":"r","content":'
    line += content + "}}"
    fast, strict = both_readers(line)
    assert fast == strict


@pytest.mark.parametrize("extra", ['"n":18446744073709551616', '"n":-0', '"n":{"m":[-0]}'])
def test_extra_fields_the_fast_reader_would_read_differently_go_to_the_strict_one(
    extra: str,
) -> None:
    line = '{"type":"message","id":"e","timestamp":"t","message":{"role":"r","content":"",'
    line += extra + "}}"
    fast = decode_stored_entry("s", line, path=None, line_no=2)
    assert repr(fast) == repr(decode_entry(line))
    assert isinstance(fast, MessageEntry)
    assert type(fast.message.extra["n"]) is not int


@pytest.mark.parametrize(
    "line",
    [
        '{"type":"compaction","id":"c","timestamp":"t","summary":"s","first_kept_id":"e",'
        '"tokens_before":-0}',
        '{"type":"compaction","id":"c","timestamp":"t","summary":"s","first_kept_id":"e",'
        '"tokens_before":0}',
        '{"type":"compaction","id":"c","timestamp":"t","summary":"-0,","first_kept_id":"e"}',
        '{"type":"message","id":"e","timestamp":"t","message":{"role":"r","content":"x"},'
        '"ignored":-0}',
    ],
)
def test_typed_numbers_and_ignored_fields_read_as_the_strict_reader_reads_them(line: str) -> None:
    fast, strict = both_readers(line)
    assert fast == strict


@pytest.mark.parametrize(
    "line",
    [
        '{"id":"s","version":-0,"created_at":""}',
        '{"id":"s","version":0,"created_at":""}',
        '{"id":"s","version":1,"created_at":"-0,"}',
        '{"id":"s","version":1,"created_at":"","ignored":-0}',
    ],
)
def test_stored_headers_read_as_the_strict_reader_reads_them(line: str) -> None:
    try:
        fast: object = read_stored_meta(line)
    except InvalidRecordError as exc:
        fast = str(exc)
    try:
        strict: object = decode_meta(line)
    except InvalidRecordError as exc:
        strict = str(exc)
    assert repr(fast) == repr(strict)


# ------------------------------------------------ lines the fast reader must not trust

HOSTILE = [
    "NaN",
    "Infinity",
    "-Infinity",
    "1e400",
    "-1e400",
    "1e-400",
    "-0",
    "18446744073709551616",
    '"\\ud800"',
    '"\\u0022\\u0022"',
    '"\\u0022\\u0022\\u0022\\u0022"',
    '"a\\\\"',
    "[" * 126 + "]" * 126,
    "[" * 128 + "]" * 128,
    "[" * 160 + "]" * 160,
    "[" * 200 + "]" * 200,
    '{"a":1,"a":NaN}',
    '{"a":1e400,"a":1}',
]
ENTRY_KEYS = ["type", "id", "parent_id", "timestamp", "message", "summary", "first_kept_id"]
ENTRY_KEYS += ["tokens_before", "future"]
MESSAGE_KEYS = ["role", "content", "streaming", "name", "future"]
member_values = st.sampled_from(HOSTILE) | json_values.map(
    lambda value: json.dumps(value, ensure_ascii=False)
)


def insert_member(line: str, after: str, key: str, value: str) -> str:
    """``line`` with ``"key":value`` as the first member of the object opened by ``after``."""
    at = line.index(after) + len(after)
    rest = line[at:]
    comma = "" if rest.startswith("}") else ","
    return line[:at] + encode_string(key) + ":" + value + comma + rest


@st.composite
def mutated_entry_lines(draw: st.DrawFn) -> str:
    """A valid entry line with members added: repeated, unknown, hostile."""
    line = encode(draw(message_entries | compaction_entries))
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        if '"message":{' in line and draw(st.booleans()):
            key = draw(st.sampled_from(MESSAGE_KEYS))
            line = insert_member(line, '"message":{', key, draw(member_values))
        else:
            line = insert_member(line, "{", draw(st.sampled_from(ENTRY_KEYS)), draw(member_values))
    if draw(st.booleans()):  # hide quotes of the content as escapes
        line = line.replace('\\"', "\\u0022")
    return line


@settings(max_examples=400)
@given(mutated_entry_lines(), st.booleans())
def test_both_readers_agree_on_repeated_unknown_and_hostile_members(
    line: str, as_bytes: bool
) -> None:
    fast, strict = both_readers(line.encode() if as_bytes else line)
    assert fast == strict


@settings(max_examples=200)
@given(message_entries, member_values)
def test_both_readers_agree_on_any_content(entry: MessageEntry, content: str) -> None:
    # The first "content":null of the line is the message's own content.
    message = entry.message
    blank = MessageEntry(
        id=entry.id,
        parent_id=entry.parent_id,
        timestamp=entry.timestamp,
        message=Message(
            role=message.role, content=None, streaming=message.streaming, **message.extra
        ),
    )
    line = encode(blank).replace('"content":null', '"content":' + content, 1)
    fast, strict = both_readers(line)
    assert fast == strict


@pytest.mark.parametrize(
    "line",
    [
        ENTRY_LINE.replace('"content":"x"', '"content":NaN'),
        ENTRY_LINE.replace('"content":"x"', '"content":[Infinity]'),
        ENTRY_LINE.replace('"content":"x"', '"content":{"n":1e400}'),
        ENTRY_LINE.replace('"content":"x"', '"content":"x","name":-Infinity'),
        ENTRY_LINE.replace('"id":"e"', '"id":"e","id":"f"'),
        ENTRY_LINE.replace('"type":"message"', '"type":"message","type":"message"'),
        ENTRY_LINE.replace('"role":"r"', '"role":"r","role":"s"'),
        ENTRY_LINE.replace('"content":"x"', '"content":"x","content":"y"'),
        ENTRY_LINE.replace('"content":"x"', '"content":"\\u0022\\u0022"').replace(
            '"id":"e"', '"id":"e","id":"f"'
        ),
        ENTRY_LINE[:-1] + ',"future":NaN}',
        ENTRY_LINE[:-1] + ',"future":1e400}',
        ENTRY_LINE[:-1] + ',"future":' + "[" * 150 + "]" * 150 + "}",
        ENTRY_LINE.replace('"content":"x"', '"content":' + "[" * 125 + "]" * 125),
        ENTRY_LINE.replace('"content":"x"', '"content":' + "[" * 126 + "]" * 126),
        ENTRY_LINE.replace('"content":"x"', '"content":' + "[" * 199 + "]" * 199),
        ENTRY_LINE.replace('"content":"x"', '"content":"x","n":' + "[" * 125 + "]" * 125),
        ENTRY_LINE.replace('"content":"x"', '"content":"x","n":' + "[" * 126 + "]" * 126),
        ENTRY_LINE.replace('"id":"e"', '"id":0,"id":"e","parent_id":null'),
        ENTRY_LINE.replace('"content":"x"', '"content":"x","streaming":false,"role":0'),
        COMPACTION_LINE.replace('"id":"c"', '"id":"c","id":"d"'),
        COMPACTION_LINE[:-1] + ',"tokens_before":1,"tokens_before":2}',
        COMPACTION_LINE[:-1] + ',"x":NaN}',
    ],
)
def test_lines_the_fast_parser_reads_more_kindly_go_to_the_strict_reader(line: str) -> None:
    fast, strict = both_readers(line)
    assert fast == strict


HEADER_LINE = '{"id":"s","version":1,"created_at":"c"}'


def both_header_readers(line: str | bytes) -> tuple[str, str]:
    try:
        fast: object = read_stored_meta(line)
    except InvalidRecordError as exc:
        fast = str(exc)
    try:
        strict: object = decode_meta(line)
    except InvalidRecordError as exc:
        strict = str(exc)
    return repr(fast), repr(strict)


@pytest.mark.parametrize(
    "line",
    [
        HEADER_LINE.replace('"id":"s"', '"id":"s","id":"t"'),
        HEADER_LINE.replace('"version":1', '"version":1,"version":2'),
        HEADER_LINE[:-1] + ',"created_at":"d"}',
        HEADER_LINE[:-1] + ',"x":NaN}',
        HEADER_LINE[:-1] + ',"x":1e400}',
        HEADER_LINE[:-1] + ',"x":"\\ud800"}',
        HEADER_LINE[:-1] + ',"x":' + "[" * 150 + "]" * 150 + "}",
        # A default hides a missing key, which must not hide a repeated one.
        '{"id":0,"id":"","created_at":""}',
        '{"id":"s","id":"t","version":0}',
        '{"id":"s","parent_session":null,"parent_session":"p","version":1}',
    ],
)
def test_stored_headers_with_repeated_or_unknown_fields_read_as_the_strict_reader(
    line: str,
) -> None:
    fast, strict = both_header_readers(line)
    assert fast == strict


@settings(max_examples=200)
@given(
    metas,
    st.lists(
        st.tuples(
            st.sampled_from(["id", "version", "x", "title", "owner", "tags", "metadata"]),
            member_values,
        ),
        min_size=1,
        max_size=3,
    ),
)
def test_both_header_readers_agree_on_added_members(
    meta: SessionMeta, members: list[tuple[str, str]]
) -> None:
    line = encode(meta)
    for key, value in members:
        line = insert_member(line, "{", key, value)
    fast, strict = both_header_readers(line)
    assert fast == strict
    for default in [
        '"version":' + str(meta.version) + ",",
        ',"created_at":' + encode_string(meta.created_at),
    ]:
        line = line.replace(default, "", 1)  # a field left to its default
        fast, strict = both_header_readers(line)
        assert fast == strict
