"""`Query`: a statement's values taken from each row given, its own literals
and None standing for what a row leaves out."""

from __future__ import annotations

from sqlalchemy import Column, Integer, MetaData, Table, Text, bindparam, create_engine, insert
from sqlalchemy import select as select_

from sessionstore.backends.sql.query import Query

_table = Table(
    "t", MetaData(), Column("a", Integer), Column("b", Text), Column("c", Text), Column("d", Text)
)
_INSERT = Query(insert(_table).values(a=bindparam("a"), b=bindparam("b"), c="fixed", d=None))
_ONE = Query(select_(_table.c.b).where(_table.c.a == bindparam("a")))
_ALL = Query(select_(_table.c.a, _table.c.b, _table.c.c, _table.c.d).order_by(_table.c.a))


def test_rows_give_their_values_and_the_statement_its_literals() -> None:
    engine = create_engine("sqlite://")
    with engine.begin() as conn:
        _table.create(conn)
        _INSERT.many(
            conn,
            [
                {"a": 1, "b": "one"},
                {"a": 2},  # b left out: None
                {"a": 3, "b": "three", "other": "not the statement's"},
            ],
        )
        assert _ALL.all(conn) == [
            (1, "one", "fixed", None),
            (2, None, "fixed", None),
            (3, "three", "fixed", None),
        ]
        assert _ONE.scalar(conn, a=3) == "three"  # a statement of one value
        assert _ALL.first(conn) == (1, "one", "fixed", None)  # and of none
