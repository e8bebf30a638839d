"""Opening the store ``--db`` names, refusing one a command would only create by mistake."""

from __future__ import annotations

import argparse
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from sessionstore.backends import open_store
from sessionstore.backends.targets import is_sql_target
from sessionstore.cli.defaults import KEY_FILE_ENV, KEYRING_ENV, KEYS_ENV
from sessionstore.cli.output import Refused
from sessionstore.store import SessionStore

__all__ = ["check_store", "key_options", "opened", "path_exists", "store_directory"]


def store_directory(target: str) -> Path | None:
    """The directory a JSONL store target names; None for other targets."""
    if target.startswith("jsonl://"):
        return Path(target[len("jsonl://") :])
    if "://" in target or is_sql_target(target):
        return None  # a SQL database, memory://, or a scheme open_store refuses
    return Path(target)


async def check_store(target: str, *, read: bool, schema: bool = True) -> None:
    """Refuse a store that a command would only create by mistake.

    Every command refuses an archive given as a store. A command that only
    reads (``read``) refuses a store that does not exist, and (``schema``) a
    SQL database that holds no sessionstore schema, which opening would
    create: a mistyped ``--db`` is an error, not an empty store.

    Reading the revision of a SQL database loads no alembic: that is for
    ``migrate`` alone.
    """
    directory = store_directory(target)
    if directory is not None:
        from sessionstore.archive.report import JOURNALS, SESSIONS  # for a directory only

        if (directory / SESSIONS).is_dir():
            raise Refused(
                f"{target} is an archive ({SESSIONS}/ and {JOURNALS}/), not a store; "
                f"its {SESSIONS}/ reads as one: --db {directory / SESSIONS}"
            )
        if read and not directory.exists():
            raise Refused(f"no such store: {target} (no such directory)")
        return
    if not (read and is_sql_target(target)):
        return
    from sessionstore.backends.sql.engine import is_sqlite, parse_target

    url = parse_target(target)
    if is_sqlite(url) and not path_exists(url.database or ""):
        raise Refused(f"no such database: {target}")
    if schema:
        from sessionstore import migrate

        if await migrate.current(target) is None:
            raise Refused(
                f"{target} holds no sessionstore store (no schema): nothing to read; "
                f"`sessionstore migrate --db {target}` would create one"
            )


def path_exists(path: str) -> bool:
    return Path(path).exists()


def key_options(args: argparse.Namespace) -> dict[str, Any]:
    """A sealed store's ``keys`` and ``keyring`` (none given: none), from
    ``--key-file`` (or $SESSIONSTORE_KEY_FILE), else $SESSIONSTORE_KEYS, and
    ``--keyring`` (or $SESSIONSTORE_KEYRING). A key is never an argument:
    the command line is visible to every user of the machine. What the
    environment says is for SQL stores only: a JSONL directory opens plain."""
    options: dict[str, Any] = {}
    if not is_sql_target(args.db) and not getattr(args, "key_file", None):
        return options
    key_file = getattr(args, "key_file", None) or os.environ.get(KEY_FILE_ENV)
    if key_file:
        from sessionstore.encryption.keys import read_key_file

        options["keys"] = read_key_file(key_file)
    elif os.environ.get(KEYS_ENV, "").strip():
        options["keys"] = [key.strip() for key in os.environ[KEYS_ENV].split(",") if key.strip()]
    keyring = getattr(args, "keyring", None) or os.environ.get(KEYRING_ENV)
    if keyring:
        options["keyring"] = keyring
    return options


@asynccontextmanager
async def opened(args: argparse.Namespace, *, read: bool) -> AsyncIterator[SessionStore]:
    """The store of ``--db``, checked as `check_store` does, closed at the end;
    a sealed one with the keys `key_options` finds.

    A JSONL store is opened with ``write_caches=False``: a command writes
    what it is asked to, never a cache beside the files (a listing's order,
    a context's hint), so a read command leaves the directory as it was.
    """
    await check_store(args.db, read=read)
    options = {"write_caches": False} if store_directory(args.db) is not None else {}
    async with open_store(args.db, **options, **key_options(args)) as store:
        yield store
