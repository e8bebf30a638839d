"""Paging cursors: an opaque URL-safe string naming the listing it belongs to
(`listing_kind`: what was asked), the snapshot the listing stands on (a
backend's mark) and the sort key of the row it follows. One given to another
listing, or edited, is an `InvalidCursorError`, never a wrong page.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass

from sessionstore.errors import InvalidCursorError

__all__ = ["Cursor", "listing_kind"]

_VERSION = "1"


def _joined(parts: tuple[str, ...]) -> str:
    # ``<length>:<text>``, so that any text can be a part.
    return "".join(f"{len(part)}:{part}" for part in parts)


def _split(text: str) -> list[str]:
    parts, at = [], 0
    while at < len(text):
        colon = text.index(":", at)
        end = colon + 1 + int(text[at:colon])
        if not text[at:colon].isdigit() or end > len(text):
            raise ValueError("not a part")
        parts.append(text[colon + 1 : end])
        at = end
    return parts


def listing_kind(*parts: str | None) -> str:
    text = _joined(tuple("\x00" if part is None else "=" + part for part in parts))
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=9).hexdigest()


@dataclass(frozen=True)
class Cursor:
    """Where a page ended.

    Attributes:
        kind: `listing_kind` of the call the page answered.
        mark: the backend's snapshot mark for the whole listing ("" if none).
        key: the sort key of the last row given, as strings.
    """

    kind: str
    mark: str
    key: tuple[str, ...]

    def encode(self) -> str:
        text = _joined((_VERSION, self.kind, self.mark, *self.key))
        raw = text.encode("utf-8", "surrogatepass")
        return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")

    @classmethod
    def decode(cls, text: object, kind: str, *, length: int) -> Cursor:
        """Read a cursor a page of the listing ``kind`` gave (a key of ``length`` parts)."""
        if not isinstance(text, str) or not text.isascii():
            raise InvalidCursorError(f"not a cursor: {text!r}")
        try:
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
            parts = _split(raw.decode("utf-8", "surrogatepass"))
        except (binascii.Error, ValueError):
            raise InvalidCursorError(f"not a cursor: {text!r}") from None
        if len(parts) != 3 + length or parts[0] != _VERSION:
            raise InvalidCursorError(f"not a cursor: {text!r}")
        if parts[1] != kind:
            raise InvalidCursorError(
                "this cursor continues another listing (another order, owner or search): "
                "pass the same arguments as for the page it came from"
            )
        return cls(kind=parts[1], mark=parts[2], key=tuple(parts[3:]))
