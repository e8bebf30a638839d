"""A separate process that appends to a journal, for crash tests.

Usage: python journal_appender.py KIND WHERE COUNT

KIND is ``file`` (WHERE: an agent directory) or ``store`` (WHERE: a store
target; the journal is named ``agent``). Write N is a post whose id is the
UUID with integer value N. After each append returns, the worker prints N
on its own line and flushes.
"""

import asyncio
import sys
import uuid

from sessionstore import FileJournal, PostWrite, SessionHeader, Timestamp, open_store
from sessionstore.store import SessionJournal


async def write(journal: SessionJournal, count: int) -> None:
    leftover = await journal.read()  # an interrupted session's writes are kept
    await journal.begin(SessionHeader(started_at=Timestamp.now(), model="m"), leftover)
    for n in range(count):
        await journal.append(PostWrite(at=Timestamp.now(), id=uuid.UUID(int=n)))
        print(n, flush=True)


async def main(kind: str, where: str, count: int) -> None:
    if kind == "file":
        await write(FileJournal.in_dir(where), count)
        return
    async with open_store(where) as store:
        await write(store.journal("agent"), count)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
