"""Processes whose threads add and pop items of one openai-agents
conversation at random, for the adapter's stress test
(tests/integrations/test_adapter_stress.py).

Usage: python adapter_stress.py TARGET NAME THREADS OPS SEED LAYOUTS OUTDIR WATCHDOG

LAYOUTS is a comma-separated list, one word per process, saying where its
threads get their store and their `StoreSession` on the conversation NAME:

* ``shared-store``: one store, opened by the process before its threads
  start (what a sync application does), and a session per thread;
* ``own-store``: a store per thread, opened on its loop, and a session on it;
* ``shared-session``: one store and one session, made by the process, used
  by all its threads (the docs' advice: one object per conversation in a
  process).

This program imports the adapter (and openai-agents: seconds of work) once,
then forks the processes before any thread, loop or store exists: they
share nothing but the storage, as separate programs would.

Each process runs THREADS threads. Each thread has an event loop of its own,
kept for all its calls as ``Runner.run_sync`` keeps a thread's loop. It
makes OPS calls, drawn from a random generator seeded by SEED and the
thread's name: ``add_items`` of 1 to 3 items, or ``pop_item``. Each item is
``{"role": "user", "content": TAG}``, its tag ``pPROCESS-tTHREAD-N`` found
nowhere else, N counting up in the order the thread adds its items.

Thread T of process P records to ``OUTDIR/pP-tT.jsonl``, one JSON object a
line, flushed as it goes:

* ``{"op": "start", "n": K, "call": "add" | "pop", "tags": [...]}`` before
  call K (``tags``: the items an add is about to add, or ``[]``);
* ``{"op": "add", "n": K, "tags": [...]}`` once ``add_items`` returned;
* ``{"op": "pop", "n": K, "item": ITEM}`` once ``pop_item`` returned (ITEM
  is what it returned, ``null`` for None);
* ``{"op": "error", "n": K, "call": ..., "tags": [...], "error": ..., "traceback": ...}``
  when the call raised (the thread goes on with its next call); ``call``
  is ``open``, K -1, when the thread could not open its store;
* ``{"op": "done"}`` after its last call.

A process's own output goes to ``OUTDIR/pP.stderr``. This program prints
``ready`` once every thread of every process has its loop, store and
session, then waits for a line on stdin and releases them all at once;
at the end it prints ``pP exited CODE`` for each process, and exits 0 when
all of them did. A call that has not returned after WATCHDOG seconds is a
hang: its process writes ``HUNG: <thread> call <K> (<call>) ...`` and every
thread's stack to its ``.stderr``, and exits with status 1, so that a hang
is reported rather than waited for.
"""

from __future__ import annotations

import asyncio
import faulthandler
import json
import os
import random
import signal
import sys
import threading
import time
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import IO, Any, TypeVar, cast

from agents import TResponseInputItem

from sessionstore import SessionStore, open_store
from sessionstore.integrations.openai_agents import StoreSession

_T = TypeVar("_T")

ADD_SHARE = 0.6
"""How often a call is an add rather than a pop: more adds than pops, so that
the conversation grows and most pops find an item."""


def record(out: IO[str], **fields: Any) -> None:
    out.write(json.dumps(fields) + "\n")
    out.flush()


LAYOUTS = ("shared-store", "own-store", "shared-session")
"""Where a process's threads get their store and their `StoreSession` (module docstring)."""


class Worker:
    """One thread: its loop, its session, its calls and its record."""

    def __init__(
        self, name: str, ops: int, seed: int, out: IO[str], shared: StoreSession | None
    ) -> None:
        self.name = name
        self.ops = ops
        self.random = random.Random(f"{seed}-{name}")
        self.out = out
        self.shared = shared
        self.loop = asyncio.new_event_loop()
        self.made = 0
        self.store: SessionStore | None = None  # its own, to close
        self.session = shared
        self.call: tuple[int, str, float] | None = None
        """The call under way: its number, add or pop, and when it began."""

    def run(self, call: Callable[[], Awaitable[_T]]) -> _T:
        """``call()`` run to its end on this thread's loop, as ``run_sync`` runs a turn."""

        async def whole() -> _T:
            return await call()

        return self.loop.run_until_complete(whole())

    def begin(self, n: int, call: str, tags: list[str]) -> None:
        record(self.out, op="start", n=n, call=call, tags=tags)
        self.call = (n, call, time.monotonic())

    def open(self, plan: Plan, layout: str, store: SessionStore | None) -> None:
        asyncio.set_event_loop(self.loop)  # the thread's default loop, as run_sync makes it
        if layout == "own-store":
            self.store = store = self.run(partial(open_store, plan.target))
        if layout != "shared-session":
            assert store is not None
            self.session = StoreSession(store, plan.name)

    def close(self) -> None:
        if self.store is not None:
            self.run(self.store.close)
        self.loop.close()

    def calls(self) -> None:
        session = self.session
        assert session is not None
        for n in range(self.ops):
            if self.random.random() < ADD_SHARE:
                tags = [f"{self.name}-{self.made + i}" for i in range(self.random.randint(1, 3))]
                self.made += len(tags)
                items = [cast(TResponseInputItem, {"role": "user", "content": t}) for t in tags]
                self.begin(n, "add", tags)
                try:
                    self.run(partial(session.add_items, items))
                except Exception as exc:
                    self.failed(n, "add", tags, exc)
                else:
                    record(self.out, op="add", n=n, tags=tags)
            else:
                self.begin(n, "pop", [])
                try:
                    item = self.run(session.pop_item)
                except Exception as exc:
                    self.failed(n, "pop", [], exc)
                else:
                    record(self.out, op="pop", n=n, item=item)
            self.call = None
        record(self.out, op="done")

    def failed(self, n: int, call: str, tags: list[str], exc: BaseException) -> None:
        record(
            self.out,
            op="error",
            n=n,
            call=call,
            tags=tags,
            error=f"{type(exc).__name__}: {exc}",
            traceback="".join(traceback.format_exception(exc)),
        )


