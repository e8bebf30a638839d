"""Model-based test: every journal backend's keyed lines read like a model.

Two objects per backend (two stores on persistent storage), one writing,
both reading, so each index is caught up with writes it did not make.
"""

import asyncio
import os
import shutil
import tempfile
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from sessionstore import SessionStore
from sessionstore.store import SessionJournal
from sessionstore.wire import line_key
from tests.conftest import PG_ENV, PostgresSchemas
from tests.kinds import JOURNAL_KINDS, StoreTargets

T = TypeVar("T")

KEYS = ["", "a", "a:1", "a:2", "a:10", "b", "é", "\U0010ffff"]
keyed_lines = st.builds(
    lambda key, n: f'{{"key":"{key}","n":{n}}}'.encode(), st.sampled_from(KEYS), st.integers(0, 9)
)
other_lines = st.sampled_from(
    [b'{"line":"post"}', b'{"key":"a","key":"a"}', b'{"key":"b"', b"", b'{"key":1}', b"\xff"]
)
prefixes = st.sampled_from(["", "a", "a:", "a:1", "b", "c", "\U0010ffff"])
bounds = st.sampled_from([None, "", "a:1", "a:2", "b", "z"])


class KeyedMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.tmp = Path(tempfile.mkdtemp())
        self.stores: list[SessionStore] = []
        server = os.environ.get(PG_ENV)
        self.schemas = PostgresSchemas(server) if server else None
        self.targets = StoreTargets(self.tmp, self.schemas.new if self.schemas else None)
        kinds = [k for k in (*JOURNAL_KINDS, "sqlite-sealed") if self.schemas or k != "postgresql"]
        self.pairs = [self.run(self.open(kind)) for kind in kinds]
        self.model: list[bytes] = []  # the lines since the last clear

    async def open(self, kind: str) -> tuple[SessionJournal, SessionJournal]:
        backend = await self.targets.journal_backend(kind, self.stores)
        return await backend.open(), await backend.open()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coroutine)

    def teardown(self) -> None:
        for store in self.stores:
            self.run(store.close())
        if self.schemas:
            self.schemas.drop_all()
        self.loop.close()
        shutil.rmtree(self.tmp)

    def keyed(self, keys: list[str]) -> dict[str, list[bytes]]:
        found: dict[str, list[bytes]] = {}
        for line in self.model:
            key = line_key(line)
            if key in keys:
                found.setdefault(key, []).append(line)
        return found

    @rule(lines=st.lists(keyed_lines | other_lines, min_size=1, max_size=3))
    def append_raw(self, lines: list[bytes]) -> None:
        for writer, _ in self.pairs:
            self.run(writer.append_raw(*lines))
        self.model += lines

    @rule()
    def clear(self) -> None:
        for writer, _ in self.pairs:
            self.run(writer.clear())
        self.model = []

    @rule(keys=st.lists(st.sampled_from(KEYS), min_size=1, max_size=2))
    def drop(self, keys: list[str]) -> None:
        for writer, _ in self.pairs:
            self.run(writer.drop(*keys, reason="model"))
        self.model = [line for line in self.model if line_key(line) not in keys]

    @rule(prefix=prefixes, before=bounds, limit=st.sampled_from([None, 1, 2]))
    def scan(self, prefix: str, before: str | None, limit: int | None) -> None:
        found = self.keyed(KEYS)
        wanted = sorted(
            (k for k in found if k.startswith(prefix) and (before is None or k < before)),
            reverse=True,
        )[:limit]
        expected = [(key, found[key]) for key in wanted]
        for pair in self.pairs:
            for journal in pair:
                assert self.run(journal.scan(prefix, before=before, limit=limit)) == expected

    @invariant()
    def every_backend_finds_the_models_lines(self) -> None:
        expected = self.keyed(KEYS)
        for pair in self.pairs:
            for journal in pair:
                assert self.run(journal.keyed(*KEYS)) == expected, journal


KeyedMachine.TestCase.settings = settings(max_examples=20, stateful_step_count=12, deadline=None)
TestKeyedModel = KeyedMachine.TestCase
