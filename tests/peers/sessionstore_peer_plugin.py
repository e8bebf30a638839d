"""A pytest plugin that runs a framework's own tests on our adapter.

``tests/integrations/test_peer_suites.py`` runs a peer's test files (which
`tests.peers.fetch` extracts from its sdist) in a pytest subprocess with
``-p sessionstore_peer_plugin``, this directory on ``PYTHONPATH`` and:

- ``SESSIONSTORE_PEER``: ``openai-agents`` or ``langchain-core``;
- ``SESSIONSTORE_PEER_KIND``: the kind of store our adapter is built on,
  ``sqlite`` (`RUN`), or ``memory`` or ``jsonl`` by hand (`KINDS`);
- ``SESSIONSTORE_PEER_REPORT`` (optional): where to write each test's
  outcome as JSON, for the runner to count.

Before the test files are imported, the peer's classes are replaced where
the tests import them from by stand-ins: subclasses of our adapter that take
the peer's constructor arguments and change nothing else. ``SQLiteSession``,
``AsyncSQLiteSession`` and ``SQLAlchemySession`` become `StoreSession`;
``InMemoryChatMessageHistory`` becomes `SessionStoreChatMessageHistory`. The
test bodies run unchanged on our adapter.

Everything left out or skipped is listed once, below: `FILES` (what
runs), `LEFT_OUT` (files not run) and `SKIPPED` (tests skipped by name,
with why). Every other test must pass.

A coroutine of our adapter left un-awaited (``session.close()`` called from
sync code, say) fails the test that left it.
"""

from __future__ import annotations

import asyncio
import collections
import faulthandler
import inspect
import itertools
import json
import os
import shutil
import tempfile
import threading
import uuid
from collections.abc import Coroutine, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest

PEER_ENV = "SESSIONSTORE_PEER"
KIND_ENV = "SESSIONSTORE_PEER_KIND"
REPORT_ENV = "SESSIONSTORE_PEER_REPORT"

KINDS = ("memory", "sqlite", "jsonl")
"""The store kinds our adapters can be built on here."""

RUN = ("sqlite",)
"""The kinds the test suite runs the peers' tests on: SQLite, the default.
What a peer's tests check is its protocol, which the adapters meet through
the store's own; that the store's protocol holds on every backend is the
contract suite's to show (tests/contract), so a run on another kind
repeated these ~500 tests for nothing new (and PostgreSQL would need a
server of its own). The other kinds run by hand."""

PEERS = ("openai-agents", "langchain-core")

TEST_TIMEOUT = 300.0
"""Seconds a test may take before the run is ended, every thread's traceback
written to ``<report>.timeout`` (pytest captures the standard error)."""

_BUILT: collections.Counter[str] = collections.Counter()
"""How many objects of our adapter each stand-in built: none means the
peer's tests no longer reach the names the stand-ins replace."""


# ================================================================ the one place

FILES: dict[str, tuple[str, ...]] = {
    "openai-agents": (
        "tests/memory/test_session.py",
        "tests/memory/test_session_limit.py",
        "tests/memory/test_compaction_model_visibility.py",
        "tests/memory/test_compaction_suffix.py",
        "tests/memory/test_openai_responses_compaction_session.py",
        "tests/extensions/memory/test_async_sqlite_session.py",
        "tests/extensions/memory/test_sqlalchemy_session.py",
        "tests/extensions/memory/test_encrypt_session.py",
    ),
    "langchain-core": (
        "tests/unit_tests/chat_history/test_chat_history.py",
        "tests/unit_tests/runnables/test_history.py",
    ),
}
"""The peer's test files run on our adapter, relative to its sdist."""

SESSION_DIRS: dict[str, tuple[str, ...]] = {
    "openai-agents": ("tests/memory", "tests/extensions/memory"),
    "langchain-core": ("tests/unit_tests/chat_history",),
}
"""The peer's directories of session tests: each file there runs, or is left out."""

