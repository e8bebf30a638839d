"""check_pairing, repair_pairing and safe_cut: tool calls and their results.

Hand-written cases pin what each dialect's check names; property tests run
random agent histories (parallel calls, text between, crashes mid-turn,
duplicated, dropped and moved results, compaction cuts at every message)
through the repair and the cut.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, get_args

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sessionstore import (
    SYNTHETIC_FIELD,
    CompactionEntry,
    ConfigurationError,
    Message,
    MessageEntry,
    Orphan,
    build_context,
    check_pairing,
    encode,
    repair_pairing,
    safe_cut,
)
from sessionstore.context import INTERRUPTED_RESULT, PairingDialect

DIALECTS: list[PairingDialect] = list(get_args(PairingDialect))
SUMMARY = "[Conversation summary]\nearlier"

# ----------------------------------------------------------- message builders


def user(text: str) -> Message:
    return Message.user(text)


def said(text: str) -> Message:
    return Message.assistant(text)


def openai_calls(*ids: str, text: str = "") -> Message:
    calls = [
        {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}} for i in ids
    ]
    return Message(role="assistant", content=text, tool_calls=calls)


def openai_result(call_id: str) -> Message:
    return Message(role="tool", content=f"result of {call_id}", tool_call_id=call_id)


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def tool_use(call_id: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": "f", "input": {}}


def tool_result(call_id: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": f"result of {call_id}"}


def anthropic_calls(*ids: str, text: str = "") -> Message:
    blocks = [text_block(text)] if text else []
    return Message(role="assistant", content=blocks + [tool_use(i) for i in ids])


def anthropic_results(*blocks: dict[str, Any]) -> Message:
    return Message(role="user", content=list(blocks))


def call_item(call_id: str) -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": "f", "arguments": "{}"}


def output_item(call_id: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": f"result of {call_id}"}


def agent_call(call_id: str) -> Message:
    """An openai-agents item held in a message's extra fields."""
    return Message(role="assistant", content="", **call_item(call_id))


def agent_output(call_id: str) -> Message:
    return Message(role="tool", content="", **output_item(call_id))


def orphan(index: int, call_id: str | None, problem: str) -> Orphan:
    return Orphan(index, call_id, problem)  # type: ignore[arg-type]


# ------------------------------------------------------- the oracle, by hand

