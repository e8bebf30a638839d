"""Where the store is unless ``--db`` says, and the defaults the help states: a
module that imports nothing, so that the parser (built by every run) loads no command."""

from __future__ import annotations

import getpass
import os

__all__ = [
    "DB_ENV",
    "DEFAULT_DB",
    "HITS",
    "HTML",
    "KEYRING_ENV",
    "KEYS_ENV",
    "KEY_FILE_ENV",
    "PAGE",
    "default_target",
    "login",
]

DEFAULT_DB = "./sessions.db"
DB_ENV = "SESSIONSTORE_DB"  # alembic's env.py reads it too
KEY_FILE_ENV = "SESSIONSTORE_KEY_FILE"  # --key-file
KEYS_ENV = "SESSIONSTORE_KEYS"  # master keys themselves, newest first, comma-separated
KEYRING_ENV = "SESSIONSTORE_KEYRING"  # --keyring

PAGE = 50  # the sessions `ls` shows on a terminal unless told (--limit)
HITS = 20  # the hits `search` shows unless told (--limit)
HTML = "html"  # <archive>/html/<id>.html: the pages of `export --html`, which `import` ignores


def default_target() -> str:
    """The store a command opens when not given ``--db``."""
    return os.environ.get(DB_ENV) or DEFAULT_DB


def login() -> str | None:
    """The operator's login name, recorded as who settled or pruned (``--by``
    unless given); None when the system knows none."""
    try:
        return getpass.getuser()
    except (OSError, KeyError):  # no login name, and no user database entry
        return None