LEFT_OUT: dict[str, dict[str, str]] = {
    "openai-agents": {
        "tests/memory/test_openai_conversations_session.py": (
            "OpenAIConversationsSession: history kept by the OpenAI conversations API"
        ),
        "tests/extensions/memory/test_redis_session.py": "RedisSession: needs a Redis server",
        "tests/extensions/memory/test_dapr_session.py": "DaprSession: needs a Dapr sidecar",
        "tests/extensions/memory/test_mongodb_session.py": "MongoDBSession: needs MongoDB",
        "tests/extensions/memory/test_advanced_sqlite_session.py": (
            "AdvancedSQLiteSession's own API (branches by turn, usage accounting, its "
            "structure tables, locks across processes), which StoreSession does not offer"
        ),
        "tests/memory/test_sqlalchemy_compaction.py": (
            "every test builds SQLAlchemySession with custom table names, disposes its "
            "engine, and exercises its private _get_compaction_snapshot"
        ),
        "tests/memory/test_session_context_wrapper.py": (
            "builds no session class we stand in for (custom sessions taking a wrapper)"
        ),
        "tests/memory/test_session_persistence_sanitize.py": (
            "builds no session: a private helper that sanitizes items"
        ),
        "tests/extensions/memory/test_memory_imports.py": (
            "builds no session: the lazy imports of agents.extensions.memory"
        ),
    },
    "langchain-core": {},
}
"""Files of the peer's session directories that are not run, and why."""

_CONNECTIONS = (
    "probes SQLiteSession's own sqlite3 connections (_connections, _get_connection, "
    "_locked_connection, _connections_lock) or swaps in a connection class of its own"
)
_TABLES = (
    "reads, writes, drops or puts triggers on the peer's own SQL tables "
    "(agent_sessions, agent_messages), e.g. to store a corrupt row or probe its write lock"
)
_FILE_LOCK = "checks SQLiteSession's process-wide lock per database file (_lock, _file_lock_counts)"
_PRIVATE_OVERRIDE = (
    "subclasses or patches the peer session's private methods (_init_db_for_connection, "
    "_insert_items...), which StoreSession does not have"
)
_AIOSQLITE = "patches aiosqlite to drive AsyncSQLiteSession's connection start-up (WAL retries)"
_SQLALCHEMY = (
    "uses SQLAlchemySession's engine, session factory, table-creation locks, "
    "JSON encoding or SQL statements"
)
_SNAPSHOT = (
    "needs agents' private _get_compaction_snapshot hook (an atomic replacement of the "
    "history's suffix) that only agents' own SQL sessions have; on any other Session "
    "agents compacts only a history it read whole, and otherwise keeps it"
)
_NATIVE_POP = (
    "EncryptedSession authenticates a pop atomically only on agents' own SQLiteSession "
    "(its private _pop_item_with_validation); agents documents that other backends lack it"
)
_REDIS = "RedisSession, on fakeredis (not installed)"
_DOCSTRING = "checks the peer class's docstring (its deprecation notice), not behaviour"


def _named(reasons: dict[str, dict[str, tuple[str, ...]]]) -> dict[str, str]:
    """``{reason: {file: names}}`` as ``{"file::name": reason}``."""
    return {
        f"{file}::{name}": reason
        for reason, files in reasons.items()
        for file, names in files.items()
        for name in names
    }


_SESSION = "tests/memory/test_session.py"
_VISIBILITY = "tests/memory/test_compaction_model_visibility.py"
_SUFFIX = "tests/memory/test_compaction_suffix.py"
_COMPACTION = "tests/memory/test_openai_responses_compaction_session.py"
_ASYNC = "tests/extensions/memory/test_async_sqlite_session.py"
_ALCHEMY = "tests/extensions/memory/test_sqlalchemy_session.py"
_ENCRYPT = "tests/extensions/memory/test_encrypt_session.py"
_CLASS = "TestOpenAIResponsesCompactionSession::"
_CHAT = "tests/unit_tests/chat_history/test_chat_history.py"

