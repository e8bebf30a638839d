"""serde_json's answer for a line, and ours, side by side.

The oracle is our small Rust program (``serde_roundtrip/``), built from
Debian's packaged crates by ``build.sh``; `.ci/run` builds it and names it
in ``SESSIONSTORE_SERDE_ORACLE``. It reads lines on stdin and answers one
line each: ``ok <serde_json's re-encoding>`` or ``err <message>``. Given
paths (``session``), it loads each session file as the Rust store does.

The reference has no head move, title change or erasure record: for those
kinds the oracle declares them with serde as a Rust program would (their
fields as docs/wire-format.md gives them), so what is compared is JSON
itself (its grammar, numbers, escapes), the fields' types, and repeated and
unknown members, as serde_json reads them.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from sessionstore import (
    InvalidRecordError,
    decode_entry,
    decode_head_move,
    decode_journal_line,
    decode_message,
    decode_meta,
    decode_title_change,
    encode,
)
from sessionstore.wire import Record, decode_erasure
from sessionstore.wire.stored import read_stored_entry, read_stored_meta

ORACLE_ENV = "SESSIONSTORE_SERDE_ORACLE"
BUILD = Path(__file__).parent / "build.sh"

KINDS = ("meta", "entry", "message", "journal", "head", "title", "erasure")

_DECODERS: dict[str, Callable[[bytes], Record]] = {
    "meta": decode_meta,
    "entry": decode_entry,
    "message": decode_message,
    "journal": decode_journal_line,
    "head": decode_head_move,
    "title": decode_title_change,
    "erasure": decode_erasure,
}
_STORED: dict[str, Callable[[bytes], Record]] = {
    "meta": read_stored_meta,
    "entry": read_stored_entry,
}


def oracle_or_skip() -> Path:
    """The oracle binary; skip (locally) or fail (in CI) without one."""
    path = os.environ.get(ORACLE_ENV)
    if path and Path(path).is_file():
        return Path(path)
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but {ORACLE_ENV} names no binary: .ci/run must build it ({BUILD})")
    pytest.skip(
        f"the serde_json differential tests need the oracle: "
        f"export {ORACLE_ENV}=$(tests/differential/build.sh)"
    )


@dataclass(frozen=True)
class Answer:
    """What one side made of a line: its re-encoding, or why it refused."""

    ok: bool
    text: str

    def __str__(self) -> str:
        return f"{'ok' if self.ok else 'err'} {self.text}"


class Oracle:
    """serde_json's answers, many lines to one run of the binary."""

    def __init__(self, binary: Path) -> None:
        self.binary = binary

    def answers(self, kind: str, lines: Sequence[bytes]) -> list[Answer]:
        """serde_json's answer for each line (which must not hold a newline)."""
        if not lines:
            return []
        assert all(b"\n" not in line for line in lines)
        done = subprocess.run(
            [str(self.binary), kind],
            input=b"\n".join(lines) + b"\n",
            capture_output=True,
            timeout=120,
            check=True,
        )
        replies = done.stdout.decode("utf-8").split("\n")
        assert replies[-1] == "", "the oracle ends every answer with a newline"
        assert len(replies) - 1 == len(lines), done.stderr.decode(errors="replace")
        return [Answer(reply.startswith("ok "), reply.partition(" ")[2]) for reply in replies[:-1]]

    def load_sessions(self, paths: Sequence[Path]) -> list[list[str] | str]:
        """How the Rust store's ``load`` reads each session file: the lines it
        decoded, serde_json's re-encoding of each (the header first), or why
        it refused the file."""
        answers = self.answers("session", [os.fsencode(path) for path in paths])
        return [json.loads(answer.text) if answer.ok else answer.text for answer in answers]


def ours(kind: str, line: bytes) -> Answer:
    """Our strict decoder's answer, re-encoded; the stored-line reader must agree."""
    try:
        record = _DECODERS[kind](line)
    except InvalidRecordError as exc:
        answer = Answer(False, str(exc))
    else:
        answer = Answer(True, encode(record))
    stored = _STORED.get(kind)
    if stored is not None:
        try:
            fast = Answer(True, encode(stored(line)))
        except InvalidRecordError:
            fast = Answer(False, "")
        assert (fast.ok, fast.ok and fast.text) == (answer.ok, answer.ok and answer.text), (
            f"the stored-line reader disagrees with the strict decoder on {line!r}"
        )
    return answer
