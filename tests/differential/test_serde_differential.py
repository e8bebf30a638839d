"""Our codec against serde_json itself: the same answer on every line.

For each kind of record (header, entry, message, journal line, head move,
title change, erasure), lines are drawn (valid records encoded by us, then
bent: repeated and unknown members, deep nesting, odd numbers, timestamps,
escapes, surrogates, wrong types, stray bytes) and given to both our strict
decoder and the oracle, a Rust program of ours on serde + serde_json +
chrono + uuid (see oracle.py). Both must refuse, or both accept and
re-encode to the same bytes, except where a deviation below explains the
difference. The stored-line reader must also give the strict decoder's
answer on every line.

What each kind is compared against:

- header, entry, message, journal line: the reference's own types. A
  header's title, owner, tags and metadata are this project's fields,
  unknown to the reference: serde_json answers with the reference's four
  fields, and ours must be those followed by ours (a deviation below).
- head move, title change, erasure: the reference has no such record, so
  the oracle declares each as a serde struct of the fields the docs give
  it; what is compared is JSON itself and the fields' types, repeats and
  unknown members, as serde_json reads them.

``SESSIONSTORE_DIFFERENTIAL_EXAMPLES`` sets how many batches each kind
draws (default 12, of up to 40 lines each): raise it for a longer hunt.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessionstore import Journal
from tests.differential.lines import alphabet_line, lines
from tests.differential.oracle import (
    KINDS,
    ORACLE_ENV,
    Answer,
    Oracle,
    oracle_or_skip,
    ours,
)

EXAMPLES = int(os.environ.get("SESSIONSTORE_DIFFERENTIAL_EXAMPLES", "25"))
BATCH = 40

# ------------------------------------------------------------------ deviations


@dataclass(frozen=True)
class Deviation:
    """A difference from serde_json made on purpose, with its reason and an example."""

    name: str
    reason: str
    example: tuple[str, bytes]
    explains: Callable[[bytes, Answer, Answer], bool]
    kinds: tuple[str, ...] = KINDS
    """The kinds of record it may explain a difference in."""


def _is_array(line: bytes) -> bool:
    return line.lstrip(b" \t\r\n").startswith(b"[")


def _same_but_float_rounding(ours: str, theirs: str) -> bool:
    """Whether two JSON texts differ only in floats a few units in the last place apart."""

    def close(a: Any, b: Any) -> bool:
        if type(a) is not type(b):
            return False
        if isinstance(a, float):
            return bool(a == b or abs(a - b) <= 4 * math.ulp(max(abs(a), abs(b))))
        if isinstance(a, list):
            return len(a) == len(b) and all(map(close, a, b))
        return bool(a == b)

    def pairs(items: list[tuple[str, Any]]) -> list[Any]:
        return [item for pair in items for item in pair]  # objects as flat key, value lists

    return close(
        json.loads(ours, object_pairs_hook=pairs), json.loads(theirs, object_pairs_hook=pairs)
    )


_NUMBER = re.compile(rb"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_MAX = Decimal(sys.float_info.max)
_ULP = Decimal(math.ulp(sys.float_info.max))


def _at_the_float_range_edge(line: bytes) -> bool:
    """Whether a number in the line is within a few units in the last place of f64::MAX.

    There serde_json's inexact parse may overflow where the exact value is
    finite (1.7976931348623158e308, which is f64::MAX), or the other way.
    """
    for number in _NUMBER.finditer(line):
        with contextlib.suppress(ArithmeticError):
            if abs(abs(Decimal(number.group().decode())) - _MAX) <= 4 * _ULP:
                return True
    return False


_DOT_AFTER_A_HUGE_INTEGER = re.compile(rb"(?<![0-9.])-?([1-9][0-9]{19,})\.(?![0-9])")


def _dot_after_a_huge_integer(line: bytes) -> bool:
    """Whether the line holds an integer beyond u64 followed by a ``.`` and no digit.

    serde_json reads an integer part too large for a u64 on a slower path,
    which takes a ``.`` with no digit after it as the end of the number.
    """
    return any(
        int(found.group(1)) > 2**64 - 1 for found in _DOT_AFTER_A_HUGE_INTEGER.finditer(line)
    )


_VALUE_REFUSALS = ("number out of range", "lone surrogate escape", "nested deeper than")
"""How our decoder refuses a value serde_json only skips where it ignores a member."""


DEVIATIONS = (
    Deviation(
        "a record is a JSON object",
        "serde's derived Deserialize also reads a struct, and an internally tagged enum, "
        "from a JSON array of its fields in order; SPEC section 1 refuses anything but an "
        "object, on purpose, so an array is never a record here.",
        ("meta", b'["s",1,null,""]'),
        lambda line, ours, theirs: not ours.ok and theirs.ok and _is_array(line),
    ),
    Deviation(
        "floats are parsed exactly",
        "serde_json without its float_roundtrip feature, as the reference builds it, parses "
        "some decimals to a neighbouring float (6e25 becomes 6.000000000000001e25). Python's "
        "float() rounds correctly, so ours is the right value; both then write with ryu.",
        ("message", b'{"role":"r","content":6e25}'),
        lambda line, ours, theirs: (
            ours.ok and theirs.ok and _same_but_float_rounding(ours.text, theirs.text)
        ),
    ),
    Deviation(
        "f64::MAX is in range",
        "The same inexact parse overflows within a few units in the last place of the "
        "largest float: serde_json refuses 1.7976931348623158e308 as out of range, though "
        "it rounds to f64::MAX (which serde_json itself writes as 1.7976931348623157e308). "
        "We take the exact value: a number is out of range only where it rounds to infinity.",
        ("message", b'{"role":"r","content":1.7976931348623158e308}'),
        lambda line, ours, theirs: ours.ok != theirs.ok and _at_the_float_range_edge(line),
    ),
    Deviation(
        "this project's header fields",
        "A header may carry title, owner, tags and metadata, written after the reference's "
        "four fields; serde skips them as unknown fields (so the file still loads there) "
        "and so writes the header without them. We read them when they have their type, "
        "and skip them as serde does otherwise.",
        ("meta", b'{"id":"s1","title":"Trip"}'),
        lambda line, ours, theirs: (
            ours.ok and theirs.ok and _our_header_fields_after(ours.text, theirs.text)
        ),
    ),
    Deviation(
        "a number's fraction has digits",
        "JSON (RFC 8259) requires at least one digit after a decimal point, and serde_json "
        "refuses 1. as we do; but an integer part beyond u64 (20 or more digits) goes to "
        "serde_json's slower path, which takes 18446744073709551616. as a float. We give "
        "JSON's answer: not a number.",
        ("message", b'{"role":"r","content":18446744073709551616.}'),
        lambda line, ours, theirs: not ours.ok and theirs.ok and _dot_after_a_huge_integer(line),
    ),
    Deviation(
        "this project's own records are read whole",
        "A head move, title change or erasure is this project's record, which the reference "
        "never reads: every member of it is read as a JSON value, an unknown one too. A serde "
        "struct only skips an unknown member, checking its grammar but not its value, so it "
        "takes 1e400, a lone surrogate or nesting past its limit there; we refuse them, as we "
        "refuse them in an entry (where serde reads every member too).",
        ("head", b'{"session_id":"s","at":"t","x":1e400}'),
        lambda line, ours, theirs: (
            not ours.ok and theirs.ok and ours.text.startswith(_VALUE_REFUSALS)
        ),
        kinds=("head", "title", "erasure"),
    ),
)


def _our_header_fields_after(ours: str, theirs: str) -> bool:
    """Whether our header is serde's with this project's fields after its four."""
    rest = ours[len(theirs) - 1 : -1]
    return ours.startswith(theirs[:-1]) and rest.startswith(
        (',"title":', ',"owner":', ',"tags":', ',"metadata":')
    )


def disagreement(kind: str, line: bytes, mine: Answer, theirs: Answer) -> str | None:
    """Why our answer differs from serde_json's, unless it does not or a deviation says why."""
    if mine.ok == theirs.ok and (not mine.ok or mine.text == theirs.text):
        return None
    if any(
        kind in deviation.kinds and deviation.explains(line, mine, theirs)
        for deviation in DEVIATIONS
    ):
        return None
    return f"{kind} line {line!r}:\n  serde_json: {theirs}\n  we:         {mine}"


