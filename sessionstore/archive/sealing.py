"""Encrypted archives (``export --encrypted``): which files are sealed, and
the glue between the archive's two directions and `ArchiveSealer`.

The layout of a plain archive, but ``sessions/<id>.sealed``,
``titles/<id>.sealed`` and ``journals/<name>/session_journal.sealed`` hold
a sealed line for each line of their plain twins (under the session's or
journal's data key, bound to file and line number), ``keys.jsonl`` the
wrapped data keys and ``manifest.txt`` what it holds
(`sessionstore.archive.manifest`); heads stay clear, as in the store.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from sessionstore.archive.report import SUFFIX, Refused
from sessionstore.errors import ArchiveError, InvalidRecordError
from sessionstore.wire import decode_archived_key, encode_line

if TYPE_CHECKING:
    from sessionstore.encryption.archive import ArchiveSealer
    from sessionstore.encryption.keyring import Keyring, WrappedKey
    from sessionstore.encryption.keys import Key
    from sessionstore.encryption.sealer import DataKey
    from sessionstore.store import SessionStore

__all__ = [
    "SEALED",
    "KeysFile",
    "Sealing",
    "lines_of",
    "other_form",
    "sealed_lines",
    "stem",
]

SEALED = ".sealed"
"""How an encrypted archive's sealed files end."""

KEYS = "keys.jsonl"
"""The wrapped data keys at an encrypted archive's root."""

MANIFEST_KEY = "/archive-manifest"
"""The name of the keyring's key that authenticates an encrypted archive's
manifest (`sessionstore.archive.manifest`): of a journal's scope, as no
journal can be named so."""


def stem(path: Path) -> str:
    """The session id (or head, journal name) an archive file is named for."""
    name = path.name
    return name[: -len(SEALED)] if name.endswith(SEALED) else name[: -len(SUFFIX)]


def other_form(path: Path) -> Path:
    """The file the same session would be in the archive's other form (``.sealed`` and back)."""
    suffix = SUFFIX if path.name.endswith(SEALED) else SEALED
    return path.with_name(stem(path) + suffix)


class Sealing:
    """What an export or import of an encrypted archive seals and opens
    lines with, and the data keys it met (for ``keys.jsonl``)."""

    def __init__(
        self,
        sealer: ArchiveSealer,
        store: SessionStore | None = None,
        keyring: Keyring | None = None,
    ) -> None:
        self.sealer = sealer
        self.store = store
        self.met: dict[bytes, WrappedKey] = {}
        self._keyring = keyring  # one opened here, closed by `close`

    def close(self) -> None:
        """Close the keyring opened for an import (from its file or URL)."""
        if self._keyring is not None:
            self._keyring.close()

    @classmethod
    def of_store(cls, store: SessionStore) -> Sealing:
        """The sealing of an export of ``store``; `ArchiveError` when it is not encrypted."""
        maker: Callable[[], ArchiveSealer] | None = getattr(store, "archive_sealer", None)
        if maker is None or not getattr(store, "encrypted", False):
            raise ArchiveError(
                f"an encrypted export needs an encrypted store; {store!r} is not "
                "(export it plain, or import it into a store opened with keys first)",
                None,
            )
        return cls(maker(), store)

    @classmethod
    def for_import(
        cls, store: SessionStore, keys: Key | list[Key] | None, keyring: Any
    ) -> Sealing | None:
        """The sealing an import opens sealed files with: from ``keys`` (and
        ``keyring``, a `Keyring` or its file or URL), else the store's own when it
        is encrypted; None when neither."""
        if keys is None:
            if keyring is not None:
                raise ArchiveError("keyring= is given without keys=: give both, or neither", None)
            maker: Callable[[], ArchiveSealer] | None = getattr(store, "archive_sealer", None)
            if maker is None or not getattr(store, "encrypted", False):
                return None
            return cls(maker())
        from sessionstore.encryption.archive import ArchiveSealer
        from sessionstore.encryption.keyring import Keyring
        from sessionstore.encryption.keys import MasterKeys

        opened = None
        if keyring is not None and not isinstance(keyring, Keyring):
            from sessionstore.backends.sql.keyring import SqlKeyring

            text = os.fspath(keyring)
            if "://" not in text and not os.path.isfile(text):
                raise ArchiveError(f"no keyring at {text}: give the store's keyring file", None)
            keyring = opened = SqlKeyring(text)
        lookup = None if keyring is None else keyring.lookup
        return cls(ArchiveSealer(MasterKeys(keys), lookup), keyring=opened)

    async def key(self, scope: Literal["session", "journal"], name: str) -> DataKey | None:
        """The data key that seals ``name``'s lines in the store now (None: a
        journal with none yet), kept for ``keys.jsonl``."""
        data_key = getattr(self.store, "data_key", None)
        assert data_key is not None, "an export's sealing has a sealed store"
        found: WrappedKey | None = await data_key(scope, name)
        if found is None:
            return None
        self.met[found.key_id] = found
        return self.sealer.unwrap(found, "the store's keyring")

    async def manifest_key(self) -> tuple[str, bytes]:
        """The id (hex) and bytes of the key authenticating the manifest: a key of
        the store's keyring, kept for ``keys.jsonl`` as a journal's is."""
        data_key = getattr(self.store, "data_key", None)
        assert data_key is not None, "an export's sealing has a sealed store"
        found: WrappedKey | None = await data_key("journal", MANIFEST_KEY, create=True)
        assert found is not None, "a key made is found"
        self.met[found.key_id] = found
        return found.key_id.hex(), self.sealer.unwrap(found, "the store's keyring").nonces

    def manifest_opener(self) -> Callable[[str], bytes]:
        """What gives the bytes of the manifest's key of an id (hex), or raises `Refused`."""
        from sessionstore.encryption.archive import UnopenedLine

        def opened(key_id: str) -> bytes:
            try:
                return self.sealer.key_by_id(bytes.fromhex(key_id)).nonces
            except (UnopenedLine, ValueError) as exc:
                raise Refused(1, f"its key does not open: {exc}") from None

        return opened

    def opener(self, part: str, name: str) -> Callable[[int, str], bytes]:
        """What opens line ``number`` of ``name``'s sealed file in ``part``, or raises `Refused`."""
        from sessionstore.encryption.archive import UnopenedLine

        def opened(number: int, line: str) -> bytes:
            try:
                return self.sealer.open(part, name, number, line)
            except UnopenedLine as exc:
                raise Refused(number, f"does not open: {exc}") from None

        return opened


