"""`Query`: a Core statement compiled once per dialect, run on the driver's cursor.

One text serves SQLite and PostgreSQL. Run on the driver's own cursor,
inside the transaction SQLAlchemy began: SQLAlchemy's execution path cost
about 35 us a statement on SQLite, more than most of these take to run.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping, Sequence
from operator import itemgetter
from typing import Any, cast

from sqlalchemy import Connection, LargeBinary
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement

_Params = Callable[[Mapping[str, Any]], Any]


class Query:
    def __init__(self, statement: ClauseElement) -> None:
        self.statement = statement
        self._compiled: dict[str, tuple[str, _Params]] = {}
        self._orders: dict[str, tuple[str, ...] | None] = {}

    def _compile(self, dialect: Dialect) -> tuple[str, _Params]:
        compiled = cast(SQLCompiler, self.statement.compile(dialect=dialect))
        fixed = dict(compiled.params)  # literals of the statement, as bound values
        self._orders[dialect.name] = None
        if compiled.positional:
            order = compiled.positiontup or []
            self._orders[dialect.name] = tuple(order)

            pick = _picker(tuple(order))

            def positional(given: Mapping[str, Any]) -> tuple[Any, ...]:
                # A row that gives every value (most do) is read as it is,
                # in C: the writer thread's GIL is the event loop's wait.
                try:
                    return pick(given)
                except KeyError:
                    return pick({**fixed, **given})

            return compiled.string, positional
        return compiled.string, lambda given: {**fixed, **given}

    def _cursor(self, conn: Connection) -> tuple[Any, str, _Params]:
        name = conn.dialect.name
        if name not in self._compiled:
            self._compiled[name] = self._compile(conn.dialect)
        sql, params = self._compiled[name]
        return conn.connection.dbapi_connection.cursor(), sql, params  # type: ignore[union-attr]

    def all(self, conn: Connection, **given: Any) -> list[Any]:
        cursor, sql, params = self._cursor(conn)
        cursor.execute(sql, params(given))
        rows = cursor.fetchall()
        cursor.close()
        return list(rows)

    def each(self, conn: Connection, **given: Any) -> Generator[Any, None, None]:
        """Every row, one at a time; close it if it may be left unfinished
        (its cursor must close while the transaction is open)."""
        cursor, sql, params = self._cursor(conn)
        try:
            cursor.execute(sql, params(given))
            yield from cursor
        finally:
            cursor.close()

    def first(self, conn: Connection, **given: Any) -> Any:
        cursor, sql, params = self._cursor(conn)
        cursor.execute(sql, params(given))
        row = cursor.fetchone()
        cursor.close()
        return row

    def scalar(self, conn: Connection, **given: Any) -> Any:
        row = self.first(conn, **given)
        assert row is not None, "a scalar query returned no row"
        return row[0]

    def many(self, conn: Connection, rows: Sequence[Mapping[str, Any]]) -> None:
        """Run the statement once per row. One row is executed alone: psycopg's
        ``executemany`` pipeline costs three waits for the server, not one."""
        cursor, sql, params = self._cursor(conn)
        if len(rows) == 1:
            cursor.execute(sql, params(rows[0]))
        else:
            cursor.executemany(sql, [params(row) for row in rows])
        cursor.close()

    def many_in_order(
        self, conn: Connection, names: tuple[str, ...], rows: Sequence[tuple[Any, ...]]
    ) -> None:
        """Run the statement once per row of the values of ``names``, the
        statement's own order (SQLite): no mapping per row, a fifth of the
        time to write the word index's many small rows."""
        cursor, sql, _ = self._cursor(conn)
        if self._orders[conn.dialect.name] != names:
            cursor.close()
            raise ValueError(f"the statement takes {self._orders[conn.dialect.name]}, not {names}")
        cursor.executemany(sql, rows)
        cursor.close()


def _picker(names: tuple[str, ...]) -> Callable[[Mapping[str, Any]], tuple[Any, ...]]:
    """The values of ``names`` in a mapping, as a tuple (``itemgetter`` of one
    name gives the value alone)."""
    if len(names) == 1:
        name = names[0]
        return lambda values: (values[name],)
    if not names:
        return lambda values: ()
    return cast(Callable[[Mapping[str, Any]], tuple[Any, ...]], itemgetter(*names))


class Utf8Bytes(FunctionElement[bytes]):
    type = LargeBinary()
    inherit_cache = True


@compiles(Utf8Bytes, "sqlite")
def _utf8_sqlite(element: Utf8Bytes, compiler: SQLCompiler, **kw: Any) -> str:
    return f"CAST({compiler.process(element.clauses, **kw)} AS BLOB)"


@compiles(Utf8Bytes, "postgresql")
def _utf8_postgresql(element: Utf8Bytes, compiler: SQLCompiler, **kw: Any) -> str:
    # Not CAST AS bytea, which would read backslashes as escapes.
    return f"convert_to({compiler.process(element.clauses, **kw)}, 'UTF8')"
