"""Model-based test: every journal backend reads like a reference model."""

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

from sessionstore import CommentWrite, Journal, PostWrite, SessionHeader, SessionStore, encode
from sessionstore.store import SessionJournal
from sessionstore.testing.journal_contract import at
from tests.conftest import PG_ENV, PostgresSchemas
from tests.kinds import JOURNAL_KINDS, StoreTargets

T = TypeVar("T")

uuids = st.uuids()
writes = st.builds(PostWrite, at=st.builds(at, st.integers(0, 59)), id=uuids) | st.builds(
    CommentWrite, at=st.builds(at, st.integers(0, 59)), id=uuids, on=st.none() | uuids
)
hostile = st.sampled_from(
    [b"", b" ", b"\t\r", b"\x0b", b"\xff\xfe", b'{"line":"post","at":"2026-10', b"null", b"[]"]
) | st.binary(max_size=20).filter(lambda data: b"\n" not in data)


class JournalMachine(RuleBasedStateMachine):
    """Apply the same calls to every backend and to the model: a journal file's bytes."""

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.tmp = Path(tempfile.mkdtemp())
        self.stores: list[SessionStore] = []
        # PostgreSQL joins when a server is configured (always in CI).
        server = os.environ.get(PG_ENV)
        self.schemas = PostgresSchemas(server) if server else None
        self.targets = StoreTargets(self.tmp, self.schemas.new if self.schemas else None)
        kinds = [k for k in JOURNAL_KINDS if self.schemas or k != "postgresql"]
        self.journals: list[SessionJournal] = [self.run(self.open(kind)) for kind in kinds]
        self.model = b""

    async def open(self, kind: str) -> SessionJournal:
        backend = await self.targets.journal_backend(kind, self.stores)
        return await backend.open()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coroutine)

    def teardown(self) -> None:
        for store in self.stores:
            self.run(store.close())
        if self.schemas:
            self.schemas.drop_all()
        self.loop.close()
        shutil.rmtree(self.tmp)

    @rule(minute=st.integers(0, 59), model=st.sampled_from(["m1", "claude-test", "Ünï"]))
    def begin(self, minute: int, model: str) -> None:
        header = SessionHeader(started_at=at(minute), model=model)
        leftover = Journal.parse(self.model)
        for journal in self.journals:
            own = self.run(journal.read())
            assert own == leftover
            self.run(journal.begin(header, own))
        if leftover.writes() == 0:
            self.model = b""
        self.model += encode(header).encode() + b"\n"

    @rule(write=writes)
    def append(self, write: PostWrite | CommentWrite) -> None:
        for journal in self.journals:
            self.run(journal.append(write))
        self.model += encode(write).encode() + b"\n"

    @rule(line=hostile)
    def append_raw(self, line: bytes) -> None:
        for journal in self.journals:
            self.run(journal.append_raw(line))
        self.model += line + b"\n"

    @rule()
    def clear(self) -> None:
        for journal in self.journals:
            self.run(journal.clear())
        self.model = b""

    @invariant()
    def every_backend_reads_like_the_model(self) -> None:
        expected = Journal.parse(self.model)
        for journal in self.journals:
            assert self.run(journal.read()) == expected, journal


JournalMachine.TestCase.settings = settings(max_examples=25, stateful_step_count=12, deadline=None)
TestJournalModel = JournalMachine.TestCase
