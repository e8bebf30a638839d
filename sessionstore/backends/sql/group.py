"""Group commit: appends that arrive together commit in one transaction.

Each caller of `GroupCommit.submit` still awaits its own durable commit:
its future resolves only once the transaction holding its append has
committed. While one transaction is committing, new appends gather; the
next transaction takes all of them. Each append runs inside a SAVEPOINT of
its own, so one that fails (an unknown session) fails only its caller.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING

from sqlalchemy import Connection

from sessionstore.backends.sql import queries as Q
from sessionstore.errors import SessionStoreError

if TYPE_CHECKING:
    from sessionstore.backends.sql.store import SqlStore

__all__ = ["GroupCommit"]

_Job = tuple[Callable[[Connection], None], "asyncio.Future[None]"]


def _run_jobs(jobs: Sequence[_Job], conn: Connection) -> list[SessionStoreError | None]:
    """Run each job in a savepoint; what a job refused is its own error.

    A job alone needs none: what it refuses, the whole transaction does.
    """
    if len(jobs) == 1:
        jobs[0][0](conn)
        return [None]
    errors: list[SessionStoreError | None] = []
    for body, _ in jobs:
        Q.SAVEPOINT.run(conn)
        try:
            body(conn)
        except SessionStoreError as exc:
            Q.ROLLBACK_TO.run(conn)
            errors.append(exc)
        else:
            errors.append(None)
        Q.RELEASE.run(conn)
    return errors


class GroupCommit:
    """Gathers a store's appends into shared transactions."""

    def __init__(self, store: SqlStore) -> None:
        self._store = store
        self._pending: list[_Job] = []
        self._flushing: asyncio.Task[None] | None = None

    async def submit(self, body: Callable[[Connection], None]) -> None:
        """Run ``body`` in the next shared transaction; return once it committed."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.append((body, future))
        if self._flushing is None or self._flushing.done():
            self._flushing = asyncio.create_task(self._flush())
        await future

    async def _flush(self) -> None:
        while self._pending:
            jobs, self._pending = self._pending, []
            try:
                errors = await self._store._transaction(None, partial(_run_jobs, jobs), write=True)
            except BaseException as exc:
                for _, future in jobs:
                    if not future.done():
                        future.set_exception(exc)
                if isinstance(exc, asyncio.CancelledError):
                    raise
                continue
            for (_, future), error in zip(jobs, errors, strict=True):
                if future.done():
                    continue  # its caller gave up waiting; the append stands
                if error is None:
                    future.set_result(None)
                else:
                    future.set_exception(error)
