"""The peers the benchmark compares with, when the ``bench`` extra is installed:
openai-agents' SQLiteSession and LangChain's SQLChatMessageHistory (async, on
aiosqlite), both on WAL with synchronous=NORMAL, as sessionstore is.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from pathlib import Path
from typing import Any


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
            await session.add_items([{"role": "user", "content": text}])
        elapsed = time.perf_counter() - start
        session.close()
        return elapsed / len(texts)

    async def fill(self, path: Path, texts: list[str]) -> None:
        session = self.session("s", path)
        for start in range(0, len(texts), 5000):
            chunk = texts[start : start + 5000]
            await session.add_items([{"role": "user", "content": text} for text in chunk])
        session.close()

    async def load(self, path: Path) -> float:
        session = self.session("s", path)
        start = time.perf_counter()
        await session.get_items()
        elapsed = time.perf_counter() - start
        session.close()
        return elapsed


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
