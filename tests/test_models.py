"""The records: constructors, defaults and the seed's serde behaviour."""

import json
import uuid
from typing import Any

import pytest
from pydantic import BaseModel

from sessionstore import (
    CommentWrite,
    CompactionEntry,
    InvalidRecordError,
    Message,
    MessageEntry,
    PostWrite,
    SessionHeader,
    SessionMeta,
    Timestamp,
    TitleChange,
    decode_entry,
    decode_journal_line,
    decode_meta,
    decode_title_change,
    encode,
)

AT = Timestamp.parse("2026-10-13T11:00:00Z")


def message_entry(entry_id: str, text: str) -> MessageEntry:
    return MessageEntry(
        id=entry_id, timestamp="2026-07-19T00:00:00+00:00", message=Message.user(text)
    )


def test_message_entry_round_trips_and_omits_parent_id() -> None:
    entry = message_entry("e1", "hello")
    value = json.loads(encode(entry))
    assert value["type"] == "message"
    assert "parent_id" not in value
    assert decode_entry(encode(entry)) == entry


def test_compaction_entry_round_trips_with_tokens_before() -> None:
    entry = CompactionEntry(
        id="c1", timestamp="t", summary="summary", first_kept_id="e1", tokens_before=1000
    )
    value = json.loads(encode(entry))
    assert value["type"] == "compaction"
    assert value["tokens_before"] == 1000
    assert decode_entry(encode(entry)) == entry


def test_unknown_entry_field_is_ignored() -> None:
    entry = decode_entry(
        '{"type":"message","id":"e1","timestamp":"2026-07-19T00:00:00+00:00",'
        '"message":{"role":"user","content":"hi"},"some_future_field":true}'
    )
    assert entry.id == "e1"


def test_meta_round_trips_and_omits_parent_session() -> None:
    meta = SessionMeta.new()
    assert "parent_session" not in json.loads(encode(meta))
    assert decode_meta(encode(meta)) == meta


def test_meta_defaults_missing_fields_and_ignores_unknown_ones() -> None:
    meta = decode_meta('{"id":"s1","some_future_field":"x"}')
    assert (meta.id, meta.version, meta.parent_session, meta.created_at) == ("s1", 1, None, "")


def test_generated_ids_are_unique_uuid4() -> None:
    first, second = SessionMeta.new(), SessionMeta.new()
    assert first.id != second.id
    assert uuid.UUID(first.id).version == 4
    a, b = MessageEntry.new(Message.user("a")), MessageEntry.new(Message.user("a"))
    assert a.id != b.id
    assert CompactionEntry.new("s", a.id).id != CompactionEntry.new("s", a.id).id


def test_new_meta_keeps_its_parent_session() -> None:
    assert SessionMeta.new(parent_session="p1").parent_session == "p1"


def test_new_records_are_stamped_in_utc_with_plus_zero_offset() -> None:
    entry = CompactionEntry.new("sum", "e1", tokens_before=7)
    assert entry.timestamp.endswith("+00:00")
    assert entry.tokens_before == 7
    fraction = entry.timestamp[len("2026-11-30T02:49:27") : -len("+00:00")]
    assert fraction == "" or len(fraction) - 1 in (3, 6, 9)


def test_message_constructors_set_role_and_text() -> None:
    assert (Message.user("u").role, Message.assistant("a").role, Message.system("s").role) == (
        "user",
        "assistant",
        "system",
    )
    assert Message.assistant("a").text() == "a"


def test_text_joins_the_text_fields_of_content_parts() -> None:
    message = Message(
        role="user",
        content=[
            {"type": "text", "text": "one "},
            {"type": "image", "url": "x"},
            {"type": "text", "text": 5},
            "bare string",
            {"text": "two"},
        ],
    )
    assert message.text() == "one two"
    assert Message(role="user", content=None).text() == ""


def test_extra_message_fields_are_kept_in_order() -> None:
    message = Message(role="assistant", content="", tool_calls=[{"id": "t1"}], name="bot")
    assert message.extra == {"tool_calls": [{"id": "t1"}], "name": "bot"}
    assert list(message.extra) == ["tool_calls", "name"]


def test_records_are_frozen() -> None:
    meta = SessionMeta.new()
    with pytest.raises(Exception, match="frozen"):
        meta.id = "other"  # type: ignore[misc]


