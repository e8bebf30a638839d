"""What the parser's help and the commands agree on: where the store is
unless ``--db`` says, and the defaults the help states.

A module of its own, importing nothing, so that the parser (which every
run builds, ``--help`` and ``--version`` included) loads no command.
"""

from __future__ import annotations

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
]

DEFAULT_DB = "./sessions.db"
DB_ENV = "SESSIONSTORE_DB"
"""The environment variable naming the store (alembic's ``env.py`` reads it too)."""

KEY_FILE_ENV = "SESSIONSTORE_KEY_FILE"
"""The environment variable naming a key file (``--key-file``)."""

KEYS_ENV = "SESSIONSTORE_KEYS"
"""The environment variable holding master keys themselves, newest first,
separated by commas (for a secret a container is given as a variable)."""

KEYRING_ENV = "SESSIONSTORE_KEYRING"
"""The environment variable naming the keyring (``--keyring``)."""

PAGE = 50
"""How many sessions ``ls`` shows on a terminal unless told (``--limit``)."""

HITS = 20
"""How many hits ``search`` shows unless told (``--limit``)."""

HTML = "html"
"""``<archive>/html/<id>.html``: the pages of ``export --html``, which ``import`` ignores."""


def default_target() -> str:
    """The store a command opens when not given ``--db``."""
    return os.environ.get(DB_ENV) or DEFAULT_DB
