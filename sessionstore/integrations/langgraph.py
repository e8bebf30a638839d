"""LangGraph checkpoints kept in a session store: `StoreSaver`.

`StoreSaver` is a LangGraph checkpointer (``BaseCheckpointSaver``) over any
store: memory, a JSONL directory, SQLite, PostgreSQL, a sealed store::

    from langgraph.graph import MessagesState, StateGraph
    from sessionstore.integrations.langgraph import StoreSaver
    from sessionstore.sync import open_store

    saver = StoreSaver(open_store("sessions.db"))
    graph = builder.compile(checkpointer=saver)
    graph.invoke({"messages": [...]}, {"configurable": {"thread_id": "chat-42"}})

A thread is a conversation: its messages channel (``"messages"``, a list
of LangChain messages under ``add_messages``; ``messages_channel=`` names
another) is stored as the entries of a session, each message once and as
the LangChain adapter stores it (`sessionstore.integrations.langchain`),
so ``sessionstore show chat-42``, search, HTML and the JSONL export see the
conversation. The session of the root namespace is first ``chat-42``, and
the head ``chat-42`` names the session its latest checkpoint is in; a
subgraph's namespace ``ns`` is the conversation ``chat-42|ns``.

Everything else is keyed lines of the thread's journal ``langgraph:chat-42``
(`sessionstore.integrations.langgraph_records`, docs/wire-format.md): a
checkpoint is a line holding where the messages stand in the session and
only the other channels' values that changed, so the history is never
serialized again (a step's pending writes hold what the step wrote, as
LangGraph gives them). Reads are keyed lookups: the latest checkpoint, a given one, and
``list(limit=n)`` cost what they return, not the thread's length. Resuming
from an older checkpoint, or a message removed or replaced, forks the
session where the lists part (`sessionstore.integrations.langgraph_messages`).

Deleting a thread (``delete_thread``, ``prune(strategy="delete")``), a run's
checkpoints (``delete_for_runs``) or every checkpoint but the latest of each
namespace (``prune``) erases what no kept checkpoint needs: recorded
erasures of sessions (`SessionStore.erase`) and of journal lines
(`SessionJournal.drop`), listed by ``sessionstore erasures``. ``copy_thread``
forks the thread's sessions.

Built on a `sessionstore.sync.SyncStore`, every method works (the async ones
in a worker thread), so one saver serves a graph's ``invoke`` and
``ainvoke``; built on an async store, the async methods await it on the
caller's loop and the blocking ones raise `ConfigurationError`.
"""

from __future__ import annotations

import asyncio
import builtins
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from functools import partial
from typing import Any, TypeVar

try:
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import (
        BaseCheckpointSaver,
        ChannelVersions,
        Checkpoint,
        CheckpointMetadata,
        CheckpointTuple,
    )
    from langgraph.checkpoint.serde.base import SerializerProtocol
except ImportError as exc:
    raise ImportError(
        f"sessionstore.integrations.langgraph needs langgraph ({exc}): "
        "pip install 'sessionstore[langgraph]'"
    ) from exc

from sessionstore import ConfigurationError, SessionStore
from sessionstore.integrations.langgraph_messages import Messages
from sessionstore.integrations.langgraph_reads import Reader
from sessionstore.integrations.langgraph_threads import Threads
from sessionstore.integrations.langgraph_writes import Writer
from sessionstore.sync import SyncStore

__all__ = ["StoreSaver"]

_T = TypeVar("_T")