CASES: list[tuple[PairingDialect, list[Message], list[Orphan]]] = [
    # OpenAI: the results follow their call, in any order, before any other message.
    ("openai", [user("q"), openai_calls("a", "b"), openai_result("b"), openai_result("a")], []),
    (
        "openai",
        [user("q"), openai_calls("a", "b"), openai_result("a")],
        [orphan(1, "b", "missing_result")],
    ),
    (
        "openai",
        [user("q"), openai_calls("a", text="let me look"), user("hello?"), said("hi")],
        [orphan(1, "a", "missing_result")],
    ),
    (
        "openai",
        [openai_calls("a"), user("wait"), openai_result("a")],
        [orphan(0, "a", "missing_result"), orphan(2, "a", "misplaced_result")],
    ),
    (
        "openai",
        [openai_calls("a"), openai_result("a"), openai_result("a"), user("x"), openai_result("a")],
        [orphan(2, "a", "duplicate_result"), orphan(4, "a", "duplicate_result")],
    ),
    ("openai", [user(SUMMARY), openai_result("a"), said("done")], [orphan(1, "a", "missing_call")]),
    (
        "openai",
        [openai_result("a"), openai_calls("a"), openai_result("a")],
        [orphan(0, "a", "misplaced_result")],
    ),
    ("openai", [user("q"), Message(role="tool", content="?")], [orphan(1, None, "missing_call")]),
    (
        "openai",
        [openai_calls("a"), openai_result("z")],
        [orphan(0, "a", "missing_result"), orphan(1, "z", "missing_call")],
    ),
    # Anthropic: the results head the very next message, a user message.
    (
        "anthropic",
        [
            user("q"),
            anthropic_calls("a", "b", text="looking"),
            anthropic_results(tool_result("b"), tool_result("a"), text_block("and?")),
            said("done"),
        ],
        [],
    ),
    (
        "anthropic",
        [anthropic_calls("a", "b"), anthropic_results(tool_result("a"))],
        [orphan(0, "b", "missing_result")],
    ),
    ("anthropic", [user("q"), anthropic_calls("a")], [orphan(1, "a", "missing_result")]),
    ("anthropic", [anthropic_calls("a"), said("more")], [orphan(0, "a", "missing_result")]),
    ("anthropic", [anthropic_calls("a"), user("plain text")], [orphan(0, "a", "missing_result")]),
    (
        "anthropic",
        [anthropic_calls("a"), anthropic_results(text_block("first"), tool_result("a"))],
        [orphan(1, "a", "misplaced_result")],
    ),
    (
        "anthropic",
        [anthropic_calls("a"), user("stop"), anthropic_results(tool_result("a"))],
        [orphan(0, "a", "missing_result"), orphan(2, "a", "misplaced_result")],
    ),
    (
        "anthropic",
        [user(SUMMARY), anthropic_results(tool_result("a")), said("ok")],
        [orphan(1, "a", "missing_call")],
    ),
    (
        "anthropic",
        [anthropic_calls("a"), anthropic_results(tool_result("a"), tool_result("a"))],
        [orphan(1, "a", "duplicate_result")],
    ),
    # openai-agents: an output comes after its call, anything between.
    (
        "openai-agents",
        [
            user("q"),
            agent_call("a"),
            agent_call("b"),
            agent_output("b"),
            said("hm"),
            agent_output("a"),
        ],
        [],
    ),
    (
        "openai-agents",
        [user("q"), agent_call("a"), agent_call("b"), agent_output("a")],
        [orphan(2, "b", "missing_result")],
    ),
    (
        "openai-agents",
        [agent_output("a"), agent_call("a")],
        [orphan(0, "a", "misplaced_result"), orphan(1, "a", "missing_result")],
    ),
    (
        "openai-agents",
        [agent_call("a"), agent_output("a"), agent_output("a")],
        [orphan(2, "a", "duplicate_result")],
    ),
    ("openai-agents", [user(SUMMARY), agent_output("a")], [orphan(1, "a", "missing_call")]),
    (
        "openai-agents",
        [
            Message(role="assistant", content=[call_item("a"), call_item("b")]),
            Message(role="tool", content=[output_item("a")]),
        ],
        [orphan(0, "b", "missing_result")],
    ),
    (
        "openai-agents",
        [
            Message(role="assistant", content=call_item("a")),
            Message(role="tool", content=output_item("z")),
        ],
        [orphan(0, "a", "missing_result"), orphan(1, "z", "missing_call")],
    ),
]


@pytest.mark.parametrize(("dialect", "messages", "expected"), CASES)
def test_check_names_the_orphans_an_oracle_finds_by_hand(
    dialect: PairingDialect, messages: list[Message], expected: list[Orphan]
) -> None:
    assert check_pairing(messages, dialect=dialect) == expected


@pytest.mark.parametrize(("dialect", "messages", "expected"), CASES)
def test_every_hand_written_case_repairs_to_a_clean_history(
    dialect: PairingDialect, messages: list[Message], expected: list[Orphan]
) -> None:
    repaired = repair_pairing(messages, dialect=dialect)
    assert check_pairing(repaired, dialect=dialect) == []
    assert (repaired == messages) == (not expected)


def test_an_orphan_says_which_message_which_call_and_what_is_wrong() -> None:
    assert str(orphan(3, "a", "missing_result")) == "message 3: call 'a' got no result"
    assert str(orphan(0, None, "missing_call")) == "message 0: result for None has no call"
    assert str(orphan(2, "a", "misplaced_result")) == (
        "message 2: result for 'a' is not where its call wants it"
    )
    assert str(orphan(4, "a", "duplicate_result")) == (
        "message 4: result for 'a' repeats one its call already got"
    )


@pytest.mark.parametrize("call", [check_pairing, repair_pairing])
def test_an_unknown_dialect_is_a_configuration_error(call: Any) -> None:
    with pytest.raises(ConfigurationError, match=r"'gemini'.*'openai'"):
        call([user("q")], dialect="gemini")


def test_safe_cut_refuses_an_unknown_dialect_and_a_negative_keep_last() -> None:
    with pytest.raises(ConfigurationError, match="unknown tool-call dialect"):
        safe_cut([("m1", user("q"))], 1, dialect="gemini")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="keep_last"):
        safe_cut([("m1", user("q"))], -1, dialect="openai")


# ------------------------------------------------------ repairs, by hand