SKIPPED: dict[str, dict[str, str]] = {
    "openai-agents": _named(
        {
            _CONNECTIONS: {
                _SESSION: (
                    "test_sqlite_session_close_closes_worker_thread_connections",
                    "test_sqlite_session_reaps_connections_from_exited_worker_threads",
                    "test_sqlite_session_closes_retired_connections_before_the_next_allocation",
                    "test_sqlite_session_keeps_connections_of_live_worker_threads",
                    "test_sqlite_session_rollback_failure_evicts_connection",
                    "test_sqlite_session_close_retries_quarantined_connection",
                    "test_sqlite_session_post_commit_cancellation_propagates_after_known_outcome",
                ),
                _COMPACTION: (
                    _CLASS + "test_settled_pop_failure_invalidates_response_chain",
                    _CLASS + "test_settled_clear_failure_invalidates_response_chain",
                ),
                _ASYNC: (
                    "test_cancelled_close_finishes_cleanup_and_propagates_cancellation",
                    "test_post_commit_cancellation_propagates_after_known_mutation_outcome",
                    "test_failed_add_items_rolls_back_and_reuses_connection",
                    "test_cancelled_add_items_rolls_back_write_transaction",
                    "test_operation_failure_then_cancellation_during_rollback",
                    "test_rollback_failure_closes_and_evicts_connection",
                    "test_close_retries_connection_quarantined_after_rollback_failure",
                ),
            },
            _TABLES: {
                _SESSION: (
                    "test_sqlite_session_pop_item_skips_corrupt_most_recent",
                    "test_sqlite_session_pop_item_returns_none_after_dropping_only_corrupt_rows",
                    "test_sqlite_session_get_items_limit_skips_corrupt_newest_rows",
                    "test_sqlite_session_get_items_session_settings_limit_skips_corrupt_rows",
                    "test_sqlite_session_failed_add_items_releases_write_lock",
                    "test_sqlite_session_failed_clear_session_rolls_back",
                    "test_sqlite_session_failed_pop_item_releases_write_lock",
                ),
                _SUFFIX: (
                    "test_suffix_transaction_rolls_back_failed_insert",
                    "test_failed_encrypted_suffix_transaction_preserves_original_tokens",
                ),
                _ASYNC: (
                    "test_async_sqlite_session_pop_item_skips_corrupt_most_recent",
                    "test_async_sqlite_session_pop_item_returns_none_after_dropping_only_corrupt_rows",
                    "test_async_sqlite_session_get_items_limit_skips_corrupt_newest_rows",
                    "test_async_sqlite_session_get_items_same_timestamp_consistent_order",
                    "test_async_sqlite_session_pop_item_same_timestamp_returns_latest",
                    "test_failed_clear_session_rolls_back",
                    "test_failed_pop_item_releases_write_lock",
                ),
                _ENCRYPT: (
                    "test_encrypted_pop_authentication_is_atomic_with_concurrent_mutations",
                    "test_encrypted_pop_wrong_key_preserves_row_identity",
                ),
            },
            _FILE_LOCK: {_SESSION: ("test_sqlite_session_file_lock_is_shared_across_instances",)},
            _PRIVATE_OVERRIDE: {
                _SUFFIX: ("test_cancelled_suffix_transaction_settles_before_newer_append",),
                _ASYNC: (
                    "test_failed_initialization_closes_candidate_connection",
                    "test_initialization_releases_wal_cursor_before_schema_write",
                    "test_close_retries_quarantined_failed_initialization_candidate",
                    "test_cancelled_initialization_finishes_candidate_close",
                    "test_initialization_failure_then_cancellation_during_candidate_close",
                ),
            },
            _AIOSQLITE: {
                _ASYNC: (
                    "test_initialization_retries_transient_wal_lock",
                    "test_initialization_does_not_retry_unrecoverable_wal_errors",
                    "test_cancelled_wal_retry_closes_startup_connection",
                    "test_cancelled_connect_closes_eventually_acquired_connection",
                ),
            },
            _SQLALCHEMY: {
                _ALCHEMY: (
                    "test_sqlalchemy_session_defaults_to_escaped_non_ascii_storage",
                    "test_sqlalchemy_session_can_store_non_ascii_without_escaping",
                    "test_sqlite_fallback_reserves_writer_before_tail_claim",
                    "test_pop_item_supports_unknown_delete_rowcount",
                    "test_pop_item_retries_returning_claim_lost_to_concurrent_delete",
                    "test_mutation_cancellation_waits_for_transaction_exit",
                    "test_pop_item_skips_corrupt_most_recent",
                    "test_get_items_limit_skips_corrupt_newest_rows",
                    "test_pop_item_returns_none_after_dropping_only_corrupt_rows",
                    "test_add_items_waits_for_transient_sqlite_write_lock",
                    "test_add_items_concurrent_first_access_across_from_url_sessions",
                    "test_add_items_concurrent_first_access_across_from_url_sessions_cross_loop",
                    "test_add_items_concurrent_first_access_with_shared_session_cross_loop",
                    "test_add_items_cancelled_waiter_does_not_strand_table_init_lock",
                    "test_create_tables_false_does_not_allocate_shared_init_lock",
                    "test_get_items_same_timestamp_consistent_order",
                    "test_pop_item_same_timestamp_returns_latest",
                    "test_get_items_orders_by_id_for_ties",
                    "test_engine_property_from_url",
                    "test_engine_property_from_external_engine",
                    "test_engine_property_is_read_only",
                    "test_sqlite_configuration_registry_releases_collected_engines",
                    "test_sqlite_configuration_registry_does_not_grow_unbounded",
                ),
                _ENCRYPT: ("test_encrypted_pop_preserves_sqlalchemy_history",),
            },
            _SNAPSHOT: {
                _VISIBILITY: (
                    "test_backend_read_limit_cannot_hide_retained_history_from_compaction",
                    "test_automatic_compaction_does_not_reload_unbounded_hidden_history",
                    "test_expired_read_overhead_does_not_authorize_hidden_history",
                ),
                _SUFFIX: (
                    "test_expired_prefix_does_not_block_full_live_window",
                    "test_new_backend_write_invalidates_snapshot",
                    "test_repeated_ttl_bursts_do_not_accumulate_expired_rows",
                    "test_prefix_cleanup_stops_before_retained_history",
                    "test_partial_compaction_does_not_split_tool_call_and_output",
                    "test_unverifiable_rows_inside_snapshot_are_retained",
                    "test_partial_compaction_preserves_reasoning_and_its_follower",
                ),
                _COMPACTION: (_CLASS + "test_automatic_compaction_rollback_budget",),
                _ENCRYPT: ("test_encrypted_compaction_skips_unencrypted_stored_history",),
            },
            _NATIVE_POP: {
                _ENCRYPT: (
                    "test_encrypted_pop_wrong_key_preserves_recoverable_history",
                    "test_encrypted_pop_rechecks_authentication_after_expired_tail",
                    "test_encrypted_pop_cancellation_waits_for_authentication_rollback",
                ),
            },
            _REDIS: {
                _ENCRYPT: (
                    "test_encrypted_session_scan_budget_does_not_turn_redis_negative_limit_into_history",
                ),
            },
        }
    ),
    "langchain-core": _named(
        {
            _DOCSTRING: {
                _CHAT: ("test_chat_history_deprecated",),
            },
        }
    ),
}
"""Tests skipped by name (``file::function``, every parametrization), and why."""


