"""`ArchiveSealer`: the lines of an encrypted archive (docs/encryption.md),
each sealed under its session's (or journal's) data key, bound to its file
and line, and opened with the keys of the archive's ``keys.jsonl`` or,
failing that, of a keyring given.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable

from sessionstore.encryption import cipher
from sessionstore.encryption.cipher import Sealed
from sessionstore.encryption.keyring import Scope, WrappedKey
from sessionstore.encryption.keys import MasterKeys
from sessionstore.encryption.sealer import DataKey, unwrap_key
from sessionstore.errors import EncryptionKeyError
from sessionstore.models import ArchivedKey

__all__ = ["ArchiveSealer", "UnopenedLine"]

_KEYS = "keys.jsonl"  # where the archive's keys come from, for messages


class UnopenedLine(ValueError):
    """A line of a sealed file that does not open; the message says why."""


class ArchiveSealer:
    """Seals an archive's lines under data keys, and opens them again.

    Args:
        keys: the master keys that unwrap the data keys.
        lookup: where a data key the archive's ``keys.jsonl`` does not give
            is looked up (a keyring's ``get``), or None.
    """

    def __init__(
        self, keys: MasterKeys, lookup: Callable[[bytes], WrappedKey | None] | None = None
    ) -> None:
        self.keys = keys
        self._lookup = lookup
        self._archived: dict[bytes, WrappedKey] = {}  # from the archive's keys.jsonl
        self._open: dict[bytes, DataKey] = {}

    # ------------------------------------------------------------ keys

    def unwrap(self, found: WrappedKey, where: str) -> DataKey:
        """The data key ``found`` wraps (kept for the lines after)."""
        key = self._open.get(found.key_id)
        if key is None:
            key = self._open[found.key_id] = DataKey.of(
                found.key_id, unwrap_key(self.keys, found, where)
            )
        return key

    def take(self, archived: ArchivedKey) -> None:
        """Know a data key from the archive's ``keys.jsonl``.

        Raises:
            ValueError: its id or wrapped key is not what export writes.
        """
        if archived.scope not in ("session", "journal"):
            raise ValueError(f"scope {archived.scope!r} is not session or journal")
        try:
            key_id = bytes.fromhex(archived.key)
            wrapped = base64.b64decode(archived.wrapped, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("its key or wrapped key is not hex and base64") from None
        if len(key_id) != cipher.KEY_ID_BYTES:
            raise ValueError(f"a key id of {len(key_id)} bytes, not {cipher.KEY_ID_BYTES}")
        scope: Scope = "session" if archived.scope == "session" else "journal"
        self._archived[key_id] = WrappedKey(key_id, scope, archived.name, archived.master, wrapped)

    @staticmethod
    def archived(found: WrappedKey) -> ArchivedKey:
        """The line of ``keys.jsonl`` that holds ``found``."""
        return ArchivedKey(
            key=found.key_id.hex(),
            scope=found.scope,
            name=found.name,
            master=found.master,
            wrapped=base64.b64encode(found.wrapped).decode("ascii"),
        )

    def key_by_id(self, key_id: bytes) -> DataKey:
        """The data key of that id, from the archive's keys or the lookup.

        Raises:
            UnopenedLine: neither gives a key that the master keys unwrap.
        """
        key = self._open.get(key_id)
        if key is not None:
            return key
        reasons = []
        found = self._archived.get(key_id)
        if found is not None:
            try:
                return self.unwrap(found, _KEYS)
            except EncryptionKeyError as exc:
                reasons.append(f"{_KEYS}: {exc}")
        else:
            reasons.append(f"not in {_KEYS}")
        found = self._lookup(key_id) if self._lookup is not None else None
        if found is not None:
            try:
                return self.unwrap(found, "the keyring")
            except EncryptionKeyError as exc:
                reasons.append(f"the keyring: {exc}")
        else:
            reasons.append("not in the keyring given" if self._lookup else "no keyring given")
        raise UnopenedLine(
            f"sealed by data key {key_id.hex()}, which nothing given opens "
            f"({'; '.join(reasons)}): destroyed by an erase, or its keys are elsewhere"
        )

    # ------------------------------------------------------------ lines

    @staticmethod
    def seal(key: DataKey, part: str, name: str, number: int, line: bytes) -> bytes:
        """Line ``number`` (1-based) of the file of ``name`` in ``part``
        (``sessions``, ``titles``, ``journals``) as the sealed file holds it.

        Same line, same place, same bytes (`cipher.seal_fixed`): an archive
        grows by what it lacks, checked byte for byte, as a plain one does.
        """
        value = cipher.seal_fixed(
            key.cipher, key.key_id, key.nonces, f"archive/{part}", name, number, line
        )
        return base64.b64encode(value) + b"\n"

    def open(self, part: str, name: str, number: int, line: str) -> bytes:
        """What line ``number`` of a sealed file holds, as `seal` was given it.

        Raises:
            UnopenedLine: it is not a sealed line, no key given opens it, or
                it was changed or moved from another file or line.
        """
        try:
            value = base64.b64decode(line, validate=True)
        except ValueError:  # binascii.Error, or a character not ASCII
            raise UnopenedLine("not a sealed line (base64)") from None
        try:
            key = self.key_by_id(cipher.sealed_key_id(value))
            return cipher.open_value(key.cipher, f"archive/{part}", name, number, value)
        except Sealed as exc:
            raise UnopenedLine(str(exc)) from None
