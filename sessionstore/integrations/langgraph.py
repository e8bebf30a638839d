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
only the other channels' values that changed, so nothing is serialized
twice. Reads are keyed lookups: the latest checkpoint, a given one, and
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
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from functools import partial
from typing import Any, TypeVar

try:
    from langchain_core.messages import BaseMessage
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import (
        WRITES_IDX_MAP,
        BaseCheckpointSaver,
        ChannelVersions,
        Checkpoint,
        CheckpointMetadata,
        CheckpointTuple,
        get_checkpoint_id,
        get_checkpoint_metadata,
    )
    from langgraph.checkpoint.serde.base import SerializerProtocol
except ImportError as exc:
    raise ImportError(
        f"sessionstore.integrations.langgraph needs langgraph ({exc}): "
        "pip install 'sessionstore[langgraph]'"
    ) from exc

import sessionstore.integrations.langgraph_records as records
from sessionstore import (
    MAX_LINE,
    ConfigurationError,
    InvalidRecordError,
    SessionJournal,
    SessionStore,
    SessionStoreError,
)
from sessionstore.integrations.langgraph_messages import Messages
from sessionstore.integrations.langgraph_records import Position
from sessionstore.integrations.langgraph_threads import Threads, named
from sessionstore.sync import SyncStore

__all__ = ["StoreSaver"]

_T = TypeVar("_T")

_RUNS_SEEN = 4096
"""Runs (with their threads) a saver remembers having indexed."""


