"""The fourth round's attacks, run by ``hostile.py --groups hardening``.

Each case runs in hostile.py's sandbox and child (bounded memory: 2 GiB of
address space), with a longer timeout (a 300 MB line is written and read):

* ``deep (jsonl|sqlite)``: values nested 100,000 levels deep through
  ``append``, ``append_many``, an openai-agents ``StoreSession``, and
  ``effects.once`` (as arguments, and as an effect's result): each must be
  a clean error (or, for a result, the effect recorded ``done``), never a
  ``RecursionError``, and never an effect left in doubt;
* ``links (jsonl)``: a raw writer replaces one of the store's own
  directories (``heads/``, ``titles/``, ``journals/``, a journal's,
  ``erasures/``, ``.erasing/``, ``.batch/``, ``.ids/``) by a symlink to a
  directory outside the store, then every call that uses it runs: a file
  read, written or removed outside is ``lost``;
* ``long line (jsonl)``: a malformed 300 MB line appended to a session file
  by a raw writer; ``load``, ``load_context``, ``load_slice``, ``summaries``
  and an export must answer or fail cleanly (no ``PanicException``, no
  ``MemoryError``);
* ``kept (openai-agents)``: 20 conversations of 1,000 items of 16 KB read
  through ``StoreSession`` on one store object: what it keeps must stay
  within ``KEPT_IN_ALL`` (the child's peak RSS is reported).
"""

from __future__ import annotations

import asyncio
import os
import resource
import shutil
from collections.abc import Callable
from functools import partial
from pathlib import Path

from common import attempt

from sessionstore import (
    Message,
    MessageEntry,
    SessionMeta,
    export_archive,
    open_store,
)

DEPTH = 100_000
LINKED = (
    "heads",
    "titles",
    "journals",
    "journals/j",
    "erasures",
    ".erasing",
    ".erasing/session",
    ".batch",
    ".ids",
)
LONG_LINE = 300_000_000
CONVERSATIONS, ITEMS, ITEM_BYTES = 20, 1_000, 16_000
TIMEOUT = 120


def cases() -> dict[str, tuple[str, Callable[[Path], None] | None, dict]]:
    """Case name -> (group, what to lay out in the sandbox first, payload)."""
    found: dict[str, tuple[str, Callable[[Path], None] | None, dict]] = {}
    for backend in ("jsonl", "sqlite"):
        for call in ("append", "append_many", "StoreSession", "once args", "once result"):
            payload = {"case": "deep", "call": call, "backend": backend}
            found[f"{call} ({backend})"] = (f"deep ({backend})", None, payload)
    for linked in LINKED:
        found[f"{linked} -> outside"] = (
            "links (jsonl)",
            partial(planted, linked),
            {"case": "link", "linked": linked},
        )
    found["300 MB malformed line"] = ("long line (jsonl)", None, {"case": "long"})
    kept_case_name = f"{CONVERSATIONS} x {ITEMS} items of 16 KB"
    found[kept_case_name] = ("kept (openai-agents)", None, {"case": "kept"})
    return found


def planted(linked: str, inner: Path) -> None:
    """A filled store whose directory ``linked`` a raw writer moved out of
    it (to ``inner/outside``) and replaced by a symlink to where it went:
    the sandbox is listed after this, so any change there is the store's."""
    target, outside = inner / "store", inner / "outside"
    asyncio.run(_filled(str(target)))
    where = target / linked
    if where.exists():
        shutil.move(where, outside)
    else:
        outside.mkdir()
    os.symlink(outside, where)


def _deep() -> object:
    value: object = 0
    for _ in range(DEPTH):
        value = [value]
    return value


def _entry(content: object) -> MessageEntry:
    return MessageEntry.new(Message(role="user", content=content))


async def _filled(target: str) -> None:
    async with open_store(target) as store:
        await store.create(SessionMeta(id="s1"))
        await store.append_many("s1", [_entry("hi"), _entry("there")])
        await store.set_head("chat", "s1", expect=None)
        await store.set_title("s1", "First")
        await store.journal("j").append_raw(b'{"line":"x"}')
        await store.create(SessionMeta(id="gone"))
        await store.erase("gone", reason="a first erase makes the erasure log")
        await store.load_context("s1")


async def deep_case(inner: Path, payload: dict) -> dict:
    target = str(inner / ("store" if payload["backend"] == "jsonl" else "store.db"))
    await _filled(target)
    call = payload["call"]
    async with open_store(target) as store:
        effects = store.journal("j").effects
        if call == "append":
            outcome, value = await attempt(store.append("s1", _entry(_deep())))
        elif call == "append_many":
            outcome, value = await attempt(store.append_many("s1", [_entry("ok"), _entry(_deep())]))
        elif call == "StoreSession":
            from sessionstore.integrations.openai_agents import StoreSession

            session = StoreSession(store, "chat")
            item = {"role": "user", "content": _deep()}
            outcome, value = await attempt(session.add_items([item]))
        elif call == "once args":
            ran: list[int] = []
            outcome, value = await attempt(
                effects.once(lambda: ran.append(1), tool="t", args={"x": _deep()}, key="a")
            )
            if ran or await effects.find("a") is not None:
                return {call: ["lost", "the effect ran, or its intent was written"]}
        else:
            outcome, value = await attempt(effects.once(_deep, tool="t", key="r"))
            state = await effects.find("r")
            if state is None or state.state != "done":
                return {call: ["lost", f"the effect left {state and state.state}, not done"]}
        stored = len(await store.load("s1"))
    if call != "once result" and stored != 2:
        return {call: ["lost", f"{stored} entries stored, not 2"]}
    return {call: [outcome, value if outcome != "ok" else repr(value)[:100]]}


