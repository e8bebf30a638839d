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
from sessionstore.cli.wording import KEY_HINT, in_user_words, named, no_store_hint
from sessionstore.errors import ConfigurationError, EncryptionKeyError
from sessionstore.store import SessionStore

__all__ = [
    "check_store",
    "key_options",
    "key_source",
    "opened",
    "path_exists",
    "store_directory",
]


def store_directory(target: str) -> Path | None:
    """The directory a JSONL store target names; None for other targets."""
    if target.startswith("jsonl://"):
        path = target[len("jsonl://") :]
        # A relative one is refused by open_store, saying why: no hint to
        # make it with demo, which refuses it as well.
        return Path(path) if path.startswith("/") else None
    if "://" in target or is_sql_target(target):
        return None  # a SQL database, memory://, or a scheme open_store refuses
    return Path(target)


async def check_store(target: str, *, read: bool, schema: bool = True) -> None:
    """Refuse an archive or a file that is no SQLite database given as a store;
    for a command that only reads (``read``), a store that does not exist and
    (``schema``) a SQL database without sessionstore's schema, which opening
    would create: a mistyped ``--db`` is an error, not an empty store."""
    directory = store_directory(target)
    if directory is not None:
        from sessionstore.archive.report import JOURNALS, SESSIONS  # for a directory only

        if (directory / SESSIONS).is_dir():
            raise Refused(
                f"{target} is an archive ({SESSIONS}/ and {JOURNALS}/), not a store; "
                f"its {SESSIONS}/ reads as one: --db {directory / SESSIONS}"
            )
        if read and not directory.exists():
            raise Refused(f"no such store: {target} {no_store_hint(target, 'no such directory')}")
        return
    if not is_sql_target(target):
        return
    from sessionstore.backends.sql.engine import is_sqlite, parse_target

    url = parse_target(target)
    if is_sqlite(url):
        _check_sqlite_file(target, url.database or "", read=read)
    if not read:
        return
    if schema:
        from sessionstore import migrate

        if await migrate.current(target) is None:
            shown = named(target)
            others = await migrate.tables(target)
            if others:
                listed = ", ".join(others[:5]) + (", ..." if len(others) > 5 else "")
                raise Refused(
                    f"{shown} is not a sessionstore database: it holds other tables "
                    f"({listed}) and no sessionstore schema; name a sessionstore store "
                    "with --db TARGET"
                )
            raise Refused(
                f"{shown} holds no sessionstore store (an empty database): nothing to read; "
                f"`sessionstore migrate --db {shown}` would create one"
            )


_SQLITE_HEADER = b"SQLite format 3\x00"  # how every SQLite file begins (an empty file is one too)


def _check_sqlite_file(target: str, path: str, *, read: bool) -> None:
    """Refuse a SQLite file missing (for a command that reads) or not a SQLite database."""
    try:
        with open(path, "rb") as file:
            start = file.read(len(_SQLITE_HEADER))
    except FileNotFoundError:
        if read:
            raise Refused(
                f"no such database: {target} {no_store_hint(target, 'no such file')}"
            ) from None
        return
    except IsADirectoryError:
        raise Refused(
            f"{target} is a directory, not a SQLite database: --db names a JSONL directory "
            "by a path without a .db ending (or jsonl:///abs/dir)"
        ) from None
    except OSError as exc:
        raise Refused(f"cannot read {target}: {exc.strerror}") from None
    if start and start != _SQLITE_HEADER:
        raise Refused(
            f"{target} is not a SQLite database (nor a JSONL directory): name a sessionstore "
            "store with --db TARGET, or make one to try: sessionstore demo --db NEW.db"
        )


def path_exists(path: str) -> bool:
    return Path(path).exists()


