"""The peers the benchmark compares with, when the ``bench`` extra is installed:
openai-agents' SQLiteSession and LangChain's SQLChatMessageHistory (async, on
aiosqlite), both on WAL with synchronous=NORMAL, as sessionstore is; and
openai-agents' SQLAlchemySession on PostgreSQL, for the PostgreSQL part.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agents import TResponseInputItem


class Peer:
    """Another session store, doing the benchmark's appends and loads."""

    async def appends(self, path: Path, texts: list[str]) -> float:
        """Seconds per append of one message."""
        raise NotImplementedError

    async def fill(self, path: Path, texts: list[str]) -> None:
        raise NotImplementedError

    async def load(self, path: Path) -> float:
        """Seconds to load every message of the session ``fill`` made."""
        raise NotImplementedError


def find_peers() -> dict[str, Peer]:
    found: dict[str, Peer] = {}
    with contextlib.suppress(ImportError):
        found["openai-agents SQLiteSession"] = OpenAIAgents()
    with contextlib.suppress(ImportError):
        found["LangChain SQLChatMessageHistory"] = LangChain()
    return found


def _item(text: str) -> TResponseInputItem:
    """A user message as openai-agents' sessions store it (an input item)."""
    return {"role": "user", "content": text}


class OpenAIAgents(Peer):
    def __init__(self) -> None:
        from agents import SQLiteSession

        class Session(SQLiteSession):  # type: ignore[misc,unused-ignore]
            @staticmethod
            def _configure_connection(conn: sqlite3.Connection) -> None:
                SQLiteSession._configure_connection(conn)
                conn.execute("PRAGMA synchronous=NORMAL")

        self.session = Session

    async def appends(self, path: Path, texts: list[str]) -> float:
        session = self.session("s", path)
        start = time.perf_counter()
        for text in texts:
            await session.add_items([_item(text)])
        elapsed = time.perf_counter() - start
        session.close()
        return elapsed / len(texts)

    async def fill(self, path: Path, texts: list[str]) -> None:
        session = self.session("s", path)
        for start in range(0, len(texts), 5000):
            chunk = texts[start : start + 5000]
            await session.add_items([_item(text) for text in chunk])
        session.close()

    async def load(self, path: Path) -> float:
        session = self.session("s", path)
        start = time.perf_counter()
        await session.get_items()
        elapsed = time.perf_counter() - start
        session.close()
        return elapsed


class OpenAIAgentsOnPostgres:
    """openai-agents' SQLAlchemySession on a PostgreSQL server (an async engine
    on the URL's driver), in tables of its own: names new to each instance,
    made by `create_tables`, dropped by `close`."""

    def __init__(self, url: str) -> None:
        from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession
        from sqlalchemy.ext.asyncio import create_async_engine

        self.session, self.engine = SQLAlchemySession, create_async_engine(url)
        suffix = uuid.uuid4().hex[:8]
        self.sessions = f"bench_agent_sessions_{suffix}"
        self.messages = f"bench_agent_messages_{suffix}"

    def open(self, session_id: str, create_tables: bool = False) -> Any:
        return self.session(
            session_id,
            engine=self.engine,
            create_tables=create_tables,
            sessions_table=self.sessions,
            messages_table=self.messages,
        )

    async def create_tables(self) -> None:
        """Its tables and index, once: a session asked to create them does so
        on its first call, which the timed ones then need not repeat."""
        await self.open("tables", create_tables=True).get_items()

    async def appends(self, texts: list[str]) -> float:
        """Seconds per append of one message, to a new session."""
        session = self.open(uuid.uuid4().hex)
        start = time.perf_counter()
        for text in texts:
            await session.add_items([_item(text)])
        return (time.perf_counter() - start) / len(texts)

    async def fill(self, session_id: str, texts: list[str]) -> None:
        session = self.open(session_id)
        for start in range(0, len(texts), 5000):
            await session.add_items([_item(text) for text in texts[start : start + 5000]])

    async def load(self, session_id: str) -> float:
        """Seconds to load every message of the session ``fill`` made."""
        session = self.open(session_id)
        start = time.perf_counter()
        await session.get_items()
        return time.perf_counter() - start

    async def close(self) -> None:
        """Drop its tables (the index goes with them), then the engine."""
        import sqlalchemy

        async with self.engine.begin() as connection:
            await connection.execute(
                sqlalchemy.text(f"DROP TABLE IF EXISTS {self.messages}, {self.sessions}")
            )
        await self.engine.dispose()


class LangChain(Peer):
    def __init__(self) -> None:
        from langchain_community.chat_message_histories import SQLChatMessageHistory
        from langchain_core.messages import HumanMessage

        self.history, self.message = SQLChatMessageHistory, HumanMessage

    def open(self, path: Path) -> Any:
        from sqlalchemy import event
        from sqlalchemy.ext.asyncio import create_async_engine

        engine = create_async_engine(f"sqlite+aiosqlite:///{path}")

        @event.listens_for(engine.sync_engine, "connect")
        def pragmas(connection: Any, record: Any) -> None:
            cursor = connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.close()

        return self.history("s", connection=engine), engine

    async def appends(self, path: Path, texts: list[str]) -> float:
        history, engine = self.open(path)
        await history.aadd_messages([self.message(content="first")])  # creates the table
        start = time.perf_counter()
        for text in texts:
            await history.aadd_messages([self.message(content=text)])
        elapsed = time.perf_counter() - start
        await engine.dispose()
        return elapsed / len(texts)

    async def fill(self, path: Path, texts: list[str]) -> None:
        history, engine = self.open(path)
        for start in range(0, len(texts), 5000):
            chunk = texts[start : start + 5000]
            await history.aadd_messages([self.message(content=text) for text in chunk])
        await engine.dispose()

    async def load(self, path: Path) -> float:
        history, engine = self.open(path)
        start = time.perf_counter()
        await history.aget_messages()
        elapsed = time.perf_counter() - start
        await engine.dispose()
        return elapsed
