"""The frameworks part of the benchmark: each adapter of
``sessionstore.integrations`` against the framework's own session, through
the framework's own calls, side by side in one run.

Every row is timed round by round, ours then theirs, and is the median of
the rounds (3; with --quick, 1, at 100 and 1,000 items only). A call is
timed on one long-lived adapter object, as an agent's runner keeps one
across turns (after a first call, so that the row is the steady state), as
the mean of calls in a row until the round's budget of time is spent (50
ms; 1 s for turns, so that the collector's full passes, which a turn's
allocations bring every few turns at 10,000 items, land in every round as
they do in an agent's loop, and not in one round in three); one
row times the first call on a new object instead, so that no cache of ours
can hide a cold read. Items are
the benchmark's texts (benchmarks/messages.py, some 260 bytes), users and
assistants in turn; both sides are filled with the same ones, in batches
of 5,000 through the framework's own call. The peers' SQLite runs on WAL
with synchronous=NORMAL, as ours does.

- openai-agents: `StoreSession` on a SQLite store against ``SQLiteSession``
  (a file), at 100, 1,000 and 10,000 items: ``get_items()``,
  ``get_items(limit=20)`` (at 100,000 items too), a turn as the Runner
  takes one (``get_items()``, then ``add_items`` of a user and an assistant
  item), ``add_items`` of one item, and the first ``get_items()`` on a new
  object at 10,000 (ours on the same store, its caches dropped first).
  Then the same against ``SQLAlchemySession``, our store and theirs on one
  PostgreSQL server, when ``SESSIONSTORE_PG_URL`` names one.
- LangChain: `SessionStoreChatMessageHistory` on a `SyncStore` against
  ``SQLChatMessageHistory`` on a sync engine, at 100, 1,000 and 5,000
  messages: ``.messages``, and a turn (``.messages``, then
  ``add_messages`` of a human and an AI message). Each history has a
  database of its own (theirs has no index on its session column).
- pydantic-ai: a turn (``load_history``, then ``save_messages`` of a
  ``ModelRequest`` and a ``ModelResponse``) at 100 and 10,000 messages,
  against pydantic-ai's own ``ConversationStore`` where it has one: its
  only backend is ``InMemoryConversationStore`` (in memory, not durable;
  its ``load`` copies every entry), so that row is for reference.
- A table of the same work at the longest history against the shortest:
  flat is 1.00x.

The targets (ratios that would mean the adapters cost little beside the
frameworks' own sessions) are in the rows' names. A turn's history grows
by two items; each round of turns on SQLite runs on a new copy of the
prefilled database, so it starts at its size and grows by at most a tenth.
On PostgreSQL the turns run on one conversation per size, which grows as
much each round (both sides alike); each run fills conversations of its
own there, and drops the peer's tables at its end (ours stay, as the
postgres part's sessions do). The prefilled SQLite databases are
made once per process, in the directory the runs share, and copied.

Google ADK's session services are a part of their own (``--only adk``,
benchmarks/frameworks/adk.py).

``store.load`` of 100,000 entries against ``SQLiteSession.get_items()`` is
in the peers part, not here.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from results import Table

from sessionstore import SqlStore

from .adk import through_adk
from .base import Figures, Plan, Templates
from .langchain import langchain
from .openai_agents import OnPostgres, OnSqlite, openai_agents
from .pydantic_ai import pydantic_ai

__all__ = ["adk_part", "frameworks"]

_templates: dict[Path, Templates] = {}  # by the directory the runs share


def installed(*modules: str) -> bool:
    return all(importlib.util.find_spec(module) is not None for module in modules)


async def frameworks(work: Path, kept: Path, quick: bool) -> list[Table]:
    """The part's tables: one per framework and store, then the flat rows.
    A framework that is not installed is skipped, saying so.

    Args:
        work: this run's directory.
        kept: the directory the runs share (the prefilled databases).
        quick: small sizes, one round.
    """
    plan = Plan.of(quick)
    work = work / "frameworks"
    work.mkdir()
    templates = _templates.setdefault(kept, Templates(kept))
    grows = Table("through the frameworks: as the history grows", "long history", "short history")
    tables: list[Table] = []

    def flat(ours: str, theirs: str, by_size: dict[int, Figures], unit: str, target: str) -> None:
        """Each side at its longest history against itself at its shortest."""
        short, long = min(by_size), max(by_size)
        sizes = f"{long:,} vs {short:,} {unit}"
        grows.add(f"{ours}, {sizes} (target ≤{target})", by_size[long][0], by_size[short][0])
        grows.add(f"{theirs}, {sizes}, for reference", by_size[long][1], by_size[short][1])

    limit = "get_items(limit=20)"
    if not installed("agents"):
        print("\n(frameworks: openai-agents skipped: pip install -e '.[bench]')")
    else:
        table = Table(
            "through the frameworks: openai-agents on SQLite", "StoreSession", "SQLiteSession"
        )
        limited = await openai_agents(OnSqlite(work, templates), plan, table)
        tables.append(table)
        flat(f"StoreSession {limit}", f"SQLiteSession {limit}", limited, "items", "1.3x")
        url = os.environ.get("SESSIONSTORE_PG_URL")
        if url:
            table = Table(
                "through the frameworks: openai-agents on PostgreSQL",
                "StoreSession",
                "SQLAlchemySession",
            )
            async with await SqlStore.open(url) as store:
                on_postgres = OnPostgres(url, store)
                try:
                    await on_postgres.peer.create_tables()
                    limited = await openai_agents(on_postgres, plan, table)
                finally:
                    await on_postgres.peer.close()
            tables.append(table)
            ours, theirs = f"StoreSession {limit}, PostgreSQL", f"SQLAlchemySession {limit}"
            flat(ours, f"{theirs}, PostgreSQL", limited, "items", "1.3x")
        else:
            print("\n(frameworks on PostgreSQL skipped: set SESSIONSTORE_PG_URL to a server)")
    if not installed("langchain_community", "langchain_core"):
        print("\n(frameworks: LangChain skipped: pip install -e '.[bench]')")
    else:
        table = Table(
            "through the frameworks: LangChain, sync, on SQLite", "sessionstore", "LangChain"
        )
        turns = await langchain(work, templates, plan, table)
        tables.append(table)
        flat("our LangChain turn", "SQLChatMessageHistory's turn", turns, "messages", "2x")
    if not installed("pydantic_ai"):
        print("\n(frameworks: pydantic-ai skipped: pip install -e '.[pydantic-ai]')")
    else:
        table = Table(
            "through the frameworks: pydantic-ai on SQLite, vs its InMemoryConversationStore "
            "(in memory, not durable)",
            "sessionstore",
            "pydantic-ai",
        )
        ours_turns = await pydantic_ai(work, templates, plan, table)
        if table.rows:
            tables.append(table)
        short, long = min(ours_turns), max(ours_turns)
        name = f"our pydantic-ai turn (MessageHistories), {long:,} vs {short:,} messages"
        grows.add(f"{name} (target ≤2x)", ours_turns[long], ours_turns[short])
    return [*tables, grows]


async def adk_part(work: Path, kept: Path, quick: bool) -> list[Table]:
    """The ADK part's tables (benchmarks/frameworks/adk.py), on the prefilled
    databases the runs share; skipped, saying so, when ADK is not installed."""
    if not installed("google.adk"):
        print("\n(adk skipped: pip install google-adk)")
        return []
    work = work / "adk"
    work.mkdir()
    return await through_adk(work, _templates.setdefault(kept, Templates(kept)), quick)
