"""The store as the user named it (``--db``, ``$SESSIONSTORE_DB`` or the default),
never the driver URL the library names it by in a message
(``sqlite+pysqlite:////abs/x.db``), and never a password."""

from __future__ import annotations

import argparse
import os
import re
import shlex
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from sessionstore.cli.defaults import DB_ENV, DEFAULT_DB, KEY_FILE_ENV

__all__ = ["KEY_HINT", "in_user_words", "named", "no_store_hint", "settle_hint"]

KEY_HINT = f"--key-file FILE (or ${KEY_FILE_ENV})"  # how a sealed store is given its keys

_MASK = "***"
_CREDENTIALS = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://[^:/@\s]*):[^@\s]*@")
_PASSWORD_PARAMETER = re.compile(r"(?i)\b(password|passwd)=[^&\s]*")


def named(target: str) -> str:
    """``target`` as the user gave it, its password (if any) masked."""
    if "://" not in target:
        return target
    try:
        parts = urlsplit(target)
        password = parts.password
    except ValueError:  # not a URL urllib reads (a bad port): mask by pattern
        return _masked(target)
    netloc = parts.netloc
    if password is not None:
        userinfo, _, host = netloc.rpartition("@")
        netloc = f"{userinfo.partition(':')[0]}:{_MASK}@{host}"
    query = parts.query
    if _PASSWORD_PARAMETER.search(query):
        query = urlencode(
            [
                (name, _MASK if name.lower() in ("password", "passwd") else value)
                for name, value in parse_qsl(query, keep_blank_values=True)
            ],
            safe="*",
        )
    if netloc == parts.netloc and query == parts.query:
        return target
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _masked(text: str) -> str:
    """Every password a URL in ``text`` carries, masked."""
    text = _CREDENTIALS.sub(lambda m: f"{m['scheme']}:{_MASK}@", text)
    return _PASSWORD_PARAMETER.sub(lambda m: f"{m[1]}={_MASK}", text)


def _driver_forms(target: str) -> list[str]:
    """How a message may write ``target``: its URLs (password hidden), itself, its repr."""
    forms = [repr(target), target]
    from sessionstore.backends.targets import is_sql_target

    if is_sql_target(target):
        from sessionstore.backends.sql.engine import describe, parse_target, sync_url
        from sessionstore.errors import ConfigurationError

        try:
            urls = [parse_target(target), sync_url(target)]
        except ConfigurationError:
            urls = []
        forms = [describe(url) for url in urls] + [str(url) for url in urls] + forms
    return sorted(set(forms), key=len, reverse=True)  # the longest first: a form holds others


# The library's parameters a message names (``open it with keys=``): options here.
_OPTIONS = re.compile(r"\b(keys|keyring)=(?![\w'\"])")


def in_user_words(message: str, args: argparse.Namespace) -> str:
    """An error's ``message`` with the store and keyring named as given, ``keys=``
    and ``keyring=`` as the options that give them, and no password in it."""
    for target in (getattr(args, "db", None), getattr(args, "keyring", None)):
        if target:
            for form in _driver_forms(target):
                message = message.replace(form, named(target))
    message = _OPTIONS.sub(lambda m: "--key-file" if m[1] == "keys" else "--keyring", message)
    return _masked(message)


def no_store_hint(target: str, missing: str) -> str:
    """Where ``target`` came from, and how to name a store or make one to try."""
    if os.environ.get(DB_ENV) == target:
        given = f"named by ${DB_ENV}"
    elif target == DEFAULT_DB:
        given = f"the default: no --db given, ${DB_ENV} unset"
    else:
        given = missing
    demo = (
        "sessionstore demo" if target == DEFAULT_DB else f"sessionstore demo --db {named(target)}"
    )
    return f"({given}); name a store with --db TARGET, or make one to try: {demo}"


def settle_hint(target: str) -> str:
    """How an operator settles an effect in doubt of the store ``target``."""
    return (
        f"once you know whether each happened: sessionstore --db {shlex.quote(named(target))} "
        "journal NAME --settle KEY done --result JSON | not-done | failed, with --reason TEXT "
        "(docs/effects.md)"
    )