def test_openai_a_crash_mid_turn_gets_a_synthetic_result_right_after_the_real_ones() -> None:
    history = [user("q"), openai_calls("a", "b"), openai_result("b"), user("again?")]
    repaired = repair_pairing(history, dialect="openai")
    made = Message(
        role="tool", content=INTERRUPTED_RESULT, tool_call_id="a", **{SYNTHETIC_FIELD: True}
    )
    assert repaired == [*history[:3], made, history[3]]


def test_openai_results_out_of_their_exchange_are_dropped() -> None:
    history = [openai_calls("a"), user("wait"), openai_result("a"), openai_result("a")]
    repaired = repair_pairing(history, dialect="openai")
    assert [m.role for m in repaired] == ["assistant", "tool", "user"]
    assert repaired[1].extra == {"tool_call_id": "a", SYNTHETIC_FIELD: True}


def test_anthropic_missing_results_head_the_next_user_message() -> None:
    history = [anthropic_calls("a", "b"), anthropic_results(text_block("hi"), tool_result("b"))]
    repaired = repair_pairing(history, dialect="anthropic")
    assert repaired[0] == history[0]
    assert repaired[1].content == [
        tool_result("b"),
        {
            "type": "tool_result",
            "tool_use_id": "a",
            "content": INTERRUPTED_RESULT,
            "is_error": True,
        },
        text_block("hi"),
    ]
    assert repaired[1].extra == {SYNTHETIC_FIELD: True}


def test_anthropic_plain_text_after_a_tool_use_becomes_a_block_behind_the_results() -> None:
    repaired = repair_pairing([anthropic_calls("a"), user("well?")], dialect="anthropic")
    assert [block["type"] for block in repaired[1].content] == ["tool_result", "text"]
    assert repaired[1].text() == "well?"


def test_anthropic_without_a_next_user_message_one_is_made() -> None:
    history = [anthropic_calls("a"), said("more")]
    repaired = repair_pairing(history, dialect="anthropic")
    assert [m.role for m in repaired] == ["assistant", "user", "assistant"]
    assert repaired[1].extra == {SYNTHETIC_FIELD: True}
    assert repaired[1].content[0]["tool_use_id"] == "a"
    assert repair_pairing([anthropic_calls("a")], dialect="anthropic")[1:] == [repaired[1]]


def test_anthropic_a_message_of_stray_results_only_is_dropped() -> None:
    history = [user(SUMMARY), anthropic_results(tool_result("a")), said("ok")]
    assert repair_pairing(history, dialect="anthropic") == [history[0], history[2]]


def test_openai_agents_a_synthetic_output_follows_the_run_of_items_in_the_calls_shape() -> None:
    history = [user("q"), agent_call("a"), agent_call("b"), agent_output("b"), user("again")]
    repaired = repair_pairing(history, dialect="openai-agents")
    made = Message(
        role="tool",
        content="",
        type="function_call_output",
        call_id="a",
        output=INTERRUPTED_RESULT,
        **{SYNTHETIC_FIELD: True},
    )
    assert repaired == [*history[:4], made, history[4]]


def test_openai_agents_stray_outputs_leave_a_content_list() -> None:
    holder = Message(role="tool", content=[output_item("z"), output_item("a")])
    repaired = repair_pairing([agent_call("a"), holder], dialect="openai-agents")
    assert repaired[1].content == [output_item("a")]
    assert repaired[1].extra == {SYNTHETIC_FIELD: True}


# --------------------------------------------------------- random histories


@dataclass(frozen=True)
class Exchange:
    """One assistant turn of parallel tool calls and the results recorded."""

    ids: list[str]
    recorded: list[str]  # the ids whose results were stored, in that order
    text: str  # what the assistant said with its calls; may be empty
    after: str  # text the user sent with the results (Anthropic); may be empty


Turn = tuple[str, str] | Exchange  # ("user" | "assistant", text), or an exchange


@st.composite
def turns(draw: st.DrawFn, crashes: bool) -> list[Turn]:
    """A conversation; with ``crashes``, some calls lack some results."""
    history: list[Turn] = []
    for n in range(draw(st.integers(0, 7))):
        kind = draw(st.sampled_from(["user", "assistant", "tools", "tools"]))
        if kind != "tools":
            history.append((kind, f"text {n}"))
            continue
        ids = [f"call_{n}_{k}" for k in range(draw(st.integers(1, 3)))]
        recorded = draw(st.permutations(ids))
        if crashes:
            recorded = recorded[: draw(st.integers(0, len(ids)))]
        text = draw(st.sampled_from(["", f"calling {n}"]))
        history.append(Exchange(ids, recorded, text, draw(st.sampled_from(["", f"and {n}"]))))
    return history