SYNC_STORE_FOR: dict[str, dict[str, str]] = {
    "openai-agents": {},
    "langchain-core": {
        f"{_CHAT}::test_in_memory_history_initialization": (
            "an async test that also reads history.messages, a blocking call: on an async "
            "store our history refuses blocking calls by design (ConfigurationError, "
            "docs/integrations.md), so it runs on a SyncStore, which serves both"
        ),
    },
}
"""Async tests whose histories are built on a `SyncStore` anyway, and why
(the others get an async store; a sync test always gets a `SyncStore`)."""


_ADAPTERS = r"(StoreSession|SessionStoreChatMessageHistory)\."


UNAWAITED_FILTERS = (
    f"error:coroutine '{_ADAPTERS}.* was never awaited:RuntimeWarning",
    f"error:Exception ignored in. <coroutine object {_ADAPTERS}:"
    "pytest.PytestUnraisableExceptionWarning",
)
"""Filters that fail a test leaving a coroutine of our adapters un-awaited."""


# ================================================================ stores

_T = TypeVar("_T")


class _Helper:
    """An event loop in a daemon thread of its own, for the plugin's blocking calls.

    One thread for the whole run: a store used from threads that come and
    go (each with an event loop of its own) is a case of its own, which
    the plugin's glue must not add to the peer's tests.
    """

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, name="peer-plugin", daemon=True).start()


