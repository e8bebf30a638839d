"""A `StoreSaver`'s whole-thread operations: delete, delete runs, copy, prune.

Each erases only what no kept checkpoint needs, recorded as erasures. The
checkpoints' lines go first, then the sessions only they held, so no
checkpoint ever names an erased session; a session a fork in another
thread shares (a `copy` on SQL) stays while that fork exists.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import sessionstore.integrations.langgraph_records as records
from sessionstore import (
    ConfigurationError,
    InvalidSessionIdError,
    SessionConflictError,
    SessionJournal,
    SessionMeta,
    SessionNotFoundError,
    SessionStore,
    SessionStoreError,
    decode_meta,
)
from sessionstore.integrations.conversation import first_id

__all__ = ["copy", "delete", "delete_runs", "named", "prune", "record_session"]

REASON = "langgraph {what}"
"""The reason recorded with each erasure (``{what}``: the operation)."""


def named(exc: SessionStoreError, where: str) -> SessionStoreError:
    """``exc`` again, of its class, its message starting with ``where``."""
    if str(exc).startswith(where):
        return exc
    # Made without its class's own __init__ (some take fields, not a message).
    again = type(exc).__new__(type(exc))
    again.__dict__.update(exc.__dict__)
    again.args = (f"{where}: {exc}",)
    return again


async def record_session(journal: SessionJournal, ns: str, session_id: str) -> None:
    """Note that the thread makes the session ``session_id`` (before it does)."""
    await journal.append_raw(records.encode({"key": records.session_key(ns, session_id)}))


async def delete(thread: str, store: SessionStore) -> None:
    """Erase the thread: its sessions, then its journal whole."""
    journal = records.journal_of(store, thread)
    checkpoints = await _checkpoints(journal, thread)
    sessions = [_session_of(key) for key, _ in await journal.scan("s/")]
    # A first session made but not yet noted (a crash between): its
    # header tells it the thread's.
    for ns in {"", *(record["ns"] for _, record in checkpoints)}:
        name = records.conversation_name(thread, ns)
        first = None if name is None else _first_id(store, name)
        if first is not None and first not in sessions and await _ours(store, first, thread):
            sessions.append(first)
    await _erase_sessions(store, sessions, REASON.format(what="delete_thread"))
    await journal.erase(reason=REASON.format(what="delete_thread"))
    runs = {record["run"] for _, record in checkpoints if isinstance(record.get("run"), str)}
    if runs:
        keys = [records.run_key(run, thread) for run in sorted(runs)]
        await _drop(records.runs_of(store), keys, "delete_thread")


async def delete_runs(runs: list[str], store: SessionStore) -> None:
    """Erase the checkpoints of ``runs``, in every thread they wrote to."""
    index = records.runs_of(store)
    for run in runs:
        found = await index.scan(records.run_prefix(run))
        for key, _ in found:
            await _drop_checkpoints(
                store,
                records.thread_of_run_key(key),
                lambda record, run=run: record.get("run") == run,  # type: ignore[misc]
                "delete_for_runs",
            )
        if found:
            await _drop(index, [key for key, _ in found], "delete_for_runs")


async def prune(threads: list[str], strategy: str, store: SessionStore) -> None:
    """``keep_latest``: each namespace's latest checkpoint stays; ``delete``: nothing."""
    if strategy not in ("keep_latest", "delete"):
        raise ConfigurationError(
            f"prune strategy {strategy!r}: the strategies are 'keep_latest' and 'delete'"
        )
    for thread in threads:
        if strategy == "delete":
            await delete(thread, store)
            continue
        journal = records.journal_of(store, thread)
        latest: dict[str, str] = {}
        for _, record in await _checkpoints(journal, thread):
            if record["id"] > latest.get(record["ns"], ""):
                latest[record["ns"]] = record["id"]
        await _drop_checkpoints(
            store,
            thread,
            lambda record, latest=latest: latest[record["ns"]] != record["id"],  # type: ignore[misc]
            "prune",
        )


async def copy(source: str, target: str, store: SessionStore) -> None:
    """Copy ``source``'s lines to ``target``, its sessions forked."""
    from_journal = records.journal_of(store, source)
    to_journal = records.journal_of(store, target)
    held = await from_journal.scan("")
    if not held:
        return
    forks: dict[str, str] = {}
    copied: list[bytes] = []
    runs: set[str] = set()
    for key, lines in reversed(held):  # ascending: blobs, checkpoints, sessions, writes
        if key.startswith("s/"):
            continue
        if not key.startswith("c/"):
            copied.extend(lines)
            continue
        record = records.checkpoint_of(key, lines[-1], source)
        if isinstance(record.get("run"), str):
            runs.add(record["run"])
        position = records.position_of(record)
        if position is not None and position.session is not None:
            if position.session not in forks:
                meta = SessionMeta.new(
                    parent_session=position.session,
                    metadata=records.session_mark(target, record["ns"]),
                )
                await record_session(to_journal, record["ns"], meta.id)
                await store.fork(position.session, meta=meta)
                forks[position.session] = meta.id
            moved = records.Position(forks[position.session], position.count, position.last)
            record["messages"] = records.position_value(moved)
        copied.append(records.checkpoint_line(record, target))
    await to_journal.append_raw(*copied)
    for ns, session in _latest_sessions(await _checkpoints(to_journal, target)).items():
        await _point(store, records.conversation_name(target, ns), session)
    index = records.runs_of(store)
    for run in sorted(runs):
        key = records.run_key(run, target)
        await index.append_keyed_unless(
            [key], lambda found: True if found else None, records.encode({"key": key})
        )


