"""PostgreSQL row-level security: the SQL of docs/sql.md, "Row-level security",
run as written, then a store opened as the servers' role for one tenant.

The SQL is read from the page, so the page and these tests cannot drift.
Only the names of the role, the schema and the per-tenant role are
replaced: roles are the server's, shared by every test running at once.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import make_conninfo
from sqlalchemy.engine import make_url

from sessionstore import (
    CorruptSessionError,
    DuplicateSessionError,
    Message,
    MessageEntry,
    ScopedStore,
    SessionMeta,
    SessionNotFoundError,
    SessionStore,
    StorageError,
    decode_meta,
    encode,
    open_store,
)
from sessionstore.testing.common import stream
from tests.backends.sql.helpers import connect

DOCS = Path(__file__).resolve().parents[3] / "docs" / "sql.md"
FENCE = re.compile(r"^```sql\n(.*?)^```$", re.S | re.M)


def documented_sql() -> list[str]:
    """The ```sql blocks of the section "Row-level security", in order."""
    text = DOCS.read_text()
    section = text.split("\n## Row-level security\n", 1)[1].split("\n## ", 1)[0]
    return FENCE.findall(section)


def named(sql: str, names: dict[str, str]) -> str:
    for word, name in names.items():
        sql = re.sub(rf"\b{word}\b", name, sql)
    return sql


def as_role(url: str, role: str, tenant: str | None) -> str:
    """``url`` (a test schema's) as ``role``, naming ``tenant`` as the docs say."""
    parsed = make_url(url)
    options = str(parsed.query["options"])
    if tenant is not None:
        options += f" -csessionstore.tenant={tenant}"
    return parsed.set(username=role).update_query_dict({"options": options}).render_as_string(False)


@dataclass
class Tenants:
    url: str  # the schema's, as the tables' owner
    role: str  # the servers' role
    names: dict[str, str]  # the docs' names, as this test made them
    alice: str  # owners
    bob: str
    alices: str  # a session of each
    bobs: str

    def url_for(self, tenant: str | None) -> str:
        return as_role(self.url, self.role, tenant)


def secret(text: str) -> MessageEntry:
    return MessageEntry.new(Message.user(text))


@pytest.fixture
async def tenants(pg_url: str) -> AsyncIterator[Tenants]:
    """Two owners' sessions, made by a plain store; then the docs' SQL."""
    tag = uuid.uuid4().hex[:12]
    alice, bob = f"alice_{tag}", f"bob_{tag}"
    async with open_store(pg_url) as store:
        alices = await store.create(SessionMeta.new(owner=alice, title="alice's"))
        await store.append(alices, secret("alice keeps the pineapple recipe"))
        bobs = await store.create(SessionMeta.new(owner=bob))
        await store.append(bobs, secret("bob likes pineapple"))
    schema = str(make_url(pg_url).query["options"]).removeprefix("-csearch_path=")
    role = f"server_{tag}"
    names = {"agent_server": role, "agents": schema}
    with connect(pg_url) as connection:
        connection.execute(named(documented_sql()[0], names))
    try:
        yield Tenants(pg_url, role, names, alice, bob, alices, bobs)
    finally:
        with connect(pg_url) as connection:  # the roles are the server's: gone with the test
            for name in (alice, role):  # alice's login, if the test made it
                made = "SELECT 1 FROM pg_roles WHERE rolname = %s"
                if connection.execute(made, [name]).fetchone():
                    connection.execute(f"DROP OWNED BY {name}")
                    connection.execute(f"DROP ROLE {name}")


@pytest.fixture
async def as_bob(tenants: Tenants) -> AsyncIterator[SessionStore]:
    async with open_store(tenants.url_for(tenants.bob)) as store:
        yield store


@pytest.fixture
def raw_bob(tenants: Tenants) -> Iterator[psycopg.Connection]:
    with raw(tenants.url_for(tenants.bob)) as connection:
        yield connection


def raw(url: str) -> psycopg.Connection:
    """A plain connection as ``url`` says, its query passed as libpq's
    parameters (a URI would not read a ``+`` in ``options`` as a space)."""
    parsed = make_url(url)
    given = {
        "dbname": parsed.database,
        "user": parsed.username,
        "password": parsed.password,
        "host": parsed.host,
        "port": parsed.port,
    }
    parameters = {key: value for key, value in given.items() if value is not None}
    parameters.update({key: str(value) for key, value in parsed.query.items()})
    return psycopg.connect(make_conninfo("", **parameters), autocommit=True)


def pk_of(tenants: Tenants, session_id: str) -> int:
    with connect(tenants.url) as connection:
        row = connection.execute("SELECT pk FROM sessions WHERE id = %s", [session_id]).fetchone()
    assert row is not None
    return int(row[0])


async def test_bob_lists_pages_and_searches_only_his_sessions(
    tenants: Tenants, as_bob: SessionStore
) -> None:
    assert [meta.id for meta in await as_bob.list()] == [tenants.bobs]
    assert [s.meta.id for s in await as_bob.summaries()] == [tenants.bobs]
    assert [s.meta.id for s in await as_bob.summaries(owner=tenants.alice)] == []
    hits = await as_bob.search("pineapple")
    assert [hit.session_id for hit in hits] == [tenants.bobs]


@pytest.mark.parametrize(
    "call",
    ["load", "load_context", "append", "set_title", "fork", "erase"],
)
async def test_alices_session_is_not_found_by_bob(
    tenants: Tenants, as_bob: SessionStore, call: str
) -> None:
    calls: dict[str, Callable[[], Awaitable[object]]] = {
        "load": lambda: as_bob.load(tenants.alices),
        "load_context": lambda: as_bob.load_context(tenants.alices),
        "append": lambda: as_bob.append(tenants.alices, secret("bob was here")),
        "set_title": lambda: as_bob.set_title(tenants.alices, "bob's now"),
        "fork": lambda: as_bob.fork(tenants.alices),
        "erase": lambda: as_bob.erase(tenants.alices, reason="bob"),
    }
    with pytest.raises(SessionNotFoundError):
        await calls[call]()
    async with open_store(tenants.url) as owner:  # alice's session, as it was
        assert [s.title for s in await owner.summaries(owner=tenants.alice)] == ["alice's"]
        assert len(await owner.load(tenants.alices)) == 1
        assert len(await owner.list()) == 2


async def test_bob_creates_appends_forks_and_erases_his_own(
    tenants: Tenants, as_bob: SessionStore
) -> None:
    await as_bob.append(tenants.bobs, secret("more from bob"))
    assert len(await as_bob.load_context(tenants.bobs)) == 2
    fork = await as_bob.fork(tenants.bobs)
    made = await as_bob.create(SessionMeta.new(owner=tenants.bob))
    assert {meta.id for meta in await as_bob.list()} == {tenants.bobs, fork.id, made}
    await as_bob.erase(made, reason="done")
    assert await as_bob.integrity() == []
    with pytest.raises(SessionNotFoundError):
        await as_bob.load(made)


async def test_bob_imports_a_session_of_his_own_but_not_one_of_alices(
    tenants: Tenants, as_bob: SessionStore
) -> None:
    # An import writes its entries before its listing row: the policies'
    # second way, through the session's own row.
    lines = [encode(secret(f"imported {n}")) for n in range(3)]

    async def given() -> AsyncIterator[str]:
        for line in lines:
            yield line

    mine = SessionMeta.new(owner=tenants.bob)
    assert await as_bob.import_session(encode(mine), given()) == 3
    assert len(await as_bob.load(mine.id)) == 3
    with pytest.raises(StorageError, match="row-level security policy"):
        await as_bob.import_session(encode(SessionMeta.new(owner=tenants.alice)), given())


async def test_bob_cannot_create_a_session_owned_by_alice(
    tenants: Tenants, as_bob: SessionStore
) -> None:
    with pytest.raises(StorageError, match="row-level security policy"):
        await as_bob.create(SessionMeta.new(owner=tenants.alice))
    with pytest.raises(StorageError, match="row-level security policy"):
        await as_bob.create(SessionMeta.new())  # no owner: no tenant's
    async with open_store(tenants.url) as owner:
        assert len(await owner.list()) == 2


async def test_an_id_alice_holds_is_taken_for_bob_too(
    tenants: Tenants, as_bob: SessionStore
) -> None:
    # The one thing a tenant learns of another's ids (docs: what it does not protect).
    taken = SessionMeta.new(owner=tenants.bob).model_copy(update={"id": tenants.alices})
    with pytest.raises(DuplicateSessionError):
        await as_bob.create(taken)


def test_bobs_raw_statements_read_none_of_alices_rows(
    tenants: Tenants, raw_bob: psycopg.Connection
) -> None:
    with connect(tenants.url) as owner:
        owner.execute("ANALYZE")
    bobs = pk_of(tenants, tenants.bobs)
    for table in ("sessions", "entries", "activity", "listing", "search_vectors"):
        key = "pk" if table == "sessions" else "session_pk"
        rows = raw_bob.execute(f"SELECT DISTINCT {key} FROM {table}").fetchall()
        assert rows == [(bobs,)], table
    assert raw_bob.execute("SELECT count(*) FROM titles").fetchone() == (0,)
    stats = raw_bob.execute(
        "SELECT count(*) FROM pg_stats WHERE tablename IN ('sessions', 'entries', 'listing')"
    ).fetchone()
    assert stats == (0,)


async def test_a_header_repeating_owner_is_no_tenant_s(
    tenants: Tenants, as_bob: SessionStore, raw_bob: psycopg.Connection
) -> None:
    # sessionstore reads a repeated "owner" as no owner; PostgreSQL's ->> reads the last.
    header = (
        f'{{"id":"repeated","version":1,"created_at":"2026-01-01T00:00:00Z",'
        f'"owner":"{tenants.alice}","ow\\u006eer":"{tenants.bob}"}}'
    )
    assert decode_meta(header).owner is None
    async with open_store(tenants.url) as owner:
        assert await owner.import_session(header, stream([])) == 0
    assert "repeated" not in {meta.id for meta in await as_bob.list()}
    with pytest.raises(SessionNotFoundError):
        await as_bob.load("repeated")
    owners = "SELECT sessionstore_owner(%s), sessionstore_owner(%s)"
    once = encode(SessionMeta(id="once", owner=tenants.bob))
    assert raw_bob.execute(owners, [header, once]).fetchone() == (None, tenants.bob)


# A row of each table naming alice's session, as bob's role would insert it.
RAW_WRITES = {
    "entries": "(session_pk, seq, entry_id, type, line) VALUES (%(pk)s, 2, 'x', 'message', '')",
    "titles": "(session_pk, seq, title, at) VALUES (%(pk)s, 1, 'bob''s', 'now')",
    "activity": "(session_pk, tick, at) VALUES (%(pk)s, nextval('activity_ticks'), 'now')",
    "erasures": "(kind, name, at, reason, lines, digest) VALUES ('session', %(id)s, '', '', 0, '')",
}


@pytest.mark.parametrize("table", RAW_WRITES)
def test_the_database_refuses_bobs_raw_writes_to_alices_session(
    tenants: Tenants, raw_bob: psycopg.Connection, table: str
) -> None:
    alices = {"pk": pk_of(tenants, tenants.alices), "id": tenants.alices}
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
        raw_bob.execute(f"INSERT INTO {table} {RAW_WRITES[table]}", alices)


async def test_the_role_without_a_tenant_sees_no_session(tenants: Tenants) -> None:
    async with open_store(tenants.url_for(None)) as store:
        assert await store.list() == []
        assert await store.search("pineapple") == []
        with pytest.raises(SessionNotFoundError):
            await store.load(tenants.bobs)


async def test_a_tenant_read_from_the_login_cannot_be_set_to_another(tenants: Tenants) -> None:
    # The docs' second block: the tenant is the login role, named as the owner.
    names = {**tenants.names, "alice": tenants.alice}
    with connect(tenants.url) as connection:
        connection.execute(named(documented_sql()[1], names))
    # alice's login, naming bob as its tenant: the setting is no longer read.
    url = as_role(tenants.url, tenants.alice, tenants.bob)
    async with open_store(url) as store:
        assert [meta.id for meta in await store.list()] == [tenants.alices]
        with pytest.raises(SessionNotFoundError):
            await store.load(tenants.bobs)
    with raw(url) as connection:
        connection.execute(f"SET ROLE {tenants.role}")
        assert connection.execute("SELECT id FROM sessions").fetchall() == [(tenants.alices,)]


async def test_a_fork_given_to_another_owner_reads_as_missing_its_shared_entries(
    tenants: Tenants, as_bob: SessionStore
) -> None:
    async with open_store(tenants.url) as owner:
        fork = await owner.fork(tenants.alices, meta=SessionMeta.new(owner=tenants.bob))
    with pytest.raises(CorruptSessionError):
        await as_bob.load(fork.id)


async def test_a_table_left_out_of_the_grant_is_refused(tenants: Tenants) -> None:
    with connect(tenants.url) as connection:
        connection.execute(f"REVOKE ALL ON heads FROM {tenants.role}")
    async with open_store(tenants.url_for(tenants.bob)) as store:
        with pytest.raises(StorageError, match="permission denied"):
            await store.set_head("chat", tenants.bobs)


async def test_a_scoped_view_of_bobs_role_store_sees_what_either_wall_lets_through(
    tenants: Tenants, as_bob: SessionStore
) -> None:
    view = ScopedStore(as_bob, tenants.bob)
    assert [s.meta.id for s in await view.summaries()] == [tenants.bobs]
    assert [hit.session_id for hit in await view.search("pineapple")] == [tenants.bobs]
    with pytest.raises(SessionNotFoundError):
        await view.load(tenants.alices)
    # The view's own names: a head of bob's, under his prefix.
    await view.set_head("chat", tenants.bobs)
    assert await view.head("chat") == tenants.bobs
