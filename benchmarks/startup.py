"""The command line started in a new process, as a user runs it: `sessionstore
--version` against ``python -c "import sessionstore"``, and ``ls`` and ``show
--tail 20`` on a 10-session SQLite store against a raw script printing the same
rows with sqlite3 after pydantic's import and one model (what any program
handing back validated records pays). Output goes to a pipe, as in a script.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from results import Table, process_seconds

from sessionstore import Message, MessageEntry, SessionMeta, open_store

SESSIONS = 10
MESSAGES = 40

RAW_LS = '''\
import json, sqlite3, sys
import pydantic

class Header(pydantic.BaseModel):
    id: str
    created_at: str
    parent_session: str | None = None
    title: str | None = None
    owner: str | None = None

db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
rows = db.execute("""
    SELECT s.header,
           (SELECT coalesce(max(e.seq), s.base_seq, 0) FROM entries e WHERE e.session_pk = s.pk),
           (SELECT e.timestamp FROM entries e WHERE e.session_pk = s.pk
              ORDER BY e.seq DESC LIMIT 1),
           EXISTS (SELECT 1 FROM entries e WHERE e.session_pk = s.pk AND e.type = 'compaction'),
           l.at,
           (SELECT t.title FROM titles t WHERE t.session_pk = s.pk ORDER BY t.seq DESC LIMIT 1)
    FROM listing l JOIN sessions s ON s.pk = l.session_pk
    ORDER BY l.tick DESC""")
columns = "id created entries last_entry compacted fault parent last_activity owner title"
out = ["\\t".join(columns.split())]
for header, count, last, compacted, at, title in rows:
    h = Header.model_validate(json.loads(header))
    cells = [h.id, h.created_at, count, last or "-", "yes" if compacted else "no", "-",
             h.parent_session or "-", at, h.owner or "-", title or h.title or ""]
    out.append("\\t".join(map(str, cells)))
print("\\n".join(out))
'''
"""What ``sessionstore ls`` prints, read by hand."""

RAW_SHOW = '''\
import json, sqlite3, sys
import pydantic

class Entry(pydantic.BaseModel):
    type: str
    id: str
    timestamp: str
    message: dict[str, object] | None = None

db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
rows = db.execute("""
    SELECT e.seq, e.line FROM entries e JOIN sessions s ON s.pk = e.session_pk
    WHERE s.id = ? ORDER BY e.seq DESC LIMIT 20""", (sys.argv[2],)).fetchall()
out = ["#\\ttype\\ttimestamp\\trole\\ttext\\tid"]
for seq, line in reversed(rows):
    e = Entry.model_validate(json.loads(line))
    message = e.message or {}
    out.append(f"{seq}\\t{e.type}\\t{e.timestamp}\\t{message.get('role', '-')}\\t"
               f"{message.get('content', '')}\\t{e.id}")
print("\\n".join(out))
'''
"""What ``sessionstore show ID --tail 20`` prints, read by hand."""


async def _store(path: Path) -> str:
    """A store of `SESSIONS` sessions of `MESSAGES` messages; the last one's id."""
    session = ""
    async with open_store(str(path)) as store:
        for n in range(SESSIONS):
            session = await store.create(SessionMeta.new())
            said = [
                Message.user(f"hello {n} {m}") if m % 2 == 0 else Message.assistant(f"answer {m}")
                for m in range(MESSAGES)
            ]
            await store.append_many(session, [MessageEntry.new(message) for message in said])
    return session


async def command_line(work: Path, starts: int, table: Table) -> None:
    """The rows of the command line's start, turn about with their baselines,
    in ``table``."""
    path = work / "cli.db"
    session = await _store(path)
    (work / "raw_ls.py").write_text(RAW_LS)
    (work / "raw_show.py").write_text(RAW_SHOW)
    ours = shutil.which("sessionstore", path=str(Path(sys.executable).parent))
    cli = [ours] if ours else [sys.executable, "-m", "sessionstore"]
    py = sys.executable
    jobs = {
        "version": [*cli, "--version"],
        "import": [py, "-c", "import sessionstore"],
        "ls": [*cli, "ls", "--db", str(path)],
        "raw ls": [py, str(work / "raw_ls.py"), str(path)],
        "show": [*cli, "show", session, "--tail", "20", "--db", str(path)],
        "raw show": [py, str(work / "raw_show.py"), str(path), session],
        "sqlalchemy": [py, "-c", "import sessionstore, sqlalchemy"],
    }
    times: dict[str, list[float]] = {name: [] for name in jobs}
    for command in jobs.values():
        process_seconds(command)  # bytecode written, files cached
    for _ in range(starts):
        for name, command in jobs.items():
            times[name].append(process_seconds(command))
    each = f"median of {starts} starts"
    table.add(
        f"sessionstore --version, vs import sessionstore ({each}; target ≤1.5x)",
        times["version"],
        times["import"],
    )
    table.add(
        f"sessionstore ls, {SESSIONS} sessions, vs the raw script (target ≤2x)",
        times["ls"],
        times["raw ls"],
    )
    table.add(
        "sessionstore show --tail 20, vs the raw script (target ≤2x)",
        times["show"],
        times["raw show"],
    )
    table.add(
        "the floor: import sessionstore and SQLAlchemy, vs the raw ls script",
        times["sqlalchemy"],
        times["raw ls"],
    )