@dataclass
class Plan:
    """What every process of a run is given."""

    target: str
    name: str
    threads: int
    ops: int
    seed: int
    outdir: Path
    watchdog: float


def thread_main(
    worker: Worker,
    plan: Plan,
    layout: str,
    store: SessionStore | None,
    ready: threading.Barrier,
    go: threading.Event,
) -> None:
    try:
        worker.open(plan, layout, store)
    except BaseException as exc:
        worker.failed(-1, "open", [], exc)
        ready.abort()
        raise
    try:
        ready.wait()
        go.wait()
        worker.calls()
    finally:
        worker.close()


def process_main(plan: Plan, process: int, layout: str, ready_w: int, go_r: int) -> None:
    """One process: its store(s), its threads, its calls, once the launcher says go."""

    async def opened() -> SessionStore:
        return await open_store(plan.target)

    opening = asyncio.Runner()  # the process's own loop: a sync app opening its store
    store = None if layout == "own-store" else opening.run(opened())
    shared = StoreSession(store, plan.name) if store and layout == "shared-session" else None
    ready, go = threading.Barrier(plan.threads + 1), threading.Event()
    names = [f"p{process}-t{t}" for t in range(plan.threads)]
    files = [(plan.outdir / f"{name}.jsonl").open("w") for name in names]
    workers = [
        Worker(name, plan.ops, plan.seed, file, shared)
        for name, file in zip(names, files, strict=True)
    ]
    running = [
        threading.Thread(target=thread_main, args=(w, plan, layout, store, ready, go), name=w.name)
        for w in workers
    ]
    for thread in running:
        thread.start()
    ready.wait()  # raises BrokenBarrierError when a thread could not open its store
    os.write(ready_w, b"r")
    os.close(ready_w)
    os.read(go_r, 1)  # the end of the pipe, once the launcher closes it: all go at once
    go.set()
    for thread in running:
        while thread.is_alive():
            thread.join(0.2)
            watch(workers, plan.watchdog)
    if store is not None:
        opening.run(store.close())
    opening.close()
    for file in files:
        file.close()


def watch(workers: list[Worker], watchdog: float) -> None:
    """Report a hang and end the process: a call still running after ``watchdog`` s."""
    now = time.monotonic()
    hung = [
        f"HUNG: {worker.name} call {call[0]} ({call[1]}) has not returned after {watchdog:.0f} s"
        for worker in workers
        if (call := worker.call) is not None and now - call[2] > watchdog
    ]
    if hung:
        print("\n".join(hung), file=sys.stderr, flush=True)
        faulthandler.dump_traceback(all_threads=True)
        os._exit(1)


def child(plan: Plan, process: int, layout: str, ready_w: int, go_r: int) -> int:
    """Run process ``process`` in a forked child, its output in ``pPROCESS.stderr``."""
    output = os.open(plan.outdir / f"p{process}.stderr", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(output, 1)
    os.dup2(output, 2)
    try:
        process_main(plan, process, layout, ready_w, go_r)
    except BaseException:
        traceback.print_exc()
        return 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    return 0


def launch(plan: Plan, layouts: list[str]) -> int:
    """Fork one process per layout; say ``ready`` when all are, and
    release them together at a line on stdin; then say how each ended."""
    if any(layout not in LAYOUTS for layout in layouts):
        raise SystemExit(f"each layout is one of {LAYOUTS}, not {layouts!r}")
    # Forked after the slow imports, before any thread, loop or store exists:
    # the processes share nothing but the files, as separate programs would.
    assert threading.active_count() == 1, "fork before any thread starts"
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    pids = []
    for process, layout in enumerate(layouts):
        pid = os.fork()
        if pid == 0:
            os.close(ready_r)
            os.close(go_w)
            os._exit(child(plan, process, layout, ready_w, go_r))
        pids.append(pid)
    os.close(ready_w)
    os.close(go_r)
    readied = 0
    while readied < len(layouts) and (byte := os.read(ready_r, 1)):
        readied += len(byte)
    if readied < len(layouts):
        print(f"only {readied} of {len(layouts)} processes got ready", flush=True)
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
    else:
        print("ready", flush=True)
        sys.stdin.readline()
    os.close(go_w)
    codes = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in pids]
    for process, code in enumerate(codes):
        print(f"p{process} exited {code}", flush=True)
    return 0 if readied == len(layouts) and not any(codes) else 1


if __name__ == "__main__":
    target, name, threads, ops, seed, layouts, outdir, watchdog = sys.argv[1:9]
    plan = Plan(target, name, int(threads), int(ops), int(seed), Path(outdir), float(watchdog))
    sys.exit(launch(plan, layouts.split(",")))