_HELPER: _Helper | None = None


def blocking(call: Coroutine[Any, Any, _T]) -> _T:
    """Run a coroutine on the plugin's helper loop and wait for it: callable
    from sync code, and from code running inside another event loop."""
    global _HELPER
    if _HELPER is None:
        _HELPER = _Helper()
    return asyncio.run_coroutine_threadsafe(call, _HELPER.loop).result()


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


class Stores:
    """Stores of one kind, one per database the peer's tests name.

    Sessions the peer's tests open on one database path share a store
    (`get`), as two ``SQLiteSession`` on one file share its tables, or each
    open one of their own on the path's stand-in (`own`), as two
    ``SQLiteSession`` each open connections of their own; each session on
    ``:memory:`` (or ``None``) gets a new one, as in the peer. The stores
    (and sessions) opened during a test are closed after it; the others at
    the end.
    """

    def __init__(self, kind: str) -> None:
        if kind not in KINDS:
            raise pytest.UsageError(f"{KIND_ENV}={kind!r}: the kinds are {KINDS}")
        self.kind = kind
        self.root = Path(tempfile.mkdtemp(prefix=f"sessionstore-peer-{kind}-"))
        self._named: dict[tuple[bool, str], Any] = {}
        self._opened: list[Any] = []
        self._count = itertools.count(1)

    def new_path(self, name: str) -> str:
        """A new database path of the run's own, for a store no test names."""
        return str(self.root / f"{name}-{next(self._count)}")

    def target(self, database: str) -> str:
        """The store target standing for a peer's database path."""
        if self.kind == "memory":
            return "memory://"
        base = Path(database)
        if self.kind == "jsonl":
            return str(base.with_name(base.name + ".sessionstore-jsonl"))
        return f"sqlite:///{base.with_name(base.name + '.sessionstore.db')}"

    def get(self, database: str | os.PathLike[str] | None, *, sync: bool = False) -> Any:
        """The store standing for ``database``: async, or a `SyncStore`."""
        if database is None or str(database) == ":memory:":
            return self._open(self.new_path("memory"), sync=sync)
        key = (sync, str(Path(database).expanduser().resolve()))
        if key not in self._named:
            self._named[key] = self._open(key[1], sync=sync)
        return self._named[key]

    def _open(self, database: str, *, sync: bool) -> Any:
        target = self.target(database)
        if sync:
            from sessionstore.sync import open_store as open_sync_store

            store = open_sync_store(target)
        else:
            from sessionstore import open_store

            async def opened() -> Any:
                return await open_store(target)

            store = blocking(opened())
        self._opened.append(store)
        return store

    def own(self, database: str | os.PathLike[str] | None) -> str:
        """The target standing for ``database``, for a session to open
        itself (a new one for ``:memory:``, as in the peer)."""
        if database is None or str(database) == ":memory:":
            database = self.new_path("memory")
        return self.target(str(Path(database).expanduser().resolve()))

    def adopt(self, session: Any) -> None:
        """Close ``session`` (and the store it opened) after the test, as the stores."""
        self._opened.append(session)

    def mark(self) -> int:
        return len(self._opened)

    def close_since(self, mark: int) -> None:
        """Close the stores opened after ``mark``."""
        closing, self._opened[mark:] = self._opened[mark:], []
        for key, store in list(self._named.items()):
            if any(store is other for other in closing):
                del self._named[key]
        for store in closing:
            close = store.close()
            if inspect.isawaitable(close):
                blocking(_awaited(close))

    def close_all(self) -> None:
        self.close_since(0)
        shutil.rmtree(self.root, ignore_errors=True)


class _TestState(threading.local):
    """What the running test is: async or not, and its database for histories."""

    is_async = False
    database: str | None = None


_STATE = _TestState()

# ================================================================ openai-agents