def test_constructors_validate_strictly() -> None:
    with pytest.raises(ValueError, match="valid integer"):
        SessionMeta(id="s", version=1.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="valid string"):
        Message(role=5, content="x")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("record", "fields"),
    [
        (SessionMeta, {"id": "s1"}),
        (MessageEntry, {"id": "e", "timestamp": "t", "message": Message.user("x")}),
        (CompactionEntry, {"id": "c", "timestamp": "t", "summary": "s", "first_kept_id": "e"}),
        (SessionHeader, {"started_at": AT, "model": "m"}),
        (PostWrite, {"at": AT, "id": uuid.UUID(int=1)}),
        (CommentWrite, {"at": AT, "id": uuid.UUID(int=1)}),
    ],
)
def test_constructing_a_record_with_an_unknown_field_is_an_error_naming_it(
    record: type[BaseModel], fields: dict[str, Any]
) -> None:
    # Dropping it silently would lose what the caller meant to store.
    record(**fields)
    with pytest.raises(ValueError, match=r"\nuser_id\n  Extra inputs are not permitted") as error:
        record(**fields, user_id="u-7")
    assert f"for {record.__name__}" in str(error.value)


def test_decoding_still_ignores_unknown_fields_as_serde_does() -> None:
    assert decode_meta('{"id":"s1","user_id":"u-7"}') == SessionMeta(id="s1")
    line = '{"line":"post","at":"2026-10-13T11:00:00Z","id":"' + str(uuid.UUID(int=1)) + '","x":1}'
    assert decode_journal_line(line) == PostWrite(at=AT, id=uuid.UUID(int=1))


def test_a_header_carries_title_owner_tags_and_metadata_after_the_reference_fields() -> None:
    meta = SessionMeta(
        id="s1", title="Trip", owner="u-7", tags=["a", "b"], metadata={"n": [1, 2.5], "x": None}
    )
    assert meta.tags == ("a", "b")
    line = encode(meta)
    assert line == (
        '{"id":"s1","version":1,"created_at":"","title":"Trip","owner":"u-7",'
        '"tags":["a","b"],"metadata":{"n":[1,2.5],"x":null}}'
    )
    assert decode_meta(line) == meta
    assert encode(SessionMeta(id="s1", tags=[], metadata={})) == (
        '{"id":"s1","version":1,"created_at":""}'
    )
    made = SessionMeta.new(title="T", owner="o", tags=["t"], metadata={"k": 1})
    assert (made.title, made.owner, made.tags, made.metadata) == ("T", "o", ("t",), {"k": 1})


@pytest.mark.parametrize(
    "line",
    [
        '{"id":"s1","title":5}',  # not of its type
        '{"id":"s1","tags":["a",1]}',
        '{"id":"s1","tags":"a"}',
        '{"id":"s1","metadata":[1]}',
        '{"id":"s1","owner":null}',
        '{"id":"s1","title":"a","title":"b"}',  # repeated: serde reads neither
        '{"id":"s1","metadata":{"x":1e400}}',  # a number serde's skip allows
        '{"id":"s1","metadata":' + "[" * 200 + "]" * 200 + "}",  # deeper than serde reads
    ],
)
def test_a_header_field_of_ours_that_serde_would_skip_is_skipped(line: str) -> None:
    assert decode_meta(line) == SessionMeta(id="s1")


def test_a_title_change_is_a_record_of_its_own() -> None:
    change = TitleChange(session_id="s1", title="Trip", at="2026-10-13T11:00:00Z")
    assert encode(change) == '{"session_id":"s1","title":"Trip","at":"2026-10-13T11:00:00Z"}'
    assert decode_title_change(encode(change)) == change
    cleared = TitleChange(session_id="s1", at="t")
    assert encode(cleared) == '{"session_id":"s1","at":"t"}'
    assert decode_title_change(encode(cleared)) == cleared
    with pytest.raises(InvalidRecordError, match="title"):
        decode_title_change('{"session_id":"s1","title":5,"at":"t"}')


def test_a_message_keeps_unknown_fields_as_its_extra_fields() -> None:
    assert Message(role="user", content="x", title="Trip").extra == {"title": "Trip"}


def test_models_accept_any_string_as_id() -> None:
    # The id rule belongs to the stores; records take any string, as serde does.
    assert decode_meta('{"id":"../x"}').id == "../x"


def test_invalid_record_error_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="expected a JSON object"):
        decode_meta("[]")
    assert issubclass(InvalidRecordError, ValueError)
