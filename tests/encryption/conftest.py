"""What the tests of encryption at rest share."""

import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy.engine import make_url


@pytest.fixture
def marker() -> str:
    """A word found nowhere but where a test puts it."""
    return f"zq{uuid.uuid4().hex[:12]}"


@pytest.fixture
def keyring_database(pg_url: str) -> Iterator[str]:
    """A PostgreSQL database of its own on the server of ``pg_url``, for a keyring."""
    import psycopg

    base = make_url(pg_url).difference_update_query(["options"])
    conninfo = base.set(drivername="postgresql").render_as_string(hide_password=False)
    name = f"keyring_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(conninfo, autocommit=True) as connection:
        connection.execute(f"CREATE DATABASE {name}")
    yield base.set(database=name).render_as_string(hide_password=False)
    with psycopg.connect(conninfo, autocommit=True) as connection:
        connection.execute(f"DROP DATABASE {name} WITH (FORCE)")
