"""The archive over every store, as tests: what an export writes of forks and
titles, an export racing an erase, and parent links that form a cycle
(`sessionstore.archive`; part of `SessionStoreContract`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import pytest

from sessionstore import ArchiveError, SessionMeta
from sessionstore.archive import ArchiveReport, export_archive, import_archive, retire
from sessionstore.models import TitleChange
from sessionstore.store import Capability, SessionStore
from sessionstore.testing.capabilities import needs
from sessionstore.testing.common import message, raw, stream
from sessionstore.wire import decode_title_change

ERASE_POINTS = ["integrity", "titles", "raw_blocks", "between_blocks"]
"""Where `_ErasingStore` erases its victim: just before the export's call of
`integrity`, of the victim's `titles` or `raw_blocks`, or after the first
block `raw_blocks` gave (or ``"second_raw_blocks"``: before the victim's
second `raw_blocks`, retire's check of the archive's copy)."""


class _ErasingStore:
    """The store, but the session ``victim`` is erased (through the store
    itself, as another writer would) at the moment ``point`` of an export:
    the race of an export with an erase, made to happen every time."""

    def __init__(self, store: SessionStore, victim: str, point: str) -> None:
        self._store = store
        self._victim = victim
        self._point = point
        self._reads = 0  # of the victim's raw_blocks
        self.erased = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def _erase(self, point: str, session_id: str | None = None) -> None:
        if point == self._point and session_id in (None, self._victim) and not self.erased:
            self.erased = True
            await self._store.erase(self._victim, reason="erased during the export")

    async def integrity(self) -> list[str]:
        await self._erase("integrity")
        return await self._store.integrity()

    async def titles(self, session_id: str) -> list[TitleChange]:
        await self._erase("titles", session_id)
        return await self._store.titles(session_id)

    async def raw_blocks(self, session_id: str) -> AsyncIterator[bytes]:
        if session_id == self._victim:
            self._reads += 1
            if self._reads == 2:
                await self._erase("second_raw_blocks", session_id)
        await self._erase("raw_blocks", session_id)
        async for block in self._store.raw_blocks(session_id):
            yield block
            await self._erase("between_blocks", session_id)


def _files(directory: Path) -> dict[str, bytes]:
    if not directory.is_dir():
        return {}
    return {path.name: path.read_bytes() for path in sorted(directory.iterdir())}


def _header(session_id: str, parent: str | None) -> str:
    link = "" if parent is None else f',"parent_session":"{parent}"'
    return f'{{"id":"{session_id}","version":1{link},"created_at":"2020-01-01T00:00:00Z"}}'


def _archive_of(root: Path, sessions: dict[str, str | None]) -> None:
    """An archive whose sessions name the parents given, each with an entry."""
    (root / "sessions").mkdir(parents=True)
    entry = '{"type":"message","id":"m1","timestamp":"2020-01-01T00:00:00Z",'
    entry += '"message":{"role":"user","content":"hello"}}'
    for session_id, parent in sessions.items():
        text = _header(session_id, parent) + "\n" + entry + "\n"
        (root / "sessions" / f"{session_id}.jsonl").write_text(text)


@needs(*Capability)  # the archive carries heads, titles and erasures
class ArchiveContract:
    """Exports, imports and retires over every backend."""

    # ------------------------------------------------------------- forks' titles

    async def test_an_export_keeps_each_title_with_its_own_session(
        self, store: SessionStore, tmp_path: Path
    ) -> None:
        await store.create(SessionMeta(id="source"))
        await store.set_title("source", "plan")
        await store.fork("source", meta=SessionMeta(id="fork", title="the fork's own"))
        plain = (await store.fork("source")).id  # titled as its source, by a change of its own
        await export_archive(store, tmp_path)
        headers = {
            name: data.split(b"\n", 1)[0] for name, data in _files(tmp_path / "sessions").items()
        }
        assert b'"title"' not in headers["source.jsonl"]
        assert b'"title":"the fork\'s own"' in headers["fork.jsonl"]
        assert b'"title"' not in headers[f"{plain}.jsonl"]
        titles = _files(tmp_path / "titles")
        assert sorted(titles) == sorted(["source.jsonl", f"{plain}.jsonl"])
        for name in ("source.jsonl", f"{plain}.jsonl"):
            [change] = titles[name].decode().splitlines()
            assert decode_title_change(change).title == "plan"

    # ------------------------------------------------------------- erased while exporting

    @pytest.mark.parametrize("point", ERASE_POINTS)
    async def test_a_session_erased_during_an_export_is_left_out_and_the_rest_exported(
        self, store: SessionStore, tmp_path: Path, point: str
    ) -> None:
        for session_id in ("a", "b", "c"):
            await store.create(SessionMeta(id=session_id))
            await store.append(session_id, message(f"{session_id}-1", "hello"))
            await store.set_title(session_id, f"about {session_id}")
        before = {session_id: await raw(store, session_id) for session_id in ("a", "b", "c")}
        racing = _ErasingStore(store, "b", point)
        report = await export_archive(cast(SessionStore, racing), tmp_path)
        assert racing.erased
        assert report.ok
        sessions = _files(tmp_path / "sessions")
        for session_id in ("a", "c"):
            assert sessions[f"{session_id}.jsonl"].decode().splitlines() == before[session_id]
        left_out = [w for w in report.warnings if w.file.endswith("b.jsonl")]
        if "b.jsonl" in sessions:  # read whole before the erase reached it: the whole of it
            assert point == "between_blocks"
            assert sessions["b.jsonl"].decode().splitlines() == before["b"]
            assert report.sessions == 3
            assert not left_out
        else:
            assert [w.reason for w in left_out] == ["erased while exporting: left out"]
            assert "b.jsonl" not in _files(tmp_path / "titles")
            assert report.sessions == 2

    # ------------------------------------------------------------- parent cycles

    async def test_an_archive_whose_parent_links_form_a_cycle_is_refused_naming_them(
        self, store: SessionStore, tmp_path: Path
    ) -> None:
        links = {"a": "b", "b": "a", "self": "self", "below": "a", "plain": None}
        _archive_of(tmp_path, links)
        with pytest.raises(ArchiveError) as caught:
            await import_archive(store, tmp_path)
        report = caught.value.report
        assert isinstance(report, ArchiveReport)
        refused = {Path(i.file).name: (i.line, i.reason) for i in report.refused}
        assert sorted(refused) == ["a.jsonl", "b.jsonl", "self.jsonl"]
        assert refused["self.jsonl"][0] == 1
        assert "names the session itself as its parent_session" in refused["self.jsonl"][1]
        b_file = tmp_path / "sessions" / "b.jsonl"
        assert refused["a.jsonl"] == (
            1,
            f"its header's parent_session starts a cycle: a -> b ({b_file}) -> a; "
            "a session cannot be its own ancestor: not imported",
        )
        assert sorted(m.id for m in await store.list()) == ["below", "plain"]

    async def test_an_import_closing_a_cycle_with_the_store_is_refused(
        self, store: SessionStore, tmp_path: Path
    ) -> None:
        await store.create(SessionMeta(id="a"))
        await store.fork("a", meta=SessionMeta(id="b"))
        await store.erase("a", reason="gone")
        _archive_of(tmp_path, {"a": "b"})  # a names b, which names a
        with pytest.raises(ArchiveError, match=r"a -> b \(in the store\) -> a"):
            await import_archive(store, tmp_path)
        assert [m.id for m in await store.list()] == ["b"]

    async def test_retire_of_a_family_whose_parent_links_form_a_cycle_retires_it(
        self, store: SessionStore, tmp_path: Path
    ) -> None:
        for session_id, parent in (("a", "b"), ("b", "a"), ("below", "a")):
            await store.import_session(_header(session_id, parent), stream([]))
        report = await retire(store, tmp_path, sessions=["a", "b", "below"])
        assert report.ok
        assert sorted(report.retired) == ["a", "b", "below"]
        assert report.retired.index("below") < report.retired.index("a")
        assert report.skipped == []
        assert await store.list() == []

    async def test_retire_leaves_a_cycle_whose_fork_stays_and_says_why(
        self, store: SessionStore, tmp_path: Path
    ) -> None:
        for session_id, parent in (("a", "b"), ("b", "a"), ("below", "a")):
            await store.import_session(_header(session_id, parent), stream([]))
        report = await retire(store, tmp_path, sessions=["a", "b"])
        assert sorted(report.retired) == ["b"]
        [issue] = report.skipped
        assert (issue.session_id, issue.fault) == ("a", False)
        assert "its fork(s) below stay in the store" in issue.reason
        assert sorted(m.id for m in await store.list()) == ["a", "below"]

    @pytest.mark.parametrize("point", ["titles", "raw_blocks"])
    async def test_a_session_erased_while_retire_exports_it_is_skipped_not_a_fault(
        self, store: SessionStore, tmp_path: Path, point: str
    ) -> None:
        for session_id in ("a", "b", "c"):
            await store.create(SessionMeta(id=session_id, created_at="2020-01-01T00:00:00Z"))
            await store.append(session_id, message(f"{session_id}-1", "hello"))
        racing = _ErasingStore(store, "b", point)
        report = await retire(cast(SessionStore, racing), tmp_path, before="2021-01-01T00:00:00Z")
        assert racing.erased
        assert (sorted(report.retired), report.ok) == (["a", "c"], True)
        assert [(i.session_id, i.reason) for i in report.skipped] == [
            ("b", "erased meanwhile, by another")
        ]
        assert sorted(p.name for p in (tmp_path / "sessions").iterdir()) == ["a.jsonl", "c.jsonl"]
        assert await store.list() == []

    async def test_a_fork_erased_by_another_during_retire_no_longer_holds_its_parent(
        self, store: SessionStore, tmp_path: Path
    ) -> None:
        await store.create(SessionMeta(id="source", created_at="2020-01-01T00:00:00Z"))
        await store.fork("source", meta=SessionMeta(id="fork", created_at="2020-01-01T00:00:00Z"))
        racing = _ErasingStore(store, "fork", "second_raw_blocks")  # retire's check of its copy
        report = await retire(cast(SessionStore, racing), tmp_path, sessions=["source", "fork"])
        assert racing.erased
        assert report.retired == ["source"]
        assert [(i.session_id, i.reason) for i in report.skipped] == [
            ("fork", "erased meanwhile, by another")
        ]
        assert await store.list() == []
