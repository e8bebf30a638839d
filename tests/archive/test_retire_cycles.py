"""A session whose header names itself as its parent, put in a JSONL store by
hand (neither `create` nor an import makes one), retires like any other."""

from pathlib import Path

from sessionstore import JsonlStore
from sessionstore.archive import retire


async def test_a_session_naming_itself_as_parent_retires(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "store")
    (tmp_path / "store").mkdir()
    header = '{"id":"loop","version":1,"parent_session":"loop","created_at":"2020-01-01T00:00:00Z"}'
    (tmp_path / "store" / "loop.jsonl").write_text(header + "\n")
    report = await retire(store, tmp_path / "archive", sessions=["loop"])
    assert (report.retired, report.skipped, report.ok) == (["loop"], [], True)
    assert (tmp_path / "archive" / "sessions" / "loop.jsonl").read_text() == header + "\n"
    assert await store.list() == []
