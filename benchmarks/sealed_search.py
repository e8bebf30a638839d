"""A sealed store's search and erase against its number of sessions.

Builds a sealed store (SQLite, or PostgreSQL with ``--pg-url``) of
``--sessions`` sessions of ``--messages`` messages each, words drawn from
a vocabulary of 2,000 (Zipf-like: a few words are in most messages), one
rare word in 20 messages; then times, ``--rounds`` times each: a search
for the rare word, for a common word (the first page of 20), for both,
for two common words; then erases ``--erases`` sessions one by one. It
prints the median and the range of each, in milliseconds. Public API only:
it runs on any version of sessionstore.

    .venv/bin/python benchmarks/sealed_search.py --sessions 3000
    .venv/bin/python benchmarks/sealed_search.py --sessions 2000 --pg-url "$SESSIONSTORE_PG_URL"
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

from sessionstore import Message, MessageEntry, SessionMeta, SqlStore, generate_key

VOCABULARY = [f"w{n}" for n in range(2000)]
WEIGHTS = [1 / (rank + 1) for rank in range(len(VOCABULARY))]
RARE = "zebra"


async def build(store: SqlStore, sessions: int, messages: int, rng: random.Random) -> None:
    rare = set(rng.sample(range(sessions * messages), 20))
    for n in range(sessions):
        await store.create(SessionMeta(id=f"s{n}", owner=f"owner{n % 10}"))
        texts = []
        for m in range(messages):
            words = rng.choices(VOCABULARY, WEIGHTS, k=12)
            if n * messages + m in rare:
                words.append(RARE)
            texts.append(" ".join(words))
        await store.append_many(f"s{n}", [MessageEntry.new(Message.user(t)) for t in texts])


async def timed(call: Callable[[], Awaitable[object]], rounds: int) -> list[float]:
    await call()  # warm
    spent = []
    for _ in range(rounds):
        began = time.perf_counter()
        await call()
        spent.append((time.perf_counter() - began) * 1000)
    return spent


def line(name: str, spent: list[float]) -> str:
    return (
        f"{name:<34} median {statistics.median(spent):8.2f} ms   "
        f"range {min(spent):8.2f} - {max(spent):8.2f} ms"
    )


async def run(target: str, ring: str, opts: argparse.Namespace) -> None:
    rng = random.Random(4747)
    key = generate_key()
    began = time.perf_counter()
    async with await SqlStore.open(target, keys=key, keyring=ring) as store:
        await build(store, opts.sessions, opts.messages, rng)
    print(f"built {opts.sessions:,} sessions in {time.perf_counter() - began:.1f} s")
    if opts.vacuum and "postgresql" in target:
        import sqlalchemy as sa

        engine = sa.create_engine(target, isolation_level="AUTOCOMMIT")
        with engine.connect() as conn:
            conn.exec_driver_sql("VACUUM ANALYZE")
        engine.dispose()
    async with await SqlStore.open(target, keys=key, keyring=ring) as store:
        searches = {
            "search: rare word (20 hits)": lambda: store.search(RARE, limit=20),
            "search: common word (page of 20)": lambda: store.search("w3", limit=20),
            "search: rare + common": lambda: store.search(f"{RARE} w1", limit=20),
            "search: two common words": lambda: store.search("w2 w5", limit=20),
        }
        for name, call in searches.items():
            print(line(name, await timed(call, opts.rounds)), flush=True)
        spent = []
        for n in range(opts.erases):
            session_id = f"s{n * (opts.sessions // max(opts.erases, 1))}"
            began = time.perf_counter()
            await store.erase(session_id, reason="benchmark")
            spent.append((time.perf_counter() - began) * 1000)
        if spent:
            print(line(f"erase a session ({opts.messages} messages)", spent), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=3000)
    parser.add_argument("--messages", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--erases", type=int, default=5)
    parser.add_argument("--pg-url", help="a PostgreSQL store target (a schema is made in it)")
    parser.add_argument("--vacuum", action="store_true", help="PostgreSQL: VACUUM ANALYZE first")
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sessionstore-sealed-search-") as where:
        ring = str(Path(where) / "keys.db")
        if opts.pg_url is None:
            asyncio.run(run(str(Path(where) / "s.db"), ring, opts))
            return
        import sqlalchemy as sa
        from sqlalchemy.engine import make_url

        schema = f"bench_{uuid.uuid4().hex[:10]}"
        engine = sa.create_engine(opts.pg_url)
        with engine.begin() as conn:
            conn.execute(sa.text(f"CREATE SCHEMA {schema}"))
        url = make_url(opts.pg_url).update_query_dict({"options": f"-csearch_path={schema}"})
        try:
            asyncio.run(run(url.render_as_string(hide_password=False), ring, opts))
        finally:
            with engine.begin() as conn:
                conn.execute(sa.text(f"DROP SCHEMA {schema} CASCADE"))
            engine.dispose()


if __name__ == "__main__":
    main()