def render(history: list[Turn], dialect: PairingDialect, shape: str) -> list[Message]:
    """The messages a framework of that dialect stores for a conversation."""
    messages: list[Message] = []
    for turn in history:
        if not isinstance(turn, Exchange):
            messages.append(Message(role=turn[0], content=turn[1]))
        elif dialect == "openai":
            messages.append(openai_calls(*turn.ids, text=turn.text))
            messages += [openai_result(i) for i in turn.recorded]
        elif dialect == "anthropic":
            messages.append(anthropic_calls(*turn.ids, text=turn.text))
            blocks = [tool_result(i) for i in turn.recorded]
            if blocks or turn.after:
                messages.append(
                    anthropic_results(*blocks, *[text_block(turn.after)] * bool(turn.after))
                )
        else:
            messages += [said(turn.text)] * bool(turn.text)
            messages += agent_items([call_item(i) for i in turn.ids], "assistant", shape)
            messages += agent_items([output_item(i) for i in turn.recorded], "tool", shape)
    return messages


def agent_items(items: list[dict[str, Any]], role: str, shape: str) -> list[Message]:
    if shape == "fields":
        return [Message(role=role, content="", **item) for item in items]
    if shape == "content":
        return [Message(role=role, content=item) for item in items]
    return [Message(role=role, content=items)] if items else []


Damage = tuple[str, int, int, int]


def damage(messages: list[Message], what: list[Damage]) -> list[Message]:
    """Drop, copy or move messages, or parts of their content lists."""
    messages = list(messages)
    for kind, a, b, c in what:
        if not messages:
            break
        source = messages[a % len(messages)]
        if kind == "drop":
            del messages[a % len(messages)]
        elif kind == "copy":
            messages.insert(b % (len(messages) + 1), source)
        elif kind == "move":
            messages.insert(b % len(messages), messages.pop(a % len(messages)))
        elif isinstance(source.content, list) and source.content:
            part = source.content[b % len(source.content)]
            if kind == "drop part":
                parts = [p for n, p in enumerate(source.content) if n != b % len(source.content)]
                messages[a % len(messages)] = source.model_copy(update={"content": parts})
            else:  # copy part, to the head of another message's list
                target = messages[c % len(messages)]
                if isinstance(target.content, list):
                    content = [part, *target.content]
                    messages[c % len(messages)] = target.model_copy(update={"content": content})
    return messages


SHAPES = st.sampled_from(["fields", "content", "list"])
DAMAGE = st.lists(
    st.tuples(
        st.sampled_from(["drop", "copy", "move", "drop part", "copy part"]),
        st.integers(0, 99),
        st.integers(0, 99),
        st.integers(0, 99),
    ),
    max_size=4,
)


@st.composite
def clean_histories(draw: st.DrawFn) -> tuple[PairingDialect, list[Message]]:
    dialect = draw(st.sampled_from(DIALECTS))
    return dialect, render(draw(turns(crashes=False)), dialect, draw(SHAPES))


@st.composite
def messy_histories(draw: st.DrawFn) -> tuple[PairingDialect, list[Message]]:
    dialect = draw(st.sampled_from(DIALECTS))
    messages = render(draw(turns(crashes=True)), dialect, draw(SHAPES))
    return dialect, damage(messages, draw(DAMAGE))


def cut_at(messages: list[Message], first_kept: int | None) -> list[Message]:
    """The context of a compaction keeping messages from ``first_kept`` on."""
    entries: list[MessageEntry | CompactionEntry] = [
        MessageEntry(id=f"m{i}", timestamp="t", message=m) for i, m in enumerate(messages)
    ]
    kept = "compaction" if first_kept is None else f"m{first_kept}"
    entries.append(
        CompactionEntry(id="compaction", timestamp="t", summary="earlier", first_kept_id=kept)
    )
    return build_context(entries)


def synthetic(message: Message) -> bool:
    return message.extra.get(SYNTHETIC_FIELD) is True


def plain(message: Message) -> bool:
    """Whether a message has nothing to do with tools (the generated texts
    never name one)."""
    line = encode(message)
    return "tool" not in line and "function" not in line


def is_subsequence(part: list[Any], whole: list[Any]) -> bool:
    rest = iter(whole)
    return all(any(item == other for other in rest) for item in part)


