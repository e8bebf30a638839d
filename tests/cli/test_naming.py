"""How the command line names a session: a conversation's name (what its
agent sees now), a whole id, ``latest``, or the start of an id; and what it
says when nothing, or more than one session, has the name (docs/cli.md)."""

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, cast

import pytest

from sessionstore import Message, MessageEntry, SessionMeta, SessionStore, open_store
from sessionstore.cli.naming import session_named
from sessionstore.integrations.conversation import Conversation
from tests.cli.helpers import run


def said(text: str) -> MessageEntry:
    return MessageEntry.new(Message(role="user", content=text))


def fill(target: str, build: Callable[[SessionStore], Awaitable[Any]]) -> Any:
    async def body() -> Any:
        async with await open_store(target) as store:
            return await build(store)

    return asyncio.run(body())


def texts(out: str) -> list[str]:
    """The text column of `show`'s piped rows."""
    return [line.split("\t")[4] for line in out.splitlines()[1:]]


async def popped_conversation(store: SessionStore) -> str:
    """The conversation ``chat-1`` as openai-agents' `StoreSession("chat-1")`
    keeps it: a turn, its last message popped (a retry), a new one; returns
    the session it is at now."""
    chat = Conversation(store, "chat-1", first_id="chat-1")
    await chat.add([said("hello"), said("a typo")])
    await chat.pop()
    return await chat.add([said("the question")])


async def make(store: SessionStore, *ids: str, title: str | None = None) -> None:
    for session_id in ids:
        await store.create(SessionMeta.new().model_copy(update={"id": session_id, "title": title}))
        await store.append(session_id, said(f"in {session_id}"))


# ---------------------------------------------------------------- a conversation's name


def test_show_a_conversation_after_a_pop_shows_what_its_agent_sees_now(
    capsys: pytest.CaptureFixture[str], target: str
) -> None:
    now = fill(target, popped_conversation)
    status, out, err = run(capsys, "--db", target, "show", "chat-1")
    assert status == 0
    assert texts(out) == ["hello", "the question"]
    assert f"'chat-1' is the conversation 'chat-1', now at session {now}" in err
    assert "--exact chat-1" in err  # how to see its first session


def test_show_a_conversation_after_a_clear_shows_its_new_session(
    capsys: pytest.CaptureFixture[str], target: str
) -> None:
    async def cleared(store: SessionStore) -> None:
        chat = Conversation(store, "chat-1", first_id="chat-1")
        await chat.add([said("before")])
        await chat.clear()
        await chat.add([said("after")])

    fill(target, cleared)
    status, out, _ = run(capsys, "--db", target, "show", "chat-1")
    assert (status, texts(out)) == (0, ["after"])


def test_exact_takes_the_conversations_first_session(
    capsys: pytest.CaptureFixture[str], target: str
) -> None:
    fill(target, popped_conversation)
    status, out, err = run(capsys, "--db", target, "show", "chat-1", "--exact")
    assert (status, err) == (0, "")
    assert texts(out) == ["hello", "a typo"]


def test_a_head_that_never_named_the_session_of_its_name_is_ambiguous(
    capsys: pytest.CaptureFixture[str], target: str
) -> None:
    async def build(store: SessionStore) -> None:
        await make(store, "foo", "bar")
        await store.set_head("foo", "bar")

    fill(target, build)
    status, out, err = run(capsys, "--db", target, "show", "foo")
    assert (status, out) == (1, "")
    assert "'foo' names two sessions: the session 'foo', and the conversation (head)" in err
    assert "now at session bar" in err
    assert "--exact foo takes the session, bar the conversation's" in err
    assert len(err.splitlines()) == 1
    assert texts(run(capsys, "--db", target, "show", "foo", "--exact")[1]) == ["in foo"]


def test_a_conversation_whose_session_was_erased_says_so(
    capsys: pytest.CaptureFixture[str], target: str
) -> None:
    now = fill(target, popped_conversation)
    fill(target, lambda store: store.erase(now, reason="asked"))
    status, _, err = run(capsys, "--db", target, "show", "chat-1")
    assert status == 1
    assert err == (
        f"sessionstore: error: the conversation 'chat-1' is at session {now}, which the "
        "store no longer holds (erased); `sessionstore head chat-1` lists where it has been\n"
    )


# ---------------------------------------------------------------- an id's start, latest


def test_the_start_of_an_id_names_its_session(
    capsys: pytest.CaptureFixture[str], target: str
) -> None:
    fill(target, lambda store: make(store, "3f2b9c1e-0000-4000-8000-000000000000", "a6b9"))
    status, out, err = run(capsys, "--db", target, "show", "3f2b")
    assert status == 0
    assert texts(out) == ["in 3f2b9c1e-0000-4000-8000-000000000000"]
    assert "'3f2b' is session 3f2b9c1e-0000-4000-8000-000000000000" in err


def test_the_start_of_several_ids_is_refused_naming_them(
    capsys: pytest.CaptureFixture[str], target: str
) -> None:
    fill(target, lambda store: make(store, "report-2026-02", "report-2026-01", "other"))
    status, out, err = run(capsys, "--db", target, "show", "report-2026")
    assert (status, out) == (1, "")
    assert err == (
        "sessionstore: error: 'report-2026' is the start of 2 session ids: "
        "report-2026-01, report-2026-02; give more of the id\n"
    )


def test_fewer_than_four_characters_name_no_session_by_its_start(
    capsys: pytest.CaptureFixture[str], target: str
) -> None:
    fill(target, lambda store: make(store, "3f2b9c1e"))
    status, _, err = run(capsys, "--db", target, "show", "3f2")
    assert status == 1
    assert "session not found: '3f2'" in err
    assert "an id prefix needs 4 characters or more" in err