class StoreSaver(BaseCheckpointSaver[str]):
    """A LangGraph checkpointer keeping each thread in a session store.

    Args:
        store: a `sessionstore.sync.SyncStore` (every method works) or an
            async `SessionStore` (only the async methods work); the caller
            keeps it open.
        serde: how channel values, writes and metadata are serialized, as
            LangGraph's savers take it (default: its ``JsonPlusSerializer``;
            an ``EncryptedSerializer`` works too).
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
        self._runs: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._runs_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"StoreSaver({self.store!r})"

    def drop_caches(self) -> None:
        """Forget the messages this saver keeps converted between calls."""
        self._messages.drop()

    def get_next_version(self, current: str | int | float | None, channel: None) -> str:
        """A version above ``current``, with a random part, so that two
        branches of a thread never make one version twice (as LangGraph's
        own savers do). Versions compare as strings: the number is padded
        (ten digits, more than any thread takes steps)."""
        if current is None:
            number = 0
        elif isinstance(current, int | float):
            number = int(current)
        else:
            number = int(current.split(".")[0])
        return f"{number + 1:010}.{random.getrandbits(32):08x}"

    # ------------------------------------------------------------ async

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` names (its ``checkpoint_id``), or the
        thread namespace's latest; None when there is none."""
        return await self._await(partial(self._get, config=config))

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """The checkpoints of a thread (all threads, for None), newest first."""
        found = await self._await(
            partial(self._list, config=config, filter=filter, before=before, limit=limit)
        )
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
        call = partial(
            self._put, config=config, checkpoint=checkpoint, metadata=metadata, new=new_versions
        )
        return await self._await(call)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's pending writes for the checkpoint ``config`` names, all or none."""
        call = partial(
            self._put_writes, config=config, writes=writes, task_id=task_id, task_path=task_path
        )
        await self._await(call)

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
        return self._sync("get_tuple").run(partial(self._get, config=config))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """`alist`, blocking."""
        call = partial(self._list, config=config, filter=filter, before=before, limit=limit)
        yield from self._sync("list").run(call)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """`aput`, blocking."""
        call = partial(
            self._put, config=config, checkpoint=checkpoint, metadata=metadata, new=new_versions
        )
        return self._sync("put").run(call)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """`aput_writes`, blocking."""
        call = partial(
            self._put_writes, config=config, writes=writes, task_id=task_id, task_path=task_path
        )
        self._sync("put_writes").run(call)

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

    # ------------------------------------------------------------ reading

    async def _get(self, store: SessionStore, *, config: RunnableConfig) -> CheckpointTuple | None:
        thread, ns = _thread(config), _ns(config)
        journal = store.journal(records.journal_name(thread))
        checkpoint_id = get_checkpoint_id(config)
        if checkpoint_id:
            key = records.checkpoint_key(ns, checkpoint_id)
            lines = (await journal.keyed(key)).get(key)
        else:
            latest = await journal.scan(records.checkpoint_prefix(ns), limit=1)
            if not latest:
                return None
            key, lines = latest[0]
        if not lines:
            return None
        return await self._tuple(store, journal, thread, records.checkpoint_of(key, lines[-1]))

    async def _list(
        self,
        store: SessionStore,
        *,
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> builtins.list[CheckpointTuple]:
        if config is None:
            names = await store.journals()
            prefix = records.JOURNAL_PREFIX
            threads = sorted(name[len(prefix) :] for name in names if name.startswith(prefix))
            ns: str | None = None
            only = None
        else:
            threads, ns = [_thread(config)], config["configurable"].get("checkpoint_ns")
            only = get_checkpoint_id(config)
        before_id = get_checkpoint_id(before) if before is not None else None
        found: builtins.list[CheckpointTuple] = []
        for thread in threads:
            journal = store.journal(records.journal_name(thread))
            bound = (
                None if before_id is None or ns is None else records.checkpoint_key(ns, before_id)
            )
            cut = None if filter or only or limit is None else limit - len(found)
            for key, lines in await journal.scan(
                records.checkpoint_prefix(ns), before=bound, limit=cut
            ):
                if limit is not None and len(found) >= limit:
                    return found
                record = records.checkpoint_of(key, lines[-1])
                if (only and record["id"] != only) or (before_id and record["id"] >= before_id):
                    continue
                if filter:
                    metadata = self._loads(record["metadata"], thread)
                    if any(metadata.get(k) != v for k, v in filter.items()):
                        continue
                found.append(await self._tuple(store, journal, thread, record))
        return found[:limit] if limit is not None else found

    async def _tuple(
        self, store: SessionStore, journal: SessionJournal, thread: str, record: dict[str, Any]
    ) -> CheckpointTuple:
        ns, checkpoint_id = record["ns"], record["id"]
        versions: dict[str, Any] = record["versions"]
        position = records.position_of(record)
        channel = self.messages_channel if position is not None else None
        wanted = {
            records.blob_key(ns, name, version): name
            for name, version in versions.items()
            if name != channel
        }
        blobs = await journal.keyed(*wanted) if wanted else {}
        values: dict[str, Any] = {}
        for key, name in wanted.items():
            if key in blobs:
                values[name] = self._loads(records.decode(blobs[key][-1], thread)["value"], key)
        if position is not None:
            values[self.messages_channel] = await self._messages.read(
                store, thread, ns, checkpoint_id, position
            )
        writes = []
        for key, lines in await journal.scan(records.write_prefix(ns, checkpoint_id)):
            write = records.decode(lines[0] if _regular(key) else lines[-1], key)
            order = (write["path"], write["task"], write["index"])
            writes.append(
                (order, (write["task"], write["channel"], self._loads(write["value"], key)))
            )
        writes.sort(key=lambda each: each[0])
        configurable = {"thread_id": thread, "checkpoint_ns": ns, "checkpoint_id": checkpoint_id}
        parent = record.get("parent")
        checkpoint: Any = {
            **self._loads(record["rest"], thread),
            "v": record["v"],
            "id": checkpoint_id,
            "ts": record["ts"],
            "channel_values": values,
            "channel_versions": versions,
            "versions_seen": record["seen"],
        }
        return CheckpointTuple(
            config={"configurable": configurable},
            checkpoint=checkpoint,
            metadata=self._loads(record["metadata"], thread),
            parent_config=(
                {"configurable": {**configurable, "checkpoint_id": parent}} if parent else None
            ),
            pending_writes=[write for _, write in writes],
        )

    def _loads(self, value: Any, where: str) -> Any:
        return self.serde.loads_typed(records.typed_of(value, where))

    # ------------------------------------------------------------ writing

    async def _put(
        self,
        store: SessionStore,
        *,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new: ChannelVersions,
    ) -> RunnableConfig:
        thread, ns = _thread(config), _ns(config)
        checkpoint_id = checkpoint["id"]
        where = f"thread {thread!r}, checkpoint {checkpoint_id!r}"
        try:
            return await self._store_checkpoint(
                store, thread, ns, config, checkpoint, metadata, new, where
            )
        except SessionStoreError as exc:
            raise named(exc, where) from exc

    async def _store_checkpoint(
        self,
        store: SessionStore,
        thread: str,
        ns: str,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new: ChannelVersions,
        where: str,
    ) -> RunnableConfig:
        journal = store.journal(records.journal_name(thread))
        checkpoint_id, parent_id = checkpoint["id"], get_checkpoint_id(config)
        values = checkpoint["channel_values"]
        channel = self.messages_channel
        messages = values.get(channel)
        is_list = isinstance(messages, list) and all(isinstance(m, BaseMessage) for m in messages)
        parent: Position | None = None
        if parent_id and channel in checkpoint["channel_versions"]:
            parent = await self._position(journal, thread, ns, parent_id)
        as_entries = (channel in new and is_list) or (channel not in new and parent is not None)
        lines = []
        for name, version in new.items():
            if name in values and not (name == channel and as_entries):
                blob: dict[str, Any] = {
                    "key": records.blob_key(ns, name, version),
                    "value": self._dumps(values[name], f"{where}: channel {name!r}"),
                }
                lines.append(_checked(records.encode(blob), where))
        kept_metadata = get_checkpoint_metadata(config, metadata)
        rest = {
            k: v
            for k, v in checkpoint.items()
            if k not in ("v", "id", "ts", "channel_values", "channel_versions", "versions_seen")
        }
        record: dict[str, Any] = {
            "key": records.checkpoint_key(ns, checkpoint_id),
            "parent": parent_id,
            "ts": checkpoint["ts"],
            "v": checkpoint["v"],
            "versions": checkpoint["channel_versions"],
            "seen": checkpoint["versions_seen"],
            "rest": self._dumps(rest, where),
            "metadata": self._dumps(kept_metadata, f"{where}: metadata"),
        }
        if not parent_id:
            del record["parent"]
        run = kept_metadata.get("run_id")
        if isinstance(run, str):
            record["run"] = run
        _checked(
            records.checkpoint_line(
                {**record, "messages": records.position_value(Position("", 0, ""))}
            ),
            where,
        )
        pairs: Any = None
        position = parent
        if as_entries and channel in new:
            assert isinstance(messages, list)
            position, pairs = await self._messages.write(
                store,
                thread,
                ns,
                records.conversation_name(thread, ns),
                None if parent_id is None or parent is None else (parent_id, parent),
                messages,
                partial(self._threads.record_session, journal, ns),
            )
        if as_entries and position is not None:
            record["messages"] = records.position_value(position)
        if isinstance(run, str):
            await self._index_run(store, run, thread)
        await journal.append_raw(*lines, records.checkpoint_line(record))
        if pairs is not None and position is not None:
            self._messages.note(thread, ns, checkpoint_id, position, pairs)
        elif as_entries and parent_id:
            self._messages.carry(thread, ns, parent_id, checkpoint_id)
        return {
            "configurable": {
                "thread_id": thread,
                "checkpoint_ns": ns,
                "checkpoint_id": checkpoint_id,
            }
        }

    async def _position(
        self, journal: SessionJournal, thread: str, ns: str, checkpoint_id: str
    ) -> Position | None:
        """Where the messages stand at the checkpoint ``checkpoint_id`` (None:
        not in a session, or no such checkpoint)."""
        recent = self._messages.recent(thread, ns, checkpoint_id)
        if recent is not None:
            return recent
        key = records.checkpoint_key(ns, checkpoint_id)
        lines = (await journal.keyed(key)).get(key)
        return records.position_of(records.checkpoint_of(key, lines[-1])) if lines else None

    async def _index_run(self, store: SessionStore, run: str, thread: str) -> None:
        """Note in `records.RUNS` that ``run`` wrote to ``thread`` (once)."""
        with self._runs_lock:
            if (run, thread) in self._runs:
                return
        key = records.run_key(run, thread)
        line = records.encode({"key": key})
        await store.journal(records.RUNS).append_keyed_unless(
            [key], lambda held: True if held else None, line
        )
        with self._runs_lock:
            self._runs[(run, thread)] = None
            while len(self._runs) > _RUNS_SEEN:
                self._runs.popitem(last=False)

    async def _put_writes(
        self,
        store: SessionStore,
        *,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
    ) -> None:
        thread, ns = _thread(config), _ns(config)
        checkpoint_id = config["configurable"]["checkpoint_id"]
        where = f"thread {thread!r}, checkpoint {checkpoint_id!r}, task {task_id!r}"
        journal = store.journal(records.journal_name(thread))
        lines: dict[str, bytes] = {}
        for number, (channel, value) in enumerate(writes):
            index = WRITES_IDX_MAP.get(channel, number)
            key = records.write_key(ns, checkpoint_id, task_id, index)
            record = {
                "key": key,
                "task": task_id,
                "channel": channel,
                "path": task_path,
                "index": index,
                "value": self._dumps(value, f"{where}: write to {channel!r}"),
            }
            lines[key] = _checked(records.encode(record), where)
        # A task's regular writes are stored once (a retried task writes them
        # again); its special ones (an error, an interrupt) replace the last.
        held: set[str] = set()
        try:
            while True:
                regular = [key for key in lines if _regular(key) and key not in held]
                todo = [line for key, line in lines.items() if key not in held]
                if not todo:
                    return
                present = await journal.append_keyed_unless(
                    regular, lambda found: set(found) or None, *todo
                )
                if present is None:
                    return
                held |= present
        except SessionStoreError as exc:
            raise named(exc, where) from exc

    def _dumps(self, value: Any, where: str) -> builtins.list[str]:
        try:
            return records.typed_value(self.serde.dumps_typed(value))
        except SessionStoreError:
            raise
        except Exception as exc:  # the serializer's own, whatever it is
            raise InvalidRecordError(f"{where}: cannot be serialized: {exc}") from exc

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


def _thread(config: RunnableConfig) -> str:
    thread = config["configurable"]["thread_id"]
    records.journal_name(thread)  # checked: a string that names a journal
    return str(thread)


def _ns(config: RunnableConfig) -> str:
    ns = config["configurable"].get("checkpoint_ns") or ""
    if not isinstance(ns, str):
        raise ConfigurationError(f"checkpoint_ns {ns!r} is not a string")
    return ns


def _regular(key: str) -> bool:
    """Whether a write's key is a regular write's (index 0 or more)."""
    return not key.rsplit("/", 1)[1].startswith("-")


def _checked(line: bytes, where: str) -> bytes:
    if len(line) > MAX_LINE:
        raise InvalidRecordError(
            f"{where}: a line of {len(line):,} bytes, beyond the {MAX_LINE:,} a journal "
            "line may hold"
        )
    return line
