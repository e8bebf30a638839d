"""Writing a `StoreSaver`'s checkpoints: keyed lines, and messages to the session.

A checkpoint is checked whole (every value serialized, every line within
`MAX_LINE`, every message converted) before anything is written; its lines
are one append, and so are a task's pending writes. A write of a member of
the checkpoint's input that is that very object, serialized alike (the
first task passes the input's messages on), is kept as the member's name.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from functools import partial
from itertools import repeat
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    get_checkpoint_id,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.constants import START

import sessionstore.integrations.langgraph_records as records
from sessionstore import (
    MAX_LINE,
    InvalidRecordError,
    SessionJournal,
    SessionStore,
    SessionStoreError,
)
from sessionstore.integrations.langgraph_messages import Messages
from sessionstore.integrations.langgraph_records import Position, ns_of, thread_of
from sessionstore.integrations.langgraph_threads import named, record_session

__all__ = ["Writer"]

_RUNS_SEEN = 4096
"""Runs (with their threads) a writer remembers having indexed."""

_INPUTS = 256
"""Threads (and namespaces) whose last input a writer remembers."""

_Input = tuple[str, dict[str, tuple[Any, records.Typed]]]
"""A checkpoint's id, and its input's members: each object and its bytes."""


class Writer:
    """Writes checkpoints whose messages channel ``channel`` is kept by ``messages``."""

    def __init__(self, messages: Messages, channel: str) -> None:
        self._messages = messages
        self._channel = channel
        self._runs: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._runs_lock = threading.Lock()
        self._inputs: OrderedDict[tuple[str, str], _Input] = OrderedDict()

    async def put(
        self,
        serde: SerializerProtocol,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new: ChannelVersions,
        store: SessionStore,
    ) -> RunnableConfig:
        thread, ns = thread_of(config), ns_of(config)
        checkpoint_id = checkpoint["id"]
        where = f"thread {thread!r}, checkpoint {checkpoint_id!r}"
        try:
            return await self._store_checkpoint(
                store, serde, thread, ns, config, checkpoint, metadata, new, where
            )
        except SessionStoreError as exc:
            raise named(exc, where) from exc

    async def _store_checkpoint(
        self,
        store: SessionStore,
        serde: SerializerProtocol,
        thread: str,
        ns: str,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new: ChannelVersions,
        where: str,
    ) -> RunnableConfig:
        journal = records.journal_of(store, thread)
        checkpoint_id, parent_id = checkpoint["id"], get_checkpoint_id(config)
        values = checkpoint["channel_values"]
        channel = self._channel
        messages = values.get(channel)
        # At C speed: the list holds the whole thread's messages.
        is_list = isinstance(messages, list) and all(map(isinstance, messages, repeat(BaseMessage)))
        parent: Position | None = None
        if parent_id and channel in checkpoint["channel_versions"]:
            parent = await self._position(journal, thread, ns, parent_id)
        as_entries = (channel in new and is_list) or (channel not in new and parent is not None)
        given = values.get(START) if START in new else None
        members = None
        if isinstance(given, dict) and all(isinstance(member, str) for member in given):
            members = {
                member: (value, _typed(serde, value, f"{where}: input {member!r}"))
                for member, value in given.items()
            }
            # Noted now: LangGraph runs the first task while this put goes on.
            with self._runs_lock:
                self._inputs[(thread, ns)] = (checkpoint_id, members)
                self._inputs.move_to_end((thread, ns))
                while len(self._inputs) > _INPUTS:
                    self._inputs.popitem(last=False)
        lines = []
        for name, version in new.items():
            if name in values and not (name == channel and as_entries):
                blob: dict[str, Any] = {"key": records.blob_key(ns, name, version)}
                typed = _typed(serde, values[name], f"{where}: channel {name!r}")
                if typed != records.NULL:
                    blob["value"] = records.typed_value(typed)
                lines.append(_checked(records.encode(blob), where))
        kept_metadata = get_checkpoint_metadata(config, metadata)
        rest = {
            k: v
            for k, v in checkpoint.items()
            if k not in ("v", "id", "ts", "channel_values", "channel_versions", "versions_seen")
        }
        record: dict[str, Any] = {
            "key": records.checkpoint_key(ns, checkpoint_id),
            "ns": ns,
            "id": checkpoint_id,
            "parent": parent_id,
            "ts": checkpoint["ts"],
            "v": checkpoint["v"],
            "versions": checkpoint["channel_versions"],
            "seen": checkpoint["versions_seen"],
            **_rest(serde, rest, where),
            "metadata": _dumps(serde, kept_metadata, f"{where}: metadata"),
        }
        if not parent_id:
            del record["parent"]
        run = kept_metadata.get("run_id")
        if isinstance(run, str):
            record["run"] = run
        # Checked before the messages are written, with the longest position
        # a line can come to hold (ids of 200 bytes, the largest count).
        longest = records.position_value(Position("s" * 200, 2**63, "e" * 200))
        _checked(records.checkpoint_line({**record, "messages": longest}, thread), where)
        listed: Any = None
        position = parent
        if as_entries and channel in new:
            assert isinstance(messages, list)
            position, listed = await self._messages.write(
                store,
                thread,
                ns,
                records.conversation_name(thread, ns),
                None if parent_id is None or parent is None else (parent_id, parent),
                messages,
                partial(record_session, journal, ns),
            )
        if as_entries and position is not None:
            record["messages"] = records.position_value(position)
        if isinstance(run, str):
            await self._index_run(store, run, thread)
        await journal.append_raw(*lines, records.checkpoint_line(record, thread))
        if listed is not None and position is not None:
            self._messages.note(thread, ns, checkpoint_id, position, listed)
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
        """Where the messages stand at a checkpoint; None: not in a session, or no such one."""
        recent = self._messages.recent(thread, ns, checkpoint_id)
        if recent is not None:
            return recent
        key = records.checkpoint_key(ns, checkpoint_id)
        lines = (await journal.keyed(key)).get(key)
        if not lines:
            return None
        return records.position_of(records.checkpoint_of(key, lines[-1], thread))

    async def _index_run(self, store: SessionStore, run: str, thread: str) -> None:
        """Note in `records.RUNS` that ``run`` wrote to ``thread`` (once)."""
        with self._runs_lock:
            if (run, thread) in self._runs:
                return
        key = records.run_key(run, thread)
        line = records.encode({"key": key})
        await records.runs_of(store).append_keyed_unless(
            [key], lambda held: True if held else None, line
        )
        with self._runs_lock:
            self._runs[(run, thread)] = None
            while len(self._runs) > _RUNS_SEEN:
                self._runs.popitem(last=False)

    async def put_writes(
        self,
        serde: SerializerProtocol,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
        store: SessionStore,
    ) -> None:
        thread, ns = thread_of(config), ns_of(config)
        checkpoint_id = config["configurable"]["checkpoint_id"]
        where = f"thread {thread!r}, checkpoint {checkpoint_id!r}, task {task_id!r}"
        journal = records.journal_of(store, thread)
        with self._runs_lock:
            remembered = self._inputs.get((thread, ns))
        given = remembered[1] if remembered and remembered[0] == checkpoint_id else {}
        lines: dict[str, bytes] = {}
        for number, (channel, value) in enumerate(writes):
            index = WRITES_IDX_MAP.get(channel, number)
            key = records.write_key(ns, checkpoint_id, task_id, index)
            typed = _typed(serde, value, f"{where}: write to {channel!r}")
            record: dict[str, Any] = {"key": key, "channel": channel, "path": task_path}
            of = [
                member for member, (held, kept) in given.items() if held is value and kept == typed
            ]
            if of:
                record["of"] = of[0]
            elif typed != records.NULL:
                record["value"] = records.typed_value(typed)
            lines[key] = _checked(records.encode(record), where)
        # A task's regular writes count once, the first stored (a retried
        # task writes them again: left out when there); its special ones (an
        # error, an interrupt) count as the last. A task's first try is one
        # conditional append (one transaction, the look in it); a retry
        # appends the rest plainly, since two writers racing may both store
        # a regular one and it still reads as the first.
        try:
            regular = [key for key in lines if records.regular(key)]
            held = await journal.append_keyed_unless(regular, _any, *lines.values())
            if held:
                todo = [line for key, line in lines.items() if key not in held]
                if todo:
                    await journal.append_raw(*todo)
        except SessionStoreError as exc:
            raise named(exc, where) from exc


def _any(held: dict[str, list[bytes]]) -> dict[str, list[bytes]] | None:
    return held or None


def _dumps(serde: SerializerProtocol, value: Any, where: str) -> list[str]:
    return records.typed_value(_typed(serde, value, where))


def _typed(serde: SerializerProtocol, value: Any, where: str) -> records.Typed:
    try:
        return serde.dumps_typed(value)
    except SessionStoreError:
        raise
    except Exception as exc:  # the serializer's own, whatever it is
        raise InvalidRecordError(f"{where}: cannot be serialized: {exc}") from exc


def _rest(serde: SerializerProtocol, rest: dict[str, Any], where: str) -> dict[str, Any]:
    """A checkpoint's other fields as its line holds them: ``updated`` when
    ``updated_channels`` is all there is, as most are; else ``rest``, serialized."""
    updated = rest.get("updated_channels")
    if set(rest) == {"updated_channels"} and (
        updated is None
        or (isinstance(updated, list) and all(isinstance(name, str) for name in updated))
    ):
        return {"updated": updated}
    return {"rest": _dumps(serde, rest, where)}


def _checked(line: bytes, where: str) -> bytes:
    if len(line) > MAX_LINE:
        raise InvalidRecordError(
            f"{where}: a line of {len(line):,} bytes, beyond the {MAX_LINE:,} a journal "
            "line may hold"
        )
    return line