def _install_openai_agents(stores: Stores) -> None:
    import agents
    import agents.extensions.memory as extensions
    import agents.extensions.memory.async_sqlite_session as async_sqlite_module
    import agents.extensions.memory.sqlalchemy_session as sqlalchemy_module
    import agents.memory
    from sqlalchemy.ext.asyncio import create_async_engine

    from sessionstore.integrations.openai_agents import StoreSession

    def no_tables(name: str, sessions_table: str, messages_table: str) -> None:
        if (sessions_table, messages_table) != ("agent_sessions", "agent_messages"):
            raise TypeError(f"{name} on sessionstore: StoreSession has no table names")

    class SQLiteSession(StoreSession):
        """Stands for agents' SQLiteSession: our StoreSession, on the run's kind
        of store. On a kind with files, it is made as SQLiteSession is, with
        the database's stand-in path (`Stores.own`): it opens a store of its
        own there on first use and closes it. On memory, sessions on one
        path share a store (`Stores.get`)."""

        def __init__(
            self,
            session_id: str,
            db_path: str | os.PathLike[str] = ":memory:",
            sessions_table: str = "agent_sessions",
            messages_table: str = "agent_messages",
            session_settings: Any = None,
        ) -> None:
            no_tables(type(self).__name__, sessions_table, messages_table)
            _BUILT[type(self).__name__] += 1
            if stores.kind == "memory":
                store = stores.get(db_path)
                super().__init__(store, session_id, session_settings=session_settings)
            else:
                own = stores.own(db_path)
                super().__init__(session_id, own, session_settings=session_settings)
                stores.adopt(self)

    class AsyncSQLiteSession(SQLiteSession):
        """Stands for agents' AsyncSQLiteSession (same arguments): our StoreSession."""

    engines: dict[Any, str] = {}  # an in-memory engine's stand-in path; keeps it alive

    class SQLAlchemySession(StoreSession):
        """Stands for agents' SQLAlchemySession: our StoreSession, on a store
        standing for the engine's database (one per in-memory engine)."""

        def __init__(
            self,
            session_id: str,
            *,
            engine: Any,
            create_tables: bool = False,
            sessions_table: str = "agent_sessions",
            messages_table: str = "agent_messages",
            session_settings: Any = None,
            ensure_ascii: bool = True,
        ) -> None:
            no_tables(type(self).__name__, sessions_table, messages_table)
            _BUILT["SQLAlchemySession"] += 1
            database = engine.url.database
            if not database or database == ":memory:":
                database = engines.setdefault(engine, stores.new_path("engine"))
            super().__init__(stores.get(database), session_id, session_settings=session_settings)

        @classmethod
        def from_url(
            cls,
            session_id: str,
            *,
            url: str,
            engine_kwargs: dict[str, Any] | None = None,
            session_settings: Any = None,
            **kwargs: Any,
        ) -> SQLAlchemySession:
            engine = create_async_engine(url, **(engine_kwargs or {}))  # never connected
            return cls(session_id, engine=engine, session_settings=session_settings, **kwargs)

    for module in (agents, agents.memory):
        setattr(module, "SQLiteSession", SQLiteSession)  # noqa: B010
    for module in (extensions, async_sqlite_module):
        setattr(module, "AsyncSQLiteSession", AsyncSQLiteSession)  # noqa: B010
    for module in (extensions, sqlalchemy_module):
        setattr(module, "SQLAlchemySession", SQLAlchemySession)  # noqa: B010


# ================================================================ langchain-core


def _install_langchain(stores: Stores) -> None:
    import langchain_core.chat_history as chat_history
    from langchain_core.messages import BaseMessage

    from sessionstore.integrations.langchain import SessionStoreChatMessageHistory

    class InMemoryChatMessageHistory(SessionStoreChatMessageHistory):
        """Stands for langchain's InMemoryChatMessageHistory: our history, a
        conversation of its own in the test's store, a `SyncStore` in a sync
        test and an async store in an async one.

        As the peer's pydantic model is, it is equal to another by its
        messages: the tests compare histories with ``==``.
        """

        def __init__(self, *, messages: Sequence[BaseMessage] = ()) -> None:
            _BUILT["InMemoryChatMessageHistory"] += 1
            sync = not _STATE.is_async
            database = _STATE.database or stores.new_path("outside-tests")
            super().__init__(stores.get(database, sync=sync), f"history-{uuid.uuid4()}")
            if messages:
                if sync:
                    self.add_messages(messages)
                else:
                    blocking(self.aadd_messages(messages))

        def read(self) -> list[BaseMessage]:
            """The messages, from sync code, whatever the store."""
            if _STATE.is_async:
                return blocking(self.aget_messages())
            return self.messages

        def __eq__(self, other: object) -> bool:
            if not isinstance(other, InMemoryChatMessageHistory):
                return NotImplemented
            return self.read() == other.read()

        __hash__ = None  # type: ignore[assignment]

    setattr(chat_history, "InMemoryChatMessageHistory", InMemoryChatMessageHistory)  # noqa: B010


