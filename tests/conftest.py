"""Fixtures shared by the test suite: PostgreSQL schemas, one per use, and fresh
storage of every backend kind (`tests.kinds`)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import settings
from sqlalchemy.engine import make_url

from tests.kinds import StoreTargets

PG_ENV = "SESSIONSTORE_PG_URL"

# Property tests here do I/O on a shared, noisy machine: no per-example
# deadline (hypothesis's 200 ms), which only ever fails under load.
settings.register_profile("sessionstore", deadline=None)
settings.load_profile("sessionstore")


def postgres_url_or_skip() -> str:
    """The server to test on; skip (locally) or fail (in CI) without one."""
    url = os.environ.get(PG_ENV)
    if url:
        return url
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but {PG_ENV} is not set: .ci/run must start PostgreSQL")
    pytest.skip(f"PostgreSQL tests need a server: set {PG_ENV} (README, Development)")


class PostgresSchemas:
    """Store targets on a PostgreSQL server, each in a new schema, dropped at the end."""

    def __init__(self, base: str) -> None:
        self.base = make_url(base)
        self.conninfo = self.base.set(drivername="postgresql").render_as_string(hide_password=False)
        self.made: list[str] = []

    def new(self) -> str:
        import psycopg

        name = f"test_{uuid.uuid4().hex[:16]}"
        with psycopg.connect(self.conninfo, autocommit=True) as connection:
            connection.execute(f"CREATE SCHEMA {name}")
        self.made.append(name)
        options = {"options": f"-csearch_path={name}"}
        return self.base.update_query_dict(options).render_as_string(hide_password=False)

    def drop_all(self) -> None:
        import psycopg

        with psycopg.connect(self.conninfo, autocommit=True) as connection:
            for name in self.made:
                connection.execute(f"DROP SCHEMA {name} CASCADE")
        self.made.clear()


@pytest.fixture
def pg_schemas() -> Iterator[Callable[[], str]]:
    """Make store targets on PostgreSQL, each in a new schema, dropped afterwards."""
    schemas = PostgresSchemas(postgres_url_or_skip())
    yield schemas.new
    schemas.drop_all()


@pytest.fixture
def pg_url(pg_schemas: Callable[[], str]) -> str:
    """A store target on PostgreSQL, in a schema of its own."""
    return pg_schemas()


@pytest.fixture
def store_targets(request: pytest.FixtureRequest, tmp_path: Path) -> StoreTargets:
    """Fresh storage of any kind (`tests.kinds`), each target new and empty.

    Only a PostgreSQL target asks for the server (`pg_schemas`): a test
    that makes one skips without it, or fails under CI=true; the other
    kinds never need it.
    """

    def new_schema() -> str:
        schemas: Callable[[], str] = request.getfixturevalue("pg_schemas")
        return schemas()

    return StoreTargets(tmp_path / "stores", new_schema)
