"""The peers' one-line constructors: ``StoreSession("chat-1", "conv.db")`` as
openai-agents' ``SQLiteSession``, and ``SessionStoreChatMessageHistory(
session_id=..., connection=...)`` as LangChain's ``SQLChatMessageHistory``;
each object opens its store on first use, from any thread or loop, and
closes it (`sessionstore.integrations.owned`)."""

from __future__ import annotations

import asyncio
import gc
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.integrations import require

require("agents", extra="openai-agents")
require("langchain_core", extra="langchain")

from agents import Runner, SQLiteSession, TResponseInputItem
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables.history import RunnableWithMessageHistory
from sqlalchemy import create_engine
from sqlalchemy.ext.asyncio import create_async_engine

from sessionstore import ClosedError, ConfigurationError, MemoryStore, SessionStore, open_store
from sessionstore.cli import main
from sessionstore.integrations.langchain import SessionStoreChatMessageHistory
from sessionstore.integrations.openai_agents import StoreSession
from sessionstore.sync import open_store as open_sync_store
from tests.integrations.scripted import NO_TRACING, ScriptedModel, agent_on, answer
from tests.kinds import StoreTargets

CHAT = "chat-1"

pytestmark = pytest.mark.filterwarnings(
    # LangChain deprecates the chain in favour of LangGraph; it is still what
    # BaseChatMessageHistory is for.
    "ignore:RunnableWithMessageHistory is deprecated"
)


def user(text: str) -> TResponseInputItem:
    return {"role": "user", "content": text}


def engine_threads() -> int:
    """The SQL stores' worker threads alive now (four per open SQLite store)."""
    return sum(thread.name.startswith("sessionstore-sql-") for thread in threading.enumerate())