# ================================================================ pytest hooks


_RANK = ("passed", "skipped", "failed", "error")


class Plugin:
    """One run: which peer, which kind of store, and what came of each test."""

    def __init__(self, peer: str, kind: str) -> None:
        self.peer = peer
        self.stores = Stores(kind)
        self.outcomes: dict[str, dict[str, str]] = {}
        self.unmatched: list[str] = []
        where = os.environ.get(REPORT_ENV)
        timeouts = f"{where}.timeout" if where else str(self.stores.root / "timeout")
        self.timeouts = open(timeouts, "w")  # noqa: SIM115 (open for the whole run)
        if peer == "openai-agents":
            _install_openai_agents(self.stores)
        else:
            _install_langchain(self.stores)

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        skipped = SKIPPED[self.peer]
        seen: set[str] = set()
        for item in items:
            name = item.nodeid.split("[", 1)[0]
            seen.add(name)
            for arg in UNAWAITED_FILTERS:
                item.add_marker(pytest.mark.filterwarnings(arg))
            if name in skipped:
                item.add_marker(pytest.mark.skip(reason=f"sessionstore: {skipped[name]}"))
        listed = skipped.keys() | SYNC_STORE_FOR[self.peer].keys()
        self.unmatched = sorted(listed - seen)

    @pytest.fixture(autouse=True)
    def _sessionstore_test(self, request: pytest.FixtureRequest) -> Iterator[None]:
        """Time the test out; close the stores it opened; tell the history
        stand-in whether the test is async, and its database."""
        name = request.node.nodeid.split("[", 1)[0]
        _STATE.is_async = inspect.iscoroutinefunction(getattr(request.node, "obj", None)) and (
            name not in SYNC_STORE_FOR[self.peer]
        )
        _STATE.database = self.stores.new_path("test")
        mark = self.stores.mark()
        faulthandler.dump_traceback_later(TEST_TIMEOUT, exit=True, file=self.timeouts)
        yield
        faulthandler.cancel_dump_traceback_later()
        self.stores.close_since(mark)
        _STATE.is_async, _STATE.database = False, None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Keep each test's worst outcome over its phases."""
        if report.skipped:
            outcome = "skipped"
        elif report.failed:
            outcome = "failed" if report.when == "call" else "error"
        elif report.when == "call":
            outcome = "passed"
        else:
            return
        entry = self.outcomes.setdefault(report.nodeid, {"outcome": outcome})
        if _RANK.index(outcome) > _RANK.index(entry["outcome"]):
            entry["outcome"] = outcome
        if report.skipped and isinstance(report.longrepr, tuple):
            entry["reason"] = str(report.longrepr[2])
        crash = getattr(report.longrepr, "reprcrash", None)
        if report.failed and crash is not None:
            entry.setdefault("message", f"{report.when}: {crash.message}")

    def pytest_sessionfinish(self) -> None:
        self.stores.close_all()
        self.timeouts.close()
        where = os.environ.get(REPORT_ENV)
        if where:
            report = {
                "tests": self.outcomes,
                "unmatched": self.unmatched,
                "built": dict(_BUILT),
            }
            Path(where).write_text(json.dumps(report, indent=1, sort_keys=True))

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        for name in self.unmatched:
            terminalreporter.write_line(f"sessionstore: no test matches {name}", red=True)


def pytest_configure(config: pytest.Config) -> None:
    peer = os.environ.get(PEER_ENV, "")
    if peer not in PEERS:
        raise pytest.UsageError(f"{PEER_ENV}={peer!r}: the peers are {PEERS}")
    config.pluginmanager.register(Plugin(peer, os.environ.get(KIND_ENV, "memory")), "sessionstore")
