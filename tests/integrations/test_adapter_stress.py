"""A stress test of the openai-agents adapter: 4 processes of 4 threads, one
conversation, random adds and pops, then every item accounted for.

Each thread runs an event loop of its own, kept for all its calls, as
``Runner.run_sync`` does in a sync application's worker threads. The threads'
calls are a random mix of ``add_items`` (1 to 3 items, each tagged uniquely)
and ``pop_item``, a bounded number of them (tests/workers/adapter_stress.py).
Two layouts, the adapter must be right in both:

* ``sessions-per-thread``: each thread has a `StoreSession` of its own; in
  two processes the threads share one store (what a sync application does:
  one store for the process), in the other two each thread opens its own.
* ``session-per-process``: each process has one store and one
  `StoreSession`, used by all its threads, each on its own loop (what the
  docs advise: one object per conversation in a process).

Then each item that was added is either in the conversation (``get_items``)
or was returned by exactly one pop, never both and never neither; no pop
returned an item never added; each thread's items still there are in the
order it added them; and ``integrity()`` is empty. Every violation found is
reported at once, with examples. A call that raised is reported too; the
items of an add that raised may be anywhere but twice.

The work is bounded by counts, never by time. A call that does not return
is a hang: its worker reports it with the stacks of its threads making
calls, and exits (the test kills the workers as a last resort). One
program imports openai-agents (seconds of work) and forks the four
processes, so the import is paid once per test.

Find these tests with ``-k stress``.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import make_url

from tests.integrations import require

require("agents", extra="openai-agents")

from sessionstore import open_store
from sessionstore.integrations.openai_agents import StoreSession
from tests.helpers import WORKERS
from tests.kinds import StoreTargets

WORKER = WORKERS / "adapter_stress.py"
CHAT = "stress-chat"

PROCESSES = 4
THREADS = 4
OPS = 12
"""Calls per thread: 192 in all, a few seconds per backend. Sixteen threads
of four processes on one conversation conflict on most calls, each conflict
a retry: the contention, not the count, is what finds a race."""
LAYOUTS = {
    "sessions-per-thread": ("shared-store", "own-store", "shared-store", "own-store"),
    "session-per-process": ("shared-session",) * PROCESSES,
}
"""Per process, where its threads get their store and session (the worker's docstring)."""
SEED = 20260509

READY_TIMEOUT = 120.0
"""Seconds for the workers to start (imports, opening stores) on a busy machine."""
WATCHDOG = 60.0
"""Seconds a call may take before its worker reports a hang, dumps every
thread's stack and exits: thousands of times what a call needs, only to
report a hang rather than wait for it."""
BACKSTOP = 300.0
"""Seconds after which the test kills the workers if their watchdogs did not
end them: well beyond any run whose every call returned within WATCHDOG."""

TAG = re.compile(r"p\d+-t\d+-\d+")
ADDRESSES = re.compile(r"<[^<>]* at 0x[0-9a-f]+[^<>]*>")
"""An object's repr in an error message, which differs between objects alike."""
EXAMPLES = 6


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("kind", ["sqlite", "jsonl", "postgresql"])
async def test_stress_adds_and_pops_from_threads_of_processes_lose_and_repeat_nothing(
    kind: str, layout: str, store_targets: StoreTargets, tmp_path: Path
) -> None:
    target = store_targets.new(kind)
    if kind == "sqlite":  # a plain .db path, as most applications name one
        database = make_url(target).database
        assert database is not None
        target = database
    async with open_store(target):  # made (schema, directory) before the workers race
        pass
    records = tmp_path / "records"
    records.mkdir()

    layouts = LAYOUTS[layout]
    stopped = await run_workers(target, layouts, records)

    async with open_store(target) as store:
        current = await StoreSession(store, CHAT).get_items()
        integrity = await store.integrity()
        moves = len(await store.head_history(CHAT))

    done = read_records(records)
    problems = [*stopped, *check(done, current, integrity)]
    if problems:
        pytest.fail(
            f"{kind}, {layout}: {len(problems)} kind(s) of failure\n"
            f"({summary(done)}; at the end {len(current)} items current, {moves} head moves)"
            "\n\n" + "\n\n".join(problems),
            pytrace=False,
        )


# ------------------------------------------------------------------ the workers


async def run_workers(target: str, layouts: tuple[str, ...], records: Path) -> list[str]:
    """Run the workers together to their end; what went wrong with them, if anything."""
    launcher = await asyncio.create_subprocess_exec(
        sys.executable,
        str(WORKER),
        target,
        CHAT,
        str(THREADS),
        str(OPS),
        str(SEED),
        ",".join(layouts),
        str(records),
        str(WATCHDOG),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,  # its processes are one group, killed together
    )
    assert launcher.stdout is not None
    problems: list[str] = []
    try:
        try:
            line = await asyncio.wait_for(launcher.stdout.readline(), READY_TIMEOUT)
        except TimeoutError:
            line = b"(nothing: not ready in time)"
        if line != b"ready\n":
            os.killpg(launcher.pid, signal.SIGKILL)
            stdout, stderr = await launcher.communicate()
            pytest.fail(
                f"the workers did not start, saying {line + stdout!r}:\n{tail(stderr)}"
                + "".join(output(records, process) for process in range(PROCESSES)),
                pytrace=False,
            )
        waiting = asyncio.ensure_future(launcher.communicate(b"go\n"))
        try:
            stdout, stderr = await asyncio.wait_for(asyncio.shield(waiting), BACKSTOP)
        except TimeoutError:
            os.killpg(launcher.pid, signal.SIGKILL)
            stdout, stderr = await waiting
            problems.append(
                f"HANG: the workers were still running after {BACKSTOP:.0f} s and were killed"
            )
    finally:
        if launcher.returncode is None:
            os.killpg(launcher.pid, signal.SIGKILL)
            await launcher.wait()
    lines = stdout.decode().splitlines()
    ended = dict(line.split(" exited ", 1) for line in lines if " exited " in line)
    for process in range(PROCESSES):
        name = f"p{process}"
        code = ended.get(name)
        if code == "0":
            continue
        said = output(records, process)
        what = "a call hung" if "HUNG: " in said else "it failed"
        problems.append(
            f"WORKER: {name} ({layouts[process]}) "
            + (f"exited with status {code} ({what})" if code else "never ended")
            + said
        )
    if stderr:
        problems.append(f"WORKER: the launcher said:\n{tail(stderr)}")
    return problems


def output(records: Path, process: int) -> str:
    """What process ``process`` wrote: its tracebacks, or on a hang which
    calls hung and where its threads making calls stood."""
    path = records / f"p{process}.stderr"
    said = path.read_bytes().decode(errors="replace") if path.exists() else ""
    if "HUNG: " in said:
        # faulthandler's dump: a block per thread; the store's own threads
        # (idle workers) are left out, and equal stacks are shown once.
        head, _, dump = said.partition("\nThread 0x")
        blocks = [block.partition("\n")[2] for block in ("Thread 0x" + dump).split("\n\n")]
        calling = Counter(block for block in blocks if " in calls\n" in block)
        said = head + "".join(
            f"\n{count} thread(s) stood at (most recent call first):\n{block}"
            for block, count in calling.items()
        )
    return f"; p{process}.stderr:\n{tail(said)}" if said else ""


def tail(output: bytes | str, size: int = 6000) -> str:
    text = output if isinstance(output, str) else output.decode(errors="replace")
    return text if len(text) <= size else f"[... {len(text) - size} characters]\n" + text[-size:]


# ------------------------------------------------------------------ what they did


@dataclass
class Records:
    """What the threads recorded, gathered."""

    added: dict[str, str] = field(default_factory=dict)
    """Each tag whose ``add_items`` returned: which call added it."""
    unsure: dict[str, str] = field(default_factory=dict)
    """Each tag whose ``add_items`` raised or never ended: added, or not."""
    order: dict[str, dict[str, int]] = field(default_factory=dict)
    """Per thread, the place of each tag it tried to add, in its order."""
    pops: list[tuple[str, Any]] = field(default_factory=list)
    """Each pop that returned: which call, and what it returned."""
    errors: list[dict[str, Any]] = field(default_factory=list)
    in_flight: dict[str, str] = field(default_factory=dict)
    """Per thread, the call it began and never ended (it hung or died)."""
    unfinished: list[str] = field(default_factory=list)
    """Threads that never recorded their end."""
    calls: Counter[str] = field(default_factory=Counter)


def read_records(records: Path) -> Records:
    gathered = Records()
    for process in range(PROCESSES):
        for thread in range(THREADS):
            name = f"p{process}-t{thread}"
            path = records / f"{name}.jsonl"
            lines = path.read_text().splitlines() if path.exists() else []
            order = gathered.order.setdefault(name, {})
            started: dict[str, Any] | None = None
            done = False
            for line in lines:
                try:
                    entry = json.loads(line)
                except json.JSONDecodeError:  # the last line of a killed worker, cut short
                    continue
                op = entry["op"]
                where = f"{name} call {entry.get('n')}"
                if op == "start":
                    started = entry
                    for tag in entry["tags"]:
                        order[tag] = len(order)
                    continue
                if op == "done":
                    done = True
                    continue
                started = None
                gathered.calls[op] += 1
                if op == "add":
                    gathered.added.update((tag, where) for tag in entry["tags"])
                elif op == "pop":
                    gathered.pops.append((where, entry["item"]))
                elif op == "error":
                    entry["where"] = where
                    gathered.errors.append(entry)
                    gathered.unsure.update((tag, where) for tag in entry["tags"])
            if started is not None:
                where = f"{name} call {started['n']} ({started['call']})"
                gathered.in_flight[name] = f"in call {started['n']} ({started['call']})"
                gathered.unsure.update((tag, where) for tag in started["tags"])
            if not done:
                gathered.unfinished.append(name)
    return gathered


def check(records: Records, current: list[Any], integrity: list[Any]) -> list[str]:
    """Every violation of the adapter's promises, each a paragraph with examples."""
    problems: list[str] = []

    def report(title: str, examples: list[str]) -> None:
        if examples:
            shown = "\n".join(f"  - {example}" for example in examples[:EXAMPLES])
            more = (
                f"\n  ... and {len(examples) - EXAMPLES} more" if len(examples) > EXAMPLES else ""
            )
            problems.append(f"{title}: {len(examples)}\n{shown}{more}")

    report(
        "THREADS that never finished their calls (see WORKER above)",
        [f"{name}: {records.in_flight.get(name, 'between calls')}" for name in records.unfinished],
    )
    by_error: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for error in records.errors:
        by_error[ADDRESSES.sub("<...>", error["error"])].append(error)
    for what, errors in by_error.items():
        calls = ", ".join(f"{k} {v}" for k, v in Counter(e["call"] for e in errors).items())
        where = ", ".join(error["where"] for error in errors[:EXAMPLES])
        problems.append(
            f"ERROR raised by {len(errors)} call(s) ({calls}): "
            f"{what}\n  at {where}{', ...' if len(errors) > EXAMPLES else ''}\n"
            f"  the first: {errors[0]['error']}\n{errors[0]['traceback']}"
        )

    known = records.added.keys() | records.unsure.keys()
    current_tags: list[str] = []
    strange: list[str] = []
    for position, item in enumerate(current):
        tag = tag_of(item)
        if tag is None or tag not in known:
            strange.append(f"position {position}: {item!r}")
        else:
            current_tags.append(tag)
    report("CURRENT items never added (or changed)", strange)
    in_current = Counter(current_tags)
    report(
        "CURRENT items there more than once",
        [f"{tag} x{count}" for tag, count in in_current.items() if count > 1],
    )

    popped_by: dict[str, list[str]] = defaultdict(list)
    never_added: list[str] = []
    for where, item in records.pops:
        if item is None:
            continue
        tag = tag_of(item)
        if tag is None or tag not in known:
            never_added.append(f"{where} returned {item!r}")
        else:
            popped_by[tag].append(where)
    report("POPPED items never added", never_added)
    report(
        "POPPED items returned by more than one pop",
        [
            f"{tag} (added by {records.added.get(tag) or records.unsure[tag]}) popped by "
            + ", ".join(wheres)
            for tag, wheres in popped_by.items()
            if len(wheres) > 1
        ],
    )
    report(
        "BOTH current and popped",
        [
            f"{tag} (added by {records.added.get(tag) or records.unsure[tag]}) "
            f"popped by {', '.join(popped_by[tag])}"
            for tag in in_current
            if tag in popped_by
        ],
    )
    neither = [
        f"{tag} (added by {where})"
        for tag, where in records.added.items()
        if tag not in in_current and tag not in popped_by
    ]
    if neither and (records.in_flight or any(e["call"] == "pop" for e in records.errors)):
        neither.insert(0, "(some pops raised or never ended: they may have taken some of these)")
    report("LOST: added, yet neither current nor popped", neither)

    disorder: list[str] = []
    for thread, order in records.order.items():
        mine = [tag for tag in in_current if tag.rpartition("-")[0] == thread]  # repeats once
        if mine != sorted(mine, key=order.__getitem__):
            disorder.append(f"{thread}: {mine}")
    report("ORDER: a thread's current items not in the order it added them", disorder)
    report("INTEGRITY problems", [repr(problem) for problem in integrity])
    return problems


def summary(records: Records) -> str:
    return (
        f"calls ended: {dict(records.calls)}; pops returning an item: "
        f"{sum(item is not None for _, item in records.pops)}; items added: "
        f"{len(records.added)}, perhaps added (their add raised or never ended): "
        f"{len(records.unsure)}"
    )


def tag_of(item: Any) -> str | None:
    """The tag an item carries, if it is exactly an item the workers add."""
    if not isinstance(item, dict) or set(item) != {"role", "content"} or item["role"] != "user":
        return None
    content = item["content"]
    return content if isinstance(content, str) and TAG.fullmatch(content) else None