def in_thread(call: Any) -> None:
    """Run ``call()`` in a new thread (as a worker of a server would) and wait."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if errors:
        raise errors[0]


def run_sync_in_a_thread(agent: Any, text: str, session: StoreSession) -> None:
    """``Runner.run_sync`` in a new thread, which closes the event loop that
    run_sync leaves as the thread's default (as openai-agents' tests do)."""

    def run() -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            Runner.run_sync(agent, text, session=session, run_config=NO_TRACING)
        finally:
            asyncio.set_event_loop(None)
            loop.close()

    in_thread(run)


def shown(capsys: pytest.CaptureFixture[str], db: Path, session_id: str) -> str:
    """What ``sessionstore show --db DB SESSION`` prints."""
    assert main(["show", "--db", str(db), session_id]) == 0
    return capsys.readouterr().out


# ================================================================ openai-agents


def test_the_sqlite_session_call_runs_the_agent_from_threads_and_the_cli_reads_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "conv.db"
    session = StoreSession(CHAT, str(db))  # as SQLiteSession("chat-1", "conv.db")
    assert not db.exists()  # opened on first use
    model = ScriptedModel(answer("Hello, Ana.", "m1"), answer("You are Ana.", "m2"))
    agent = agent_on(model)
    for text in ("I am Ana.", "Who am I?"):
        run_sync_in_a_thread(agent, text, session)
    assert model.inputs[1][0]["content"] == "I am Ana."  # the second turn read the first
    session.close()
    out = shown(capsys, db, CHAT)
    for text in ("I am Ana.", "Hello, Ana.", "Who am I?", "You are Ana."):
        assert text in out


def test_asyncio_run_again_and_again_uses_one_store(tmp_path: Path) -> None:
    session = StoreSession(CHAT, tmp_path / "conv.db")  # a Path, as SQLiteSession takes
    for n in range(3):
        asyncio.run(session.add_items([user(f"hi {n}")]))
    store = session.store
    assert asyncio.run(session.get_items()) == [user("hi 0"), user("hi 1"), user("hi 2")]
    assert session.store is store
    assert engine_threads() == 4  # one store's workers: opened once
    session.close()


async def test_the_sqlite_session_call_in_async_code(tmp_path: Path) -> None:
    db = tmp_path / "conv.db"
    session = StoreSession(session_id=CHAT, db_path=str(db))
    agent = agent_on(ScriptedModel(answer("Hi.", "m1")))
    await Runner.run(agent, "Hello", session=session, run_config=NO_TRACING)
    stored = await session.get_items()
    await session.close()  # as AsyncSQLiteSession.close
    with pytest.raises(ClosedError):
        await session.store.head(CHAT)
    async with open_store(db) as store:
        assert await StoreSession(store, CHAT).get_items() == stored
    assert [item.get("role") for item in stored] == ["user", "assistant"]


def test_the_one_line_form_on_every_kind_of_target(kind: str, store_targets: StoreTargets) -> None:
    target = store_targets.new(kind)
    session = StoreSession(CHAT, target)
    for n in range(2):  # a first use and a second, each in a thread and a loop of its own
        in_thread(lambda n=n: asyncio.run(session.add_items([user(f"hi {n}")])))
    assert asyncio.run(session.get_items()) == [user("hi 0"), user("hi 1")]
    session.close()
    if kind != "memory":  # memory:// is a new store at each open
        reader = StoreSession(CHAT, target)
        assert asyncio.run(reader.get_items()) == [user("hi 0"), user("hi 1")]
        reader.close()


def test_a_conversation_sqlite_session_stored_is_copied_over_in_one_call(tmp_path: Path) -> None:
    db = str(tmp_path / "conv.db")
    old = SQLiteSession(CHAT, db)
    items = [user("hi"), {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}]
    asyncio.run(old.add_items(items))  # type: ignore[arg-type]
    session = StoreSession(CHAT, db)  # the same file: the peer's tables stay as they are

    async def copy() -> None:
        await session.add_items(await old.get_items())

    asyncio.run(copy())
    assert asyncio.run(session.get_items()) == asyncio.run(old.get_items()) == items
    old.close()
    session.close()


def test_memory_is_the_default_and_a_store_of_each_session_own() -> None:
    default, named = StoreSession(CHAT), StoreSession(CHAT, ":memory:")
    asyncio.run(default.add_items([user("only here")]))
    assert asyncio.run(named.get_items()) == []
    assert asyncio.run(default.get_items()) == [user("only here")]
    assert isinstance(default.store, MemoryStore)
    assert repr(default) == "StoreSession('chat-1', 'memory://')"
    default.close()
    named.close()


async def test_every_form_of_the_arguments(tmp_path: Path, async_store: SessionStore) -> None:
    db = str(tmp_path / "conv.db")
    forms = [
        StoreSession(CHAT, db, "agent_sessions", "agent_messages", {"limit": 1}),
        StoreSession(CHAT, db_path=db, session_settings={"limit": 1}),
        StoreSession(session_id=CHAT, db_path=db, session_settings={"limit": 1}),
    ]
    await forms[0].add_items([user("a"), user("b")])
    for session in forms:
        assert await session.get_items() == [user("b")]
        await session.close()
    given = [
        StoreSession(async_store, CHAT),
        StoreSession(async_store, session_id=CHAT),
        StoreSession(store=async_store, session_id=CHAT, session_settings={"limit": 1}),
    ]
    await given[0].add_items([user("c")])
    for session in given:
        assert session.store is async_store
        assert await session.get_items() == [user("c")]
        await session.close()
    assert await async_store.head(CHAT) == CHAT  # a given store stays open


def test_arguments_that_fit_neither_form_are_refused(tmp_path: Path) -> None:
    db = str(tmp_path / "conv.db")
    with pytest.raises(ConfigurationError, match=r"sessions_table='mine'.*leave it out"):
        StoreSession(CHAT, db, sessions_table="mine")
    with pytest.raises(ConfigurationError, match=r"messages_table='mine'"):
        StoreSession(CHAT, db, "agent_sessions", "mine")
    with pytest.raises(TypeError, match=r"the first argument is a store, or the session id"):
        StoreSession(tmp_path / "conv.db", CHAT)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match=r"missing a required argument: 'session_id'"):
        StoreSession()  # type: ignore[call-overload]
    with pytest.raises(
        TypeError, match=r"StoreSession\(store.*unexpected keyword argument 'db_path'"
    ):
        StoreSession(MemoryStore(), CHAT, db_path=db)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match=r"db_path is a path or a store target"):
        StoreSession(CHAT, 42)  # type: ignore[call-overload]
    assert not Path(db).exists()


def test_close_before_first_use_opens_nothing(tmp_path: Path) -> None:
    db = tmp_path / "conv.db"
    session = StoreSession(CHAT, str(db))
    session.close()
    with pytest.raises(ClosedError, match="StoreSession is closed"):
        asyncio.run(session.get_items())
    with pytest.raises(ClosedError):
        session.store  # noqa: B018 (nothing opens after a close)
    session.close()  # twice is fine
    assert not db.exists()


def test_close_from_blocking_code_closes_the_store_before_it_returns(tmp_path: Path) -> None:
    session = StoreSession(CHAT, str(tmp_path / "conv.db"))
    asyncio.run(session.add_items([user("hi")]))
    store = session.store
    session.close()  # as SQLiteSession.close
    with pytest.raises(ClosedError):
        asyncio.run(store.head(CHAT))
    with pytest.raises(ClosedError, match="StoreSession is closed"):
        asyncio.run(session.get_items())


def test_a_close_not_awaited_in_async_code_still_closes(tmp_path: Path) -> None:
    session = StoreSession(CHAT, str(tmp_path / "conv.db"))

    async def main() -> SessionStore:
        await session.add_items([user("hi")])
        session.close()  # SQLiteSession's habit, in async code: not awaited
        return session.store

    store = asyncio.run(main())  # its end waits for the close, begun in a worker thread
    with pytest.raises(ClosedError):
        asyncio.run(store.head(CHAT))


def test_sessions_made_and_dropped_unclosed_leave_no_store_open(tmp_path: Path) -> None:
    db = str(tmp_path / "conv.db")
    before = engine_threads()
    for n in range(10):  # a session per request, never closed, as SQLiteSession allows
        session = StoreSession(CHAT, db)
        asyncio.run(session.add_items([user(f"request {n}")]))
    store = session.store
    del session
    gc.collect()
    assert engine_threads() == before  # each store closed when its session went
    with pytest.raises(ClosedError):
        asyncio.run(store.head(CHAT))
    reader = StoreSession(CHAT, db)
    assert len(asyncio.run(reader.get_items())) == 10
    reader.close()


def test_first_uses_in_two_threads_at_once_open_one_store(tmp_path: Path) -> None:
    session = StoreSession(CHAT, str(tmp_path / "conv.db"))
    start = threading.Barrier(2)

    def first_use() -> None:
        start.wait()
        asyncio.run(session.add_items([user(threading.current_thread().name)]))

    threads = [threading.Thread(target=first_use) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(asyncio.run(session.get_items())) == 2
    assert engine_threads() == 4
    session.close()


def test_open_made_sessions_close_their_store_as_before(tmp_path: Path) -> None:
    async def opened() -> StoreSession:
        return await StoreSession.open(tmp_path / "conv.db", CHAT)

    session = asyncio.run(opened())
    asyncio.run(session.add_items([user("hi")]))
    session.close()
    with pytest.raises(ClosedError):
        asyncio.run(session.store.head(CHAT))


# ================================================================ LangChain


def test_the_sql_history_call_works_blocking_and_async_and_the_cli_reads_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "conv.db"
    history = SessionStoreChatMessageHistory(session_id=CHAT, connection=f"sqlite:///{db}")
    assert not db.exists()
    history.add_messages([HumanMessage("I am Ana."), AIMessage("Hello, Ana.")])

    async def turn(text: str) -> int:
        await history.aadd_messages([HumanMessage(text)])
        return len(await history.aget_messages())

    assert asyncio.run(turn("Who am I?")) == 3  # asyncio.run twice in a row, on one store
    assert asyncio.run(turn("Still there?")) == 4
    in_thread(lambda: history.add_messages([AIMessage("Yes.")]))
    assert [message.content for message in history.messages][-1] == "Yes."
    history.close()
    with open_sync_store(db) as store:
        session_id = store.head(CHAT)
    assert session_id is not None
    out = shown(capsys, db, session_id)
    for text in ("I am Ana.", "Hello, Ana.", "Who am I?", "Still there?", "Yes."):
        assert text in out


def test_a_chain_with_a_history_per_call_by_connection(tmp_path: Path) -> None:
    db = str(tmp_path / "conv.db")
    histories: list[SessionStoreChatMessageHistory] = []

    def history(session_id: str) -> SessionStoreChatMessageHistory:
        histories.append(SessionStoreChatMessageHistory(session_id=session_id, connection=db))
        return histories[-1]

    model = FakeListChatModel(responses=["Hello, Ana!", "You are Ana."])
    chain = RunnableWithMessageHistory(model, history)
    config: Any = {"configurable": {"session_id": CHAT}}
    chain.invoke("I am Ana.", config)
    assert asyncio.run(chain.ainvoke("Who am I?", config)).content == "You are Ana."
    assert [message.content for message in histories[-1].messages] == [
        "I am Ana.", "Hello, Ana!", "Who am I?", "You are Ana.",
    ]  # fmt: skip
    for each in histories:
        each.close()


def test_every_form_of_the_history_arguments(tmp_path: Path) -> None:
    db = tmp_path / "conv.db"
    url = f"sqlite:///{db}"
    SessionStoreChatMessageHistory(session_id=CHAT, connection=url).add_messages(
        [HumanMessage("hi")]
    )
    forms = [
        SessionStoreChatMessageHistory(CHAT, url),  # connection_string, by position
        SessionStoreChatMessageHistory(session_id=CHAT, connection_string=url),
        SessionStoreChatMessageHistory(session_id=CHAT, connection=str(db)),
        SessionStoreChatMessageHistory(session_id=CHAT, connection=db),
        SessionStoreChatMessageHistory(session_id=CHAT, connection=create_engine(url)),
        SessionStoreChatMessageHistory(
            session_id=CHAT, connection=create_async_engine(f"sqlite+aiosqlite:///{db}")
        ),
        SessionStoreChatMessageHistory(session_id=CHAT, connection=url, async_mode=True),
        SessionStoreChatMessageHistory(
            CHAT, None, "message_store", "session_id", None, url, None, False
        ),
    ]
    for history in forms:
        assert [message.content for message in history.messages] == ["hi"]
        assert [message.content for message in asyncio.run(history.aget_messages())] == ["hi"]
        history.close()
    with open_sync_store(db) as store:
        for given in (
            SessionStoreChatMessageHistory(store, CHAT),
            SessionStoreChatMessageHistory(store=store, name=CHAT),
        ):
            assert [message.content for message in given.messages] == ["hi"]
            given.close()
        assert store.head(CHAT) is not None  # a given store stays open


def test_the_history_form_on_every_kind_of_target(kind: str, store_targets: StoreTargets) -> None:
    target = store_targets.new(kind)
    history = SessionStoreChatMessageHistory(session_id=CHAT, connection=target)
    in_thread(lambda: history.add_messages([HumanMessage("hi")]))
    asyncio.run(history.aadd_messages([AIMessage("hello")]))
    assert [message.content for message in history.messages] == ["hi", "hello"]
    history.close()
    if kind != "memory":
        reader = SessionStoreChatMessageHistory(session_id=CHAT, connection=target)
        assert [message.content for message in reader.messages] == ["hi", "hello"]
        reader.close()


def test_an_in_memory_url_is_a_store_of_each_history_own() -> None:
    one = SessionStoreChatMessageHistory(session_id=CHAT, connection="sqlite:///:memory:")
    other = SessionStoreChatMessageHistory(session_id=CHAT, connection="sqlite://")
    one.add_messages([HumanMessage("only here")])
    assert other.messages == []
    assert repr(one) == "SessionStoreChatMessageHistory('chat-1', 'memory://')"
    one.close()
    other.close()


def test_history_arguments_that_fit_neither_form_are_refused(tmp_path: Path) -> None:
    db = str(tmp_path / "conv.db")
    for peer_only in (
        {"table_name": "mine"},
        {"session_id_field_name": "user"},
        {"custom_message_converter": object()},
        {"engine_args": {"echo": True}},
    ):
        (argument,) = peer_only
        with pytest.raises(ConfigurationError, match=rf"{argument}=.*leave it out"):
            SessionStoreChatMessageHistory(session_id=CHAT, connection=db, **peer_only)
    with pytest.raises(TypeError, match="needs connection="):
        SessionStoreChatMessageHistory(session_id=CHAT)
    with pytest.raises(TypeError, match="connection or connection_string, not both"):
        SessionStoreChatMessageHistory(session_id=CHAT, connection=db, connection_string=db)
    with pytest.raises(TypeError, match="connection is a store target"):
        SessionStoreChatMessageHistory(session_id=CHAT, connection=42)
    with pytest.raises(ConfigurationError, match="in-memory engine"):
        SessionStoreChatMessageHistory(session_id=CHAT, connection=create_engine("sqlite://"))
    with pytest.raises(TypeError, match="the first argument is a store"):
        SessionStoreChatMessageHistory(Path(db), CHAT)  # type: ignore[call-overload]
    assert not Path(db).exists()


def test_a_history_close_closes_the_store_it_opened_and_ends_the_history(tmp_path: Path) -> None:
    history = SessionStoreChatMessageHistory(session_id=CHAT, connection=str(tmp_path / "c.db"))
    history.add_messages([HumanMessage("hi")])
    store = history.store
    history.close()
    with pytest.raises(ClosedError):
        store.head(CHAT)
    with pytest.raises(ClosedError, match="SessionStoreChatMessageHistory is closed"):
        history.messages  # noqa: B018
    with pytest.raises(ClosedError):
        asyncio.run(history.aget_messages())
    history.close()  # twice is fine


def test_histories_dropped_unclosed_leave_no_store_open(tmp_path: Path) -> None:
    db = str(tmp_path / "conv.db")
    before = engine_threads()
    for n in range(5):
        history = SessionStoreChatMessageHistory(session_id=CHAT, connection=db)
        history.add_messages([HumanMessage(f"request {n}")])
    del history
    gc.collect()
    assert engine_threads() == before
