"""PostgreSQL: after an erase, the procedure docs/sql.md gives under "Where
the bytes go" leaves no byte of the session or journal in the files of the
database (and, when the server unlinks old WAL, in ``pg_wal``).

The files are searched through the server (`pg_read_binary_file`), so the
test needs a superuser, as the procedure does; it skips without one, and
fails under CI=true, whose server is the project's own.
"""

from __future__ import annotations

import base64
import json
import os
import re
import time
import uuid
from collections.abc import Iterator
from datetime import datetime

import psycopg
import pytest

from sessionstore import SessionMeta, SqlStore
from sessionstore.testing.contract import message
from tests.helpers import ROOT

DOCS = ROOT / "docs" / "sql.md"

# The procedure, in the order docs/sql.md gives it, each step after a wait
# for the transactions begun before the previous one's moment to end.
TABLES = "sessions, entries, titles, listing, activity, search_vectors, journal_lines"
# ANALYZE leaves the statistics of a table it finds empty as they were.
FORGET = (
    "DELETE FROM pg_statistic WHERE starelid IN"
    " (SELECT oid FROM pg_class WHERE relnamespace = current_schema()::regnamespace)"
)
REWRITE = [f"VACUUM FULL {TABLES}", FORGET, f"ANALYZE {TABLES}"]
STATISTICS = ["VACUUM FULL pg_statistic"]
WAL = ["SELECT pg_switch_wal()", "CHECKPOINT"]
OLDER = (
    "SELECT pid, xact_start, state FROM pg_stat_activity"
    " WHERE xact_start < %(t)s AND pid <> pg_backend_pid()"
    " AND (backend_xmin IS NOT NULL OR backend_xid IS NOT NULL)"
)

# Every file of the database (and of pg_wal when asked) holding a marker.
FIND = """
SELECT d.dir || '/' || f, m.key
FROM (
    SELECT 'base/' || oid AS dir FROM pg_database WHERE datname = current_database()
    UNION ALL SELECT 'pg_wal' WHERE %(wal)s
) d,
LATERAL pg_ls_dir(d.dir) f,
LATERAL pg_stat_file(d.dir || '/' || f, true) s,
LATERAL pg_read_binary_file(d.dir || '/' || f, 0, s.size, true) b,
LATERAL jsonb_each_text(%(markers)s::jsonb) m
WHERE NOT s.isdir AND s.size > 0 AND position(convert_to(m.value, 'UTF8') IN b) > 0
"""


