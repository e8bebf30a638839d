"""An encrypted archive's manifest: what it holds, authenticated by the master key.

A sealed line is bound to its file and line number, but nothing says how
many lines there are, and heads are clear: ``manifest.txt`` lists each
``.sealed`` file and head file with its lines and SHA-256, under an
HMAC-SHA256 keyed by a data key of the store's keyring (`Sealing.manifest_key`)::

    sessionstore-archive-manifest 1 <key id>
    <lines> <sha256> <path in the archive>
    ...
    mac <hmac of every line above>

An import checks it first (`check`): a listed file missing or shorter, a
head changed, a file not listed refuses the whole import; a sealed file's
changed line is left to its own check. An export verifies it and writes it
again with what it exported (`updated`).
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from sessionstore.archive.report import HEADS, SUFFIX, ArchiveIssue, Refused, open_inside
from sessionstore.archive.sealing import SEALED

Opener = Callable[[str], bytes]
"""What gives the key of an id (hex); raises `Refused` when none opens."""

__all__ = [
    "MANIFEST",
    "Listed",
    "Opener",
    "check",
    "covered",
    "measure",
    "read",
    "render",
    "updated",
]

MANIFEST = "manifest.txt"
"""An encrypted archive's manifest, at its root."""

_FIRST = "sessionstore-archive-manifest 1"
_CHUNK = 1 << 20


class Listed(NamedTuple):
    """A file as the manifest lists it: its number of lines and digest."""

    lines: int
    sha256: str


def _mac(key: bytes, body: bytes) -> str:
    mac_key = hmac.digest(key, b"sessionstore/archive-manifest", hashlib.sha256)
    return hmac.digest(mac_key, body, hashlib.sha256).hex()


def covered(root: Path) -> list[str]:
    """The files a manifest covers (``.sealed`` files, heads), as paths in the archive, sorted."""
    found = []
    for top, dirs, files in os.walk(root):
        dirs[:] = [name for name in dirs if not name.startswith(".")]
        where = Path(top).relative_to(root)
        for name in files:
            if name.startswith("."):  # an export's file being written
                continue
            if name.endswith(SEALED) or (where == Path(HEADS) and name.endswith(SUFFIX)):
                found.append((where / name).as_posix())
    return sorted(found)


def measure(root: Path, name: str) -> Listed:
    """The lines and digest of the archive's file ``name`` as it is now."""
    digest = hashlib.sha256()
    lines, last = 0, b"\n"
    with os.fdopen(open_inside(root, root / name), "rb") as file:
        while chunk := file.read(_CHUNK):
            digest.update(chunk)
            lines += chunk.count(b"\n")
            last = chunk[-1:]
    return Listed(lines + (last != b"\n"), digest.hexdigest())


def read(root: Path, opener: Opener) -> dict[str, Listed] | None:
    """What the archive's manifest lists (None: it has none); `Refused` when it is
    not one, no key given opens its key, or its MAC does not match."""
    try:
        fd = open_inside(root, root / MANIFEST)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as file:
        data = file.read()
    body, _, mac_line = data.rstrip(b"\n").rpartition(b"\n")
    first = body.split(b"\n", 1)[0].decode("utf-8", "replace")
    if not first.startswith(_FIRST + " ") or not mac_line.startswith(b"mac "):
        raise Refused(1, "not an archive manifest (sessionstore-archive-manifest 1 ... mac)")
    expected = _mac(opener(first[len(_FIRST) + 1 :]), body + b"\n")
    if not hmac.compare_digest(mac_line[4:].decode("ascii", "replace"), expected):
        raise Refused(None, "its MAC does not match: changed without the keys")
    listed: dict[str, Listed] = {}
    for number, line in enumerate(body.decode("utf-8").split("\n")[1:], 2):
        count, digest, name = [*line.split(" ", 2), "", ""][:3]
        if not count.isdigit() or len(digest) != 64 or not name:
            raise Refused(number, "not '<lines> <sha256> <path>'")
        listed[name] = Listed(int(count), digest)
    return listed


def render(key_id: str, key: bytes, listed: dict[str, Listed]) -> bytes:
    """The manifest listing ``listed``, authenticated by the key ``key_id``."""
    lines = [f"{_FIRST} {key_id}"]
    lines += [f"{item.lines} {item.sha256} {name}" for name, item in sorted(listed.items())]
    body = "\n".join(lines).encode() + b"\n"
    return body + f"mac {_mac(key, body)}\n".encode()


def updated(
    root: Path, previous: dict[str, Listed] | None, touched: set[str], refused: set[str]
) -> dict[str, Listed]:
    """The manifest after an export: ``previous`` with each covered file it
    ``touched`` (but those it ``refused``) measured again; with none, every
    covered file: the archive is trusted as it stands."""
    listed = dict(previous or {})
    for name in covered(root):
        if name in refused or (previous is not None and name not in touched):
            continue
        try:
            listed[name] = measure(root, name)
        except (FileNotFoundError, Refused):
            listed.pop(name, None)
    return listed


def check(root: Path, opener: Opener | None) -> list[ArchiveIssue]:
    """What is wrong with the archive against its manifest; with no ``opener``
    (no keys given), each head's file is refused (the sealed ones by the import)."""
    present = covered(root)
    manifest = str(root / MANIFEST)
    if not (root / MANIFEST).exists() and not any(name.endswith(SEALED) for name in present):
        return []  # a plain archive
    if opener is None:  # its sealed files are refused as such (`importing`)
        reason = "an encrypted archive's head: give the master key that exported it"
        return [
            ArchiveIssue(str(root / name), None, reason)
            for name in present
            if not name.endswith(SEALED)
        ]
    try:
        listed = read(root, opener)
    except Refused as refused:
        return [ArchiveIssue(manifest, refused.line, refused.reason)]
    if listed is None:
        reason = (
            f"missing: the archive was truncated, or exported before manifests "
            f"(export --encrypted into it again writes one); {len(present)} file(s) unchecked"
        )
        return [ArchiveIssue(manifest, None, reason)]
    issues = []
    for name in present:
        if name not in listed:
            issues.append(
                ArchiveIssue(str(root / name), None, "not in the manifest: added without the keys")
            )
    for name, item in listed.items():
        path = str(root / name)
        try:
            now = measure(root, name)
        except FileNotFoundError:
            reason = f"missing: the manifest lists it with {item.lines} line(s); removed"
            issues.append(ArchiveIssue(path, None, reason))
            continue
        except Refused as refused:
            issues.append(ArchiveIssue(path, refused.line, refused.reason))
            continue
        if now.lines < item.lines:
            gone = (
                f"line {item.lines}"
                if now.lines + 1 == item.lines
                else f"lines {now.lines + 1}-{item.lines}"
            )
            reason = f"holds {now.lines} line(s), the manifest {item.lines}: {gone} removed"
            issues.append(ArchiveIssue(path, now.lines + 1, reason))
        elif now.lines > item.lines:
            reason = (
                f"not in the manifest, which lists {item.lines} line(s): added without the keys"
            )
            issues.append(ArchiveIssue(path, item.lines + 1, reason))
        elif now.sha256 != item.sha256 and not name.endswith(SEALED):
            reason = "differs from the manifest's digest: changed without the keys"
            issues.append(ArchiveIssue(path, None, reason))
    return issues