async def _drop_checkpoints(
    store: SessionStore,
    thread: str,
    doomed: Callable[[dict[str, Any]], bool],
    what: str,
) -> None:
    """Erase the checkpoints ``doomed`` picks, and what only they need."""
    journal = records.journal_of(store, thread)
    checkpoints = await _checkpoints(journal, thread)
    gone = [(key, record) for key, record in checkpoints if doomed(record)]
    if not gone:
        return
    kept = [record for _, record in checkpoints if not doomed(record)]
    needed = {_blob(record, name) for record in kept for name in record["versions"]}
    keys = []
    for key, record in gone:
        keys.append(key)
        keys.extend(
            found
            for found, _ in await journal.scan(records.write_prefix(record["ns"], record["id"]))
        )
        keys.extend(
            blob for name in record["versions"] if (blob := _blob(record, name)) not in needed
        )
    await _drop(journal, keys, what)
    in_use = {
        position.session for record in kept if (position := records.position_of(record)) is not None
    }
    made = [(key, _session_of(key)) for key, _ in await journal.scan("s/")]
    spare = [(key, session) for key, session in made if session not in in_use]
    erased = await _erase_sessions(
        store, [session for _, session in spare], REASON.format(what=what)
    )
    dropped = [key for key, session in spare if session in erased]
    if dropped:
        await _drop(journal, dropped, what)
    for ns, session in _latest_sessions([(None, record) for record in kept]).items():
        await _point(store, records.conversation_name(thread, ns), session)


async def _checkpoints(journal: SessionJournal, thread: str) -> list[tuple[str, dict[str, Any]]]:
    """The checkpoint lines of ``thread``'s journal, decoded, newest first in each namespace."""
    return [
        (key, records.checkpoint_of(key, lines[-1], thread))
        for key, lines in await journal.scan(records.checkpoint_prefix(None))
    ]


def _latest_sessions(checkpoints: Iterable[tuple[Any, dict[str, Any]]]) -> dict[str, str]:
    """Each namespace's session of its latest checkpoint (that has one)."""
    best: dict[str, tuple[str, str]] = {}
    for _, record in checkpoints:
        position = records.position_of(record)
        if position is None or position.session is None:
            continue
        ns = record["ns"]
        if ns not in best or record["id"] > best[ns][0]:
            best[ns] = (record["id"], position.session)
    return {ns: session for ns, (_, session) in best.items()}


async def _point(store: SessionStore, name: str | None, session: str) -> None:
    """Move the head ``name`` to ``session``, unless it names it already."""
    if name is not None and await store.head(name) != session:
        await store.set_head(name, session)


def _blob(record: dict[str, Any], name: str) -> str:
    return records.blob_key(record["ns"], name, record["versions"][name])


def _session_of(key: str) -> str:
    return key.rsplit("/", 1)[1]


def _first_id(store: SessionStore, name: str) -> str | None:
    """The conversation's first session id; None when it has none (too long for the view)."""
    try:
        return first_id(store, name)
    except InvalidSessionIdError:
        return None


async def _ours(store: SessionStore, session_id: str, thread: str) -> bool:
    """Whether the session exists and its header marks it the thread's."""
    lines = store.raw_lines(session_id)
    try:
        header = await anext(lines)
    except (SessionNotFoundError, StopAsyncIteration):
        return False
    finally:
        close = getattr(lines, "aclose", None)  # a generator: let go of its file or cursor
        if close is not None:
            await close()
    return records.marked(decode_meta(header).metadata, thread)


async def _erase_sessions(store: SessionStore, sessions: list[str], reason: str) -> set[str]:
    """Erase the sessions that can be, forks first (a pass each time one
    refuses for a fork); returns those erased, or gone already."""
    erased: set[str] = set()
    left = list(dict.fromkeys(sessions))
    while left:
        refused = []
        for session in left:
            try:
                await store.erase(session, reason=reason)
            except SessionNotFoundError:
                pass
            except SessionConflictError:
                refused.append(session)
                continue
            erased.add(session)
        if len(refused) == len(left):
            break
        left = refused
    return erased


async def _drop(journal: SessionJournal, keys: list[str], what: str) -> None:
    """Drop the lines under ``keys``, recorded as one erasure."""
    await journal.drop(*keys, reason=REASON.format(what=what))
