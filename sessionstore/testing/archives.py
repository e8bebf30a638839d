"""The archive over every store, as tests: what an export writes of forks
and titles (`sessionstore.archive`; part of `SessionStoreContract`)."""

from __future__ import annotations

from pathlib import Path

from sessionstore import SessionMeta
from sessionstore.archive import export_archive
from sessionstore.store import SessionStore
from sessionstore.testing.common import raw
from sessionstore.wire import decode_title_change


def _files(directory: Path) -> dict[str, bytes]:
    if not directory.is_dir():
        return {}
    return {path.name: path.read_bytes() for path in sorted(directory.iterdir())}


class ArchiveContract:
    """Exports, imports and retires over every backend. Mixed into
    `SessionStoreContract`, whose ``store`` fixture it uses."""

    # ------------------------------------------------------------- forks' titles

    async def test_a_forks_header_carries_no_title_its_title_is_a_change_of_its_own(
        self, store: SessionStore
    ) -> None:
        source = SessionMeta.new(title="plan")
        await store.create(source)
        await store.set_title(source.id, "plan, renamed")
        fork = await store.fork(source.id)
        assert fork.title is None
        assert '"title"' not in (await raw(store, fork.id))[0]
        assert [c.title for c in await store.titles(fork.id)] == ["plan, renamed"]
        titles = {s.meta.id: s.title for s in await store.summaries()}
        assert titles == {source.id: "plan, renamed", fork.id: "plan, renamed"}

    async def test_a_fork_of_an_untitled_session_has_no_title(self, store: SessionStore) -> None:
        source = await store.create(SessionMeta.new())
        fork = await store.fork(source)
        assert await store.titles(fork.id) == []
        assert [s.title for s in await store.summaries()] == [None, None]

    async def test_an_export_keeps_each_title_with_its_own_session(
        self, store: SessionStore, tmp_path: Path
    ) -> None:
        await store.create(SessionMeta(id="source"))
        await store.set_title("source", "plan")
        await store.fork("source", meta=SessionMeta(id="fork", title="the fork's own"))
        await store.fork("source", meta=SessionMeta(id="plain"))
        await export_archive(store, tmp_path)
        headers = {
            name: data.split(b"\n", 1)[0] for name, data in _files(tmp_path / "sessions").items()
        }
        assert b'"title"' not in headers["source.jsonl"]
        assert b'"title":"the fork\'s own"' in headers["fork.jsonl"]
        assert b'"title"' not in headers["plain.jsonl"]
        titles = _files(tmp_path / "titles")
        assert sorted(titles) == ["source.jsonl"]
        [change] = titles["source.jsonl"].decode().splitlines()
        assert decode_title_change(change).title == "plan"