# ------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def oracle() -> Oracle:
    return Oracle(oracle_or_skip())


def check(oracle: Oracle, kind: str, batch: list[bytes]) -> None:
    theirs = oracle.answers(kind, batch)
    mine = [ours(kind, line) for line in batch]
    problems = [
        problem
        for line, a, b in zip(batch, mine, theirs, strict=True)
        if (problem := disagreement(kind, line, a, b)) is not None
    ]
    assert not problems, "\n".join(problems)
    if kind == "journal":  # Journal.parse skips exactly the lines decode refuses
        blank = [not line.strip(b" \t\r\x0c") for line in batch]
        journal = Journal.parse(b"\n".join(batch))
        refused = [
            n for n, (a, b) in enumerate(zip(mine, blank, strict=True), 1) if not a.ok and not b
        ]
        assert journal.skipped == refused


# ------------------------------------------------------------------ tests


def test_without_the_oracle_the_tests_skip_locally_saying_how(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(ORACLE_ENV, raising=False)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"build\.sh"):
        oracle_or_skip()


def test_without_the_oracle_the_tests_fail_in_ci(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(ORACLE_ENV, str(tmp_path / "missing"))
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true"):
        oracle_or_skip()


@pytest.mark.parametrize("deviation", DEVIATIONS, ids=lambda d: d.name)
def test_each_deviation_is_still_one(oracle: Oracle, deviation: Deviation) -> None:
    # The table must stay true: its example still differs, and only as it says.
    kind, line = deviation.example
    [theirs] = oracle.answers(kind, [line])
    mine = ours(kind, line)
    assert (mine.ok, mine.text) != (theirs.ok, theirs.text)
    assert deviation.explains(line, mine, theirs)


ISSUE_LINES = {
    "meta": [
        b'{"id":"a","x":1e400}',
        b'{"id":"a","x":' + b"[" * 600 + b"]" * 600 + b"}",
        b'{"id":"a","x":' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        b'{"id":"a","x":"\\ud800"}',
        b'{"id":"a","x":NaN}',
        b'{"id":"a","id":"b"}',
        b'{"id":"a","version":-0}',
        b'{"id":"s1","title":"Trip"}',
    ],
    "message": [
        b'{"role":"","content":' + b"[" * 600 + b"]" * 600 + b"}",
        b'{"role":"","content":0,"x":"\\ud800","x":0}',
        b'{"role":"","content":0,"x":' + b"[" * 127 + b"]" * 127 + b',"x":0}',
        b'{"role":"","content":0,"x":1,"x":0,"y":2}',
        b'{"role":"r","content":1,"streaming":false,"streaming":true}',
        b'{"role":"r","content":{"a":1,"b":2,"a":3}}',
        b'{"role":"r","content":[-0,18446744073709551616,1e-400,5e-324]}',
    ],
    "entry": [
        b'{"type":"message","id":"e","timestamp":"t","message":{"role":"r","content":NaN}}',
        b'{"type":"message","id":"e","timestamp":"t","message":{"role":"r","content":1},"x":1e400}',
        b'{"type":"message","id":"e","id":"f","timestamp":"t","message":{"role":"r","content":1}}',
        b'{"type":"message","id":"e","timestamp":"t","message":{"role":"r","content":'
        + b"[" * 150
        + b"]" * 150
        + b"}}",
        b'{"type":"compaction","id":"c","timestamp":"t","summary":"s","first_kept_id":"e",'
        b'"tokens_before":-0}',
    ],
    "journal": [
        b'{"line":"post","at":"' + at + b'","id":"3425d7c5-0000-4000-8000-000000000000"}'
        for at in [
            b"2016-12-31T23:59:60Z",
            b"2026-10-13T12:34:60.5+02:00",
            b"0000-01-01T00:00:00Z",
            b"0001-01-01T00:00:00+00:01",
            b"9999-12-31T23:59:00-00:01",
            b"2026-10-13t11:00:00Z",
            b"2026-10-13 11:00:00Z",
            b" 2026-1-5 1:2:3 +0200 ",
            b"2026-10-13T11:00:00UTC",
        ]
    ],
    "head": [
        b'{"session_id":"s","at":"t"}',
        b'{"at":"t","session_id":"s","x":[-0,18446744073709551616,1e-400]}',
        b'{"session_id":"s","at":"t","at":"u"}',
        b'{"session_id":1,"at":"t"}',
        b'{"session_id":null,"at":"t"}',
        b'{"session_id":"\\ud800","at":"t"}',
    ],
    "title": [
        b'{"session_id":"s","title":null,"at":"t"}',
        b'{"session_id":"s","at":"t"}',
        b'{"session_id":"s","title":"a","title":"b","at":"t"}',
        b'{"session_id":"s","title":["a"],"at":"t"}',
    ],
    "erasure": [
        b'{"kind":"session","name":"n","at":"t","reason":"r","lines":0,"digest":"d"}',
        b'{"kind":"journal","name":"n","at":"t","reason":"r","lines":-0,"digest":"d"}',
        b'{"kind":"Session","name":"n","at":"t","reason":"r","lines":1,"digest":"d"}',
        b'{"kind":"session","name":"n","at":"t","reason":"r","lines":1.0,"digest":"d"}',
        b'{"kind":"session","name":"n","at":"t","reason":"r","lines":18446744073709551616,'
        b'"digest":"d"}',
        b'{"kind":"session","name":"n","at":"t","reason":"r","lines":18446744073709551615,'
        b'"digest":"d","kind":"journal"}',
    ],
}


@pytest.mark.parametrize("kind", KINDS)
def test_the_issue_lines_get_serde_json_s_answer(oracle: Oracle, kind: str) -> None:
    check(oracle, kind, ISSUE_LINES[kind])


def batches(kind: str) -> st.SearchStrategy[list[bytes]]:
    return st.lists(lines(kind) | alphabet_line(), min_size=BATCH // 2, max_size=BATCH)


HUNT = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.mark.parametrize("kind", KINDS)
def test_drawn_lines_get_serde_json_s_answer(oracle: Oracle, kind: str) -> None:
    @HUNT
    @given(batches(kind))
    def hunt(batch: list[bytes]) -> None:
        check(oracle, kind, batch)

    hunt()