def test_latest_is_the_session_last_written_to(
    capsys: pytest.CaptureFixture[str], target: str
) -> None:
    async def build(store: SessionStore) -> None:
        await make(store, "older", "newer")
        await store.append("older", said("written last"))

    fill(target, build)
    status, out, err = run(capsys, "--db", target, "show", "latest")
    assert status == 0
    assert texts(out) == ["in older", "written last"]
    assert "'latest' is session older, the last written to" in err


def test_latest_in_an_empty_store_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = run(capsys, "--db", "memory://", "show", "latest")
    assert status == 1
    assert err == "sessionstore: error: 'latest' names no session: the store holds none\n"


def test_a_session_named_latest_comes_before_the_last_written_to(
    capsys: pytest.CaptureFixture[str], target: str
) -> None:
    fill(target, lambda store: make(store, "latest", "later"))
    status, out, err = run(capsys, "--db", target, "show", "latest")
    assert (status, err) == (0, "")
    assert texts(out) == ["in latest"]


# ---------------------------------------------------------------- not found


def test_a_name_not_found_suggests_the_nearest_conversation(
    capsys: pytest.CaptureFixture[str], target: str
) -> None:
    fill(target, popped_conversation)
    status, out, err = run(capsys, "--db", target, "show", "chat-2")
    assert (status, out) == (1, "")
    assert err.startswith("sessionstore: error: session not found: 'chat-2'; ")
    assert "nearest: chat-1 (a conversation)" in err
    assert "`sessionstore ls` lists the sessions, `sessionstore head` the conversations" in err
    assert len(err.splitlines()) == 1


def test_a_name_not_found_suggests_a_session_by_its_title(
    capsys: pytest.CaptureFixture[str], target: str
) -> None:
    async def build(store: SessionStore) -> None:
        await make(store, "report-2026-01", "report-2026-02")
        await store.set_title("report-2026-02", "Flaky CI test")

    fill(target, build)
    status, _, err = run(capsys, "--db", target, "show", "flaky-ci-test")
    assert status == 1
    assert "nearest: report-2026-02 (titled 'Flaky CI test')" in err


# ---------------------------------------------------------------- every command


def _ids(target: str) -> list[str]:
    return sorted(meta.id for meta in fill(target, lambda store: store.list()))


@pytest.mark.parametrize(
    "command",
    ["show", "html", "title", "fork", "head --set", "export", "erase", "retire"],
)
def test_every_command_that_takes_a_session_takes_a_conversations_name(
    capsys: pytest.CaptureFixture[str], target: str, tmp_path: Path, command: str
) -> None:
    now = fill(target, popped_conversation)
    before = _ids(target)
    archive = str(tmp_path / "archive")
    args = {
        "show": ["show", "chat-1"],
        "html": ["html", "chat-1"],
        "title": ["title", "chat-1", "Retried"],
        "fork": ["fork", "chat-1"],
        "head --set": ["head", "other", "--set", "chat-1"],
        "export": ["export", archive, "--session", "chat-1"],
        "erase": ["erase", "chat-1", "--reason", "asked", "--yes"],
        "retire": ["retire", "--to", archive, "--session", "chat-1"],
    }[command]
    status, out, _ = run(capsys, "--db", target, *args)
    assert status == 0
    if command in ("show", "html"):
        assert "the question" in out
        assert "a typo" not in out
    elif command == "title":
        assert out == f"{now}: Retried\n"
    elif command == "fork":
        made = out.strip()
        history = fill(target, lambda store: store.load(made))
        assert [e.message.text() for e in history] == ["hello", "the question"]
    elif command == "head --set":
        assert fill(target, lambda store: store.head("other")) == now
    elif command == "export":
        assert [p.name for p in Path(archive, "sessions").iterdir()] == [f"{now}.jsonl"]
    else:  # erase, retire: the session the conversation is at, and only it
        assert _ids(target) == sorted(set(before) - {now})


def test_export_names_each_session_as_the_command_line_does(
    capsys: pytest.CaptureFixture[str], target: str, tmp_path: Path
) -> None:
    fill(target, lambda store: make(store, "3f2b9c1e", "a6b976cb"))
    archive = tmp_path / "archive"
    status, _, err = run(capsys, "--db", target, "export", str(archive), "--session", "a6b9")
    assert status == 0, err
    lines = (archive / "sessions" / "a6b976cb.jsonl").read_text().splitlines()
    assert json.loads(lines[0])["id"] == "a6b976cb"
    assert [p.name for p in (archive / "sessions").iterdir()] == ["a6b976cb.jsonl"]


# ---------------------------------------------------------------- what a name costs


class _Reads:
    """A store that records the names of the methods asked of it."""

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self.asked: list[str] = []

    def __getattr__(self, name: str) -> Any:
        self.asked.append(name)
        return getattr(self.store, name)


ENTRY_READS = {"load", "load_slice", "iter_entries", "load_context", "raw_blocks", "search"}


@pytest.mark.parametrize(
    ("name", "lists"),
    [("chat-1", False), ("chat-1-first", False), ("3f2b", True), ("latest", False)],
)
async def test_a_name_reads_no_entries_and_only_a_prefix_lists_the_headers(
    name: str, lists: bool
) -> None:
    async with await open_store("memory://") as store:
        await popped_conversation(store)
        await make(store, "chat-1-first", "3f2b9c1e")
        reads = _Reads(store)
        await session_named(cast(SessionStore, reads), name)
    assert not ENTRY_READS & set(reads.asked), reads.asked
    assert ("list" in reads.asked) == lists