def key_options(args: argparse.Namespace) -> dict[str, Any]:
    """A sealed store's ``keys`` (`key_source`) and ``keyring`` (``--keyring``, else
    $SESSIONSTORE_KEYRING). The environment is for SQL stores only: a JSONL
    directory opens plain. A key is never an argument: every user sees those.

    Raises:
        Refused: a key file unread, holding no key or a line that is no key.
    """
    options: dict[str, Any] = {}
    if not is_sql_target(args.db) and not getattr(args, "key_file", None):
        return options
    given = key_source(args)
    if given is not None:
        source, path = given
        if path is not None:
            keys = _read_key_file(source, path)
        else:
            keys = [key.strip() for key in os.environ[KEYS_ENV].split(",") if key.strip()]
        options["keys"] = _checked(source, keys)
    keyring = getattr(args, "keyring", None) or os.environ.get(KEYRING_ENV)
    if keyring:
        options["keyring"] = keyring
    return options


def key_source(args: argparse.Namespace) -> tuple[str, str | None] | None:
    """Where the keys come from, as a message names it (``--key-file k.key``,
    ``$SESSIONSTORE_KEYS``), and the key file (None for the variable); None: no keys."""
    if getattr(args, "key_file", None):
        return f"--key-file {args.key_file}", args.key_file
    if os.environ.get(KEY_FILE_ENV):
        return f"${KEY_FILE_ENV} ({os.environ[KEY_FILE_ENV]})", os.environ[KEY_FILE_ENV]
    if os.environ.get(KEYS_ENV, "").strip():
        return f"${KEYS_ENV}", None
    return None


_MAKE_KEY = "`sessionstore keys generate --out FILE` makes a key file"


def _read_key_file(source: str, path: str) -> list[str]:
    from sessionstore.encryption.keys import read_key_file

    try:
        return read_key_file(path)
    except ConfigurationError as exc:
        cause = exc.__context__
        if isinstance(cause, OSError) and cause.strerror:
            why = f"cannot be read ({cause.strerror.lower()})"
        elif isinstance(cause, UnicodeDecodeError):
            why = "is not text"
        elif str(exc).endswith("holds no key"):
            why = "holds no key"
        else:  # a line that is no key, named by the library: file, line, what is wrong
            raise Refused(f"{source}: {exc}") from None
        raise Refused(f"{source}: {why}; {_MAKE_KEY}") from None


def _checked(source: str, keys: list[str]) -> list[str]:
    """``keys``, each checked to be a master key, as ``source`` gave them."""
    from sessionstore.encryption.keys import MasterKeys

    for number, key in enumerate(keys, 1):
        try:
            MasterKeys(key)
        except ConfigurationError:
            which = f"key {number} of {len(keys)}" if len(keys) > 1 else "its key"
            raise Refused(
                f"{source}: {which} is not a master key (44 characters of URL-safe base64, "
                f"{len(key)} given); {_MAKE_KEY}"
            ) from None
    return keys


def _key_refusal(error: EncryptionKeyError, args: argparse.Namespace) -> Exception:
    """An `EncryptionKeyError` naming the options that give keys, or whence keys that do not fit."""
    shown = named(args.db)
    if error.needs_keys:
        return Refused(f"{shown} is encrypted: open it with {KEY_HINT}, the keys that sealed it")
    given = key_source(args)
    if given is None:
        return error
    return Refused(f"{given[0]} does not fit {shown}: {in_user_words(str(error), args)}")


@asynccontextmanager
async def opened(args: argparse.Namespace, *, read: bool) -> AsyncIterator[SessionStore]:
    """The store of ``--db`` (`check_store`), with the keys `key_options` finds, closed after."""
    await check_store(args.db, read=read)
    # A command writes what it is asked to, never a cache beside a JSONL store's files.
    options: dict[str, Any] = {"write_caches": False} if store_directory(args.db) else {}
    keys = key_options(args)
    try:
        async with open_store(args.db, **options, **keys) as store:
            yield store
    except EncryptionKeyError as exc:
        raise _key_refusal(exc, args) from None