async def link_case(inner: Path, payload: dict) -> dict:
    target = inner / "store"  # laid out by `planted`
    results = {}
    async with open_store(str(target)) as store:
        calls = {
            "set_head": lambda: store.set_head("chat-2", "s1", expect=None),
            "head": lambda: store.head("chat"),
            "set_title": lambda: store.set_title("s1", "Trip"),
            "titles": lambda: store.titles("s1"),
            "journal append": lambda: store.journal("j").append_raw(b'{"line":"y"}'),
            "journal read": lambda: store.journal("j").read(),
            "effects.once": lambda: store.journal("j").effects.once(lambda: 1, tool="t", key="k"),
            "journal clear": lambda: store.journal("j").clear(),
            "append_many": lambda: store.append_many("s1", [_entry("a"), _entry("b")]),
            "load_context": lambda: store.load_context("s1"),
            "erasures": lambda: store.erasures(),
            "journal erase": lambda: store.journal("j").erase(reason="test"),
            "erase": lambda: store.erase("s1", reason="test"),
        }
        for name, call in calls.items():
            outcome, value = await attempt(call())
            results[name] = [outcome, value if outcome != "ok" else repr(value)[:60]]
    return results


async def long_case(inner: Path, payload: dict) -> dict:
    target = inner / "store"
    async with open_store(str(target)) as store:
        await store.create(SessionMeta(id="s1"))
        await store.append("s1", _entry("hi"))
    head = b'{"type":"message","id":"e2","timestamp":"t","message":{"role":"user","content":"'
    with (target / "s1.jsonl").open("ab") as file:  # never closed: malformed
        file.write(head)
        block = b"x" * (1 << 20)
        for _ in range(LONG_LINE // len(block)):
            file.write(block)
        file.write(b"\n")
    results = {}
    async with open_store(str(target)) as store:
        calls = {
            "load": lambda: store.load("s1"),
            "load_context": lambda: store.load_context("s1"),
            "load_slice": lambda: store.load_slice("s1", -1),
            "summaries": lambda: store.summaries(),
            "export": lambda: export_archive(store, inner / "dest"),
        }
        for name, call in calls.items():
            outcome, value = await attempt(call(), TIMEOUT)
            results[name] = [outcome, value if outcome != "ok" else repr(value)[:60]]
    (target / "s1.jsonl").unlink()  # 300 MB: not left for the sandbox's listing to read
    shutil.rmtree(inner / "dest", ignore_errors=True)
    return results


async def kept_case(inner: Path, payload: dict) -> dict:
    from sessionstore.integrations import kept
    from sessionstore.integrations.openai_agents import StoreSession

    target = str(inner / "store")
    text = "x" * ITEM_BYTES
    async with open_store(target) as store:
        for number in range(CONVERSATIONS):
            items = [{"role": "user", "content": f"{n} {text}"} for n in range(ITEMS)]
            await StoreSession(store, f"c{number}").add_items(items)
    async with open_store(target) as store:
        for number in range(CONVERSATIONS):
            got = await StoreSession(store, f"c{number}").get_items()
            assert len(got) == ITEMS
            del got
        await StoreSession(store, "another").get_items()  # a name made: all weighed
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
        # What the store's sessions keep, as the kept module weighs it.
        session = StoreSession(store, "c0")
        latest = _latest(session)  # the campaign looks inside: a private name
        weight = getattr(latest, "weight", None)
        if weight is None:  # before the bound by bytes: its items, at their size
            weight = sum(value.count for value in latest._kept.values()) * (ITEM_BYTES + 1024)
    within = weight <= 100 * 2**20 + getattr(kept, "KEPT_BYTES", 0)
    bound = 100.0  # MiB: KEPT_IN_ALL (an item count before the bound by bytes)
    note = f"kept {weight / 2**20:.1f} MiB (bound {bound:.0f} MiB), peak RSS {peak} MB"
    return {"kept": ["ok" if within else "lost", note], "note": note}


def _latest(session: object) -> object:
    from sessionstore.integrations import openai_agents

    return openai_agents._kept_by_store[session.store]


async def hardening_case(inner: Path, payload: dict) -> dict:
    handler = {"deep": deep_case, "link": link_case, "long": long_case, "kept": kept_case}
    return await handler[payload["case"]](inner, payload)