async def sealed_lines(
    lines: AsyncIterable[bytes], sealing: Sealing, key: DataKey, part: str, name: str
) -> AsyncIterator[bytes]:
    """The sealed file of ``lines`` (each without its newline), in blocks."""
    block: list[bytes] = []
    number = 0
    async for line in lines:
        number += 1
        block.append(sealing.sealer.seal(key, part, name, number, line))
        if len(block) >= 1024:
            yield b"".join(block)
            block = []
    if block:
        yield b"".join(block)


async def lines_of(blocks: AsyncIterable[bytes]) -> AsyncGenerator[bytes, None]:
    """The lines of a file given in blocks, without their newlines; a torn
    last one is given too."""
    rest = bytearray()  # a line begun in an earlier block
    async for block in blocks:
        start = 0
        while (end := block.find(b"\n", start)) >= 0:
            if rest:
                rest += block[start:end]
                yield bytes(rest)
                rest.clear()
            else:
                yield block[start:end]
            start = end + 1
        rest += block[start:]
    if rest:
        yield bytes(rest)


class KeysFile:
    """An encrypted archive's ``keys.jsonl``: the data keys its files are
    sealed with, each as the store's keyring wrapped it."""

    def __init__(self, root: Path) -> None:
        self.path = root / KEYS

    def read(self, sealing: Sealing) -> list[tuple[int | None, str]]:
        """Give ``sealing`` the keys the file holds (none when missing); the lines
        that are not keys, with why."""
        from sessionstore.archive.report import open_inside

        try:
            fd = open_inside(self.path.parent, self.path)
        except FileNotFoundError:
            return []
        bad: list[tuple[int | None, str]] = []
        with os.fdopen(fd, "rb") as file:
            for number, line in enumerate(file, 1):
                try:
                    sealing.sealer.take(decode_archived_key(line.rstrip(b"\n")))
                except (InvalidRecordError, ValueError) as exc:
                    bad.append((number, str(exc)))
        return bad

    def merged(self, existing: bytes, met: dict[bytes, WrappedKey]) -> bytes:
        """The file's new bytes: what it held, each key met now in place of the line
        of the same id, then the keys it lacked; `Refused` when a line is not a key."""
        from sessionstore.encryption.archive import ArchiveSealer

        out: dict[str, bytes] = {}
        for number, line in enumerate(existing.splitlines(), 1):
            try:
                out[decode_archived_key(line).key] = line + b"\n"
            except InvalidRecordError as exc:
                raise Refused(number, f"not a wrapped key: {exc}; not overwritten") from None
        for key_id, found in met.items():
            out[key_id.hex()] = encode_line(ArchiveSealer.archived(found))
        return b"".join(out.values())