@given(clean_histories())
@settings(max_examples=150)
def test_a_clean_history_has_no_orphan_and_repair_returns_it_unchanged(
    case: tuple[PairingDialect, list[Message]],
) -> None:
    dialect, messages = case
    assert check_pairing(messages, dialect=dialect) == []
    assert repair_pairing(messages, dialect=dialect) == messages


@given(messy_histories())
@settings(max_examples=300)
def test_a_repaired_history_has_no_orphan_and_repairs_to_itself(
    case: tuple[PairingDialect, list[Message]],
) -> None:
    dialect, messages = case
    repaired = repair_pairing(messages, dialect=dialect)
    assert check_pairing(repaired, dialect=dialect) == []
    assert repair_pairing(repaired, dialect=dialect) == repaired


@given(messy_histories())
@settings(max_examples=200)
def test_repair_marks_what_it_makes_or_changes_and_keeps_every_text(
    case: tuple[PairingDialect, list[Message]],
) -> None:
    dialect, messages = case
    repaired = repair_pairing(messages, dialect=dialect)
    # The messages repair left alone are the input's, in their order.
    assert is_subsequence([m for m in repaired if not synthetic(m)], messages)
    assert not any(synthetic(m) for m in messages)
    # No plain message is lost (Anthropic may turn one into blocks behind results).
    texts = [m.text() for m in repaired]
    assert is_subsequence([m.text() for m in messages if plain(m)], texts)
    if dialect == "openai":  # only tool messages come and go
        assert [m for m in repaired if m.role != "tool"] == [
            m for m in messages if m.role != "tool"
        ]


@given(st.one_of(clean_histories(), messy_histories()))
@settings(max_examples=100)
def test_a_compaction_cut_at_any_message_repairs_to_a_clean_context(
    case: tuple[PairingDialect, list[Message]],
) -> None:
    dialect, messages = case
    for first_kept in [None, *range(len(messages))]:
        context = cut_at(messages, first_kept)
        repaired = repair_pairing(context, dialect=dialect)
        assert check_pairing(repaired, dialect=dialect) == []
        assert repair_pairing(repaired, dialect=dialect) == repaired
        assert repaired[0] == context[0]  # the summary stays first


@given(clean_histories())
@settings(max_examples=150)
def test_safe_cut_keeps_enough_and_cuts_no_exchange_in_two(
    case: tuple[PairingDialect, list[Message]],
) -> None:
    dialect, messages = case
    with_ids = [(f"m{i}", m) for i, m in enumerate(messages)]
    for keep_last in range(len(messages) + 2):
        first_kept = safe_cut(with_ids, keep_last, dialect=dialect)
        start = None if first_kept is None else int(first_kept[1:])
        context = cut_at(messages, start)
        assert check_pairing(context, dialect=dialect) == []
        assert len(context) - 1 >= min(keep_last, len(messages))
        if keep_last == 0 or not messages:
            assert start is None
            continue
        # The latest cut that keeps enough and leaves a clean context.
        clean = [
            k
            for k in range(len(messages) - keep_last + 1)
            if not check_pairing(cut_at(messages, k), dialect=dialect)
        ]
        assert start == max(clean, default=0)


@given(messy_histories(), st.integers(1, 12))
@settings(max_examples=150)
def test_safe_cut_never_starts_the_kept_messages_with_a_result(
    case: tuple[PairingDialect, list[Message]], keep_last: int
) -> None:
    dialect, messages = case
    first_kept = safe_cut(
        [(f"m{i}", m) for i, m in enumerate(messages)], keep_last, dialect=dialect
    )
    if first_kept is None:
        assert messages == []
        return
    start = int(first_kept[1:])
    assert len(messages) - start >= min(keep_last, len(messages))
    orphans = check_pairing(cut_at(messages, start), dialect=dialect)
    if start > 0:
        assert not [o for o in orphans if o.index == 1 and o.problem != "missing_result"]


def test_safe_cut_moves_back_to_the_assistant_message_that_made_the_calls() -> None:
    history = [
        user("q"),
        openai_calls("a", "b"),
        openai_result("a"),
        openai_result("b"),
        said("ok"),
    ]
    with_ids = [(f"m{i}", m) for i, m in enumerate(history)]
    assert safe_cut(with_ids, 1, dialect="openai") == "m4"
    assert safe_cut(with_ids, 2, dialect="openai") == "m1"
    assert safe_cut(with_ids, 0, dialect="openai") is None
    assert safe_cut(with_ids, 9, dialect="openai") == "m0"
    assert safe_cut([], 3, dialect="openai") is None