def conninfo(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


@pytest.fixture
def superuser(pg_url: str) -> Iterator[psycopg.Connection]:
    """A connection in the store's schema that may read the server's files."""
    with psycopg.connect(conninfo(pg_url), autocommit=True) as connection:
        row = connection.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
        if row.fetchone() != (True,):
            if os.environ.get("CI") == "true":
                pytest.fail("CI=true but the PostgreSQL role is not a superuser")
            pytest.skip("reading the server's files needs a superuser")
        yield connection


def documented_statements() -> str:
    """The SQL of the PostgreSQL bullet of "Where the bytes go", one line."""
    section = DOCS.read_text().split("**Where the bytes go.**", 1)[1]
    bullet = section.split("- **PostgreSQL**", 1)[1]
    blocks = re.findall(r"```sql\n(.*?)```", bullet, flags=re.DOTALL)
    return " ".join(" ".join(blocks).split())


def now(connection: psycopg.Connection) -> datetime:
    moment = connection.execute("SELECT clock_timestamp()").fetchone()
    assert moment is not None
    value: datetime = moment[0]
    return value


def wait_for_older_transactions(connection: psycopg.Connection, moment: datetime) -> None:
    """Wait (a minute at most) until no transaction begun before ``moment``
    is open: VACUUM FULL copies a row such a transaction may still see."""
    for _ in range(600):
        if not older_than(connection, moment):
            return
        time.sleep(0.1)
    pytest.fail(f"transactions begun before the erase stay open: {older_than(connection, moment)}")


def holding(
    connection: psycopg.Connection, markers: dict[str, str], *, wal: bool
) -> dict[str, set[str]]:
    """For each marker found, the files that hold it (after a checkpoint, so
    that what the buffers hold is in the files)."""
    connection.execute("CHECKPOINT")
    found: dict[str, set[str]] = {}
    for path, key in connection.execute(FIND, {"markers": json.dumps(markers), "wal": wal}):
        found.setdefault(key, set()).add(f"{path} ({relation(connection, path)})")
    return found


def relation(connection: psycopg.Connection, path: str) -> str:
    """The name of the relation a file under ``base/`` belongs to."""
    if not path.startswith("base/"):
        return "WAL"
    filenode = int(re.split(r"[._]", path.rsplit("/", 1)[1])[0])
    row = connection.execute(
        "SELECT pg_filenode_relation(0, %s::oid)::regclass::text", (filenode,)
    ).fetchone()
    return row[0] if row and row[0] else "?"


async def test_the_documented_procedure_leaves_no_byte_of_an_erasure_in_the_files(
    pg_url: str, superuser: psycopg.Connection
) -> None:
    markers = {
        what: f"{what}{uuid.uuid4().hex}"
        for what in ("text", "long", "entry", "line", "title", "retitle", "owner", "tag", "meta")
    }
    async with await SqlStore.open(pg_url) as store:
        await store.create(SessionMeta(id="kept", owner="someone"))
        await store.append("kept", message("k", "stays"))
        meta = SessionMeta(
            id="doomed",
            title=markers["title"],
            owner=markers["owner"],
            tags=(markers["tag"],),
            metadata={"note": markers["meta"]},
        )
        await store.create(meta)
        await store.append_many("doomed", [message(f"e{n}", "x" * 3000) for n in range(40)])
        await store.append("doomed", message(markers["entry"], f"say {markers['text']} now"))
        # Random text does not compress: the line is kept out of line, in TOAST.
        noise = [base64.b64encode(os.urandom(3000)).decode() for _ in range(2)]
        await store.append("doomed", message("long", markers["long"].join(noise)))
        await store.set_title("doomed", markers["retitle"])
        for line in ("first", markers["line"], "last"):
            await store.journal("agent").append_raw(line.encode())
        await store.search("say")
        superuser.execute(f"ANALYZE {TABLES}")  # as autovacuum would: values in pg_statistic
        found = holding(superuser, markers, wal=False)
        assert set(found) == set(markers)  # else the test proves nothing
        # The journal's table ends empty, which ANALYZE leaves as it was.
        assert any("(pg_statistic)" in path for path in found["line"])

        await store.erase("doomed", reason="the user asked")
        await store.journal("agent").erase(reason="the user asked")
        erased = now(superuser)

        wait_for_older_transactions(superuser, erased)
        for statement in REWRITE:
            superuser.execute(statement)
        analyzed = now(superuser)
        wait_for_older_transactions(superuser, analyzed)
        for statement in STATISTICS + WAL:
            superuser.execute(statement)

        # pg_wal is searched too when the server unlinks old segments rather
        # than renaming them for reuse with their old bytes in.
        recycles = superuser.execute("SHOW wal_recycle").fetchone() == ("on",)
        assert holding(superuser, markers, wal=not recycles) == {}
        assert [e.id for e in await store.load("kept")] == ["k"]
        assert await store.integrity() == []


def test_the_procedure_tested_is_the_one_documented() -> None:
    documented = documented_statements()
    for statement in [*REWRITE, *STATISTICS, *WAL, OLDER.replace("%(t)s", ":t")]:
        assert " ".join(statement.split()) in documented, statement


async def test_rows_an_older_transaction_may_see_outlive_vacuum_full_until_it_ends(
    pg_url: str, superuser: psycopg.Connection
) -> None:
    """Why the procedure waits, and that the query it waits on names such a
    transaction, however idle."""
    marker = {"owner": f"owner{uuid.uuid4().hex}"}
    async with await SqlStore.open(pg_url) as store:
        await store.create(SessionMeta(id="doomed", owner=marker["owner"]))
        with psycopg.connect(conninfo(pg_url)) as reader:
            reader.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            reader.execute("SELECT 1")  # its snapshot is kept until it ends
            await store.erase("doomed", reason="the user asked")
            erased = now(superuser)
            assert reader.info.backend_pid in older_than(superuser, erased)
            superuser.execute(REWRITE[0])
            assert in_tables(holding(superuser, marker, wal=False))
            reader.commit()
            assert reader.info.backend_pid not in older_than(superuser, erased)
        wait_for_older_transactions(superuser, erased)
        superuser.execute(REWRITE[0])
        assert not in_tables(holding(superuser, marker, wal=False))


def older_than(connection: psycopg.Connection, moment: datetime) -> list[int]:
    return [row[0] for row in connection.execute(OLDER, {"t": moment})]


def in_tables(found: dict[str, set[str]]) -> set[str]:
    """The files found outside ``pg_statistic`` (autovacuum may fill it)."""
    return {path for paths in found.values() for path in paths if "pg_statistic" not in path}
