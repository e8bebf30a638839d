"""A separate process that erases a session of a sealed store, and stops
(to be killed) at a chosen point of the erase.

Usage: python word_eraser.py TARGET KEYRING KEY SESSION STOP

Prints ``ready`` once the store is open, then, with STOP ``moved``, ``moved``
once the erase's transaction has moved its bucket's word tokens under a new
word key (the old one doomed, nothing committed), or with STOP ``committed``,
``committed`` once the erase committed (before any key is destroyed), and
waits there to be killed; ``ok`` if the erase ended.
"""

import asyncio
import sys
import time
from typing import Any

from sessionstore import SqlStore
from sessionstore.backends.sql import wordkeys


def stop_after_move(moved: Any) -> Any:
    def stopped(*args: Any, **kwargs: Any) -> int:
        count = moved(*args, **kwargs)
        print("moved", flush=True)
        time.sleep(60)  # in the transaction, on the writer's thread: killed here
        return int(count)

    return stopped


async def main(target: str, keyring: str, key: str, session_id: str, stop: str) -> None:
    async with await SqlStore.open(target, keys=key, keyring=keyring) as store:
        sealer = store.database.sealer
        assert sealer is not None
        if stop == "moved":
            wordkeys._moved_postings = stop_after_move(wordkeys._moved_postings)
            wordkeys.moved_vectors = stop_after_move(wordkeys.moved_vectors)
        else:

            def destroy(key_id: bytes) -> None:
                print("committed", flush=True)
                time.sleep(60)

            sealer.destroy = destroy  # type: ignore[method-assign]
        print("ready", flush=True)
        await store.erase(session_id, reason="asked")
        print("ok", flush=True)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:6]))