class StoreSaver(BaseCheckpointSaver[int]):
    """A LangGraph checkpointer keeping each thread in a session store.

    Args:
        store: a `sessionstore.sync.SyncStore` (every method works) or an
            async `SessionStore` (only the async methods work); the caller
            keeps it open.
        serde: how channel values, writes and metadata are serialized, as
            LangGraph's savers take it (default: its ``JsonPlusSerializer``;
            an ``EncryptedSerializer`` works too: it seals what the journal
            keeps, not the messages of the session, which a sealed store
            seals, docs/encryption.md).
        messages_channel: the channel kept as the session's entries, when
            it holds a list of LangChain messages.
    """

    def __init__(
        self,
        store: SessionStore | SyncStore,
        *,
        serde: SerializerProtocol | None = None,
        messages_channel: str = "messages",
    ) -> None:
        super().__init__(serde=serde)
        self.store = store
        self.messages_channel = messages_channel
        self._messages = Messages()
        self._threads = Threads(self._messages)
        self._reader = Reader(self._messages, messages_channel)
        self._writer = Writer(self._messages, self._threads, messages_channel)

    def __repr__(self) -> str:
        return f"StoreSaver({self.store!r})"

    def drop_caches(self) -> None:
        """Forget the messages this saver keeps converted between calls."""
        self._messages.drop()

    @property
    def kept_messages(self) -> int:
        """The messages this saver keeps listed for the latest checkpoint of
        each thread it served (at most
        `sessionstore.integrations.langgraph_messages.RECENT_MESSAGES` in all)."""
        return self._messages.held

    def get_next_version(self, current: Any, channel: None) -> Any:
        """A version above ``current``: an int, the step's number times 2**32
        plus a random 32-bit part, so that two branches of a thread never make
        one version twice (as LangGraph's own savers' random parts do) and a
        line spells it in some 13 digits. Above a string version (another
        scheme's: ``"<number>.<hex>"``, as LangGraph's savers make), a string
        of that form, so the thread's versions still compare."""
        if isinstance(current, str):
            number = int(current.split(".")[0])
            return f"{number + 1:010}.{random.getrandbits(32):08x}"
        step = 0 if current is None else int(current) >> 32
        return ((step + 1) << 32) | random.getrandbits(32)

    # ------------------------------------------------------------ async

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` names (its ``checkpoint_id``), or the
        thread namespace's latest; None when there is none."""
        return await self._await(partial(self._reader.get, serde=self.serde, config=config))

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """The checkpoints of a thread (all threads, for None), newest first."""
        found = await self._await(self._listing(config, filter, before, limit))
        for each in found:
            yield each

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint, child of the one ``config`` names.

        Raises:
            InvalidRecordError: a value cannot be serialized, or is too large;
                nothing is stored. Any store error names the thread and checkpoint.
        """
        return await self._await(self._putting(config, checkpoint, metadata, new_versions))

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's pending writes for the checkpoint ``config`` names, all or none."""
        await self._await(self._writing(config, writes, task_id, task_path))

    async def adelete_thread(self, thread_id: str) -> None:
        """Erase a thread: its sessions and its journal, recorded as erasures."""
        await self._await(partial(self._threads.delete, thread=thread_id))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Erase the checkpoints the runs wrote, and what no other checkpoint needs."""
        await self._await(partial(self._threads.delete_runs, runs=list(run_ids)))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy a thread's checkpoints and writes to another: its sessions are forked."""
        call = partial(self._threads.copy, source=source_thread_id, target=target_thread_id)
        await self._await(call)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``keep_latest``: erase every checkpoint but each namespace's latest,
        and what it does not need; ``delete``: erase the threads."""
        call = partial(self._threads.prune, threads=list(thread_ids), strategy=strategy)
        await self._await(call)

    # ------------------------------------------------------------ blocking

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """`aget_tuple`, blocking."""
        return self._sync("get_tuple").run(
            partial(self._reader.get, serde=self.serde, config=config)
        )

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """`alist`, blocking."""
        yield from self._sync("list").run(self._listing(config, filter, before, limit))

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """`aput`, blocking."""
        return self._sync("put").run(self._putting(config, checkpoint, metadata, new_versions))

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """`aput_writes`, blocking."""
        self._sync("put_writes").run(self._writing(config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        """`adelete_thread`, blocking."""
        self._sync("delete_thread").run(partial(self._threads.delete, thread=thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """`adelete_for_runs`, blocking."""
        call = partial(self._threads.delete_runs, runs=list(run_ids))
        self._sync("delete_for_runs").run(call)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """`acopy_thread`, blocking."""
        call = partial(self._threads.copy, source=source_thread_id, target=target_thread_id)
        self._sync("copy_thread").run(call)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """`aprune`, blocking."""
        call = partial(self._threads.prune, threads=list(thread_ids), strategy=strategy)
        self._sync("prune").run(call)

    # ------------------------------------------------------------ the calls
    # What a method and its blocking twin run on the store, built once here.

    def _listing(
        self,
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> Callable[[SessionStore], Awaitable[builtins.list[CheckpointTuple]]]:
        return partial(
            self._reader.list,
            serde=self.serde,
            config=config,
            filter=filter,
            before=before,
            limit=limit,
        )

    def _putting(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> Callable[[SessionStore], Awaitable[RunnableConfig]]:
        return partial(
            self._writer.put,
            serde=self.serde,
            config=config,
            checkpoint=checkpoint,
            metadata=metadata,
            new=new_versions,
        )

    def _writing(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
    ) -> Callable[[SessionStore], Awaitable[None]]:
        return partial(
            self._writer.put_writes,
            serde=self.serde,
            config=config,
            writes=writes,
            task_id=task_id,
            task_path=task_path,
        )

    # ------------------------------------------------------------ the store

    async def _await(self, call: Callable[[SessionStore], Awaitable[_T]]) -> _T:
        """``call`` on the async store: awaited here, or on a sync store's own
        loop from a worker thread (this loop is not held up meanwhile)."""
        store = self.store
        if isinstance(store, SyncStore):
            return await asyncio.to_thread(store.run, call)
        return await call(store)

    def _sync(self, method: str) -> SyncStore:
        store = self.store
        if isinstance(store, SyncStore):
            return store
        raise ConfigurationError(
            f"StoreSaver.{method} is a blocking call, and this saver is built on an async "
            "store: use the graph's async methods (ainvoke, astream), or build the saver "
            "on a sessionstore.sync store"
        )
