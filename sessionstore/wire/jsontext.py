"""Checks on JSON text that need no parse: linear, without recursion, at any depth.

Python's ``json`` recurses once per level (a `RecursionError` near a
thousand); serde_json refuses a 128th level, and skips an ignored value at
any depth: the decoder refuses or skips on the text before parsing it.
"""

from __future__ import annotations

import re
from itertools import accumulate

__all__ = ["SPACE", "SkipError", "lone_surrogate_escape", "nesting", "skip_value"]

SPACE = re.compile(r"[ \t\n\r]*")  # JSON's whitespace, also serde_json's

# A string, its closing quote optional so that an unterminated one is one
# match to the end of the text (never a retry from every later quote).
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?', re.S)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}

_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|.)", re.S)


def nesting(text: str) -> int:
    """How deeply the arrays and objects of a JSON text nest (0 for a scalar).

    Exact for valid JSON; for other text, at least as deep as a parser gets.
    """
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


def lone_surrogate_escape(text: str) -> int | None:
    """Where the first ``\\u`` escape of a lone surrogate starts, or None.

    Read escape by escape, so ``\\\\ud800`` (an escaped backslash, then
    text) is not one.
    """
    high: re.Match[str] | None = None
    for escape in _ESCAPE.finditer(text):
        code = escape.group(1)
        unit = int(code, 16) if code is not None else -1
        if high is not None:
            if escape.start() != high.end() or not 0xDC00 <= unit <= 0xDFFF:
                return high.start()
            high = None
        elif 0xD800 <= unit <= 0xDBFF:
            high = escape
        elif 0xDC00 <= unit <= 0xDFFF:
            return escape.start()
    return None if high is None else high.start()


_TOKEN = re.compile(
    r"""[ \t\n\r]*(?:
      (?P<string>"[^"\\\x00-\x1f]*(?:\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})[^"\\\x00-\x1f]*)*")
    | (?P<number>-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)
    | (?P<literal>true|false|null)
    | (?P<open>[\[{])
    | (?P<close>[\]}])
    | (?P<comma>,)
    | (?P<colon>:)
    )""",
    re.X,
)
_SCALARS = frozenset(("string", "number", "literal"))

# What the skipper expects next.
_VALUE, _ITEM_OR_END, _KEY_OR_END, _KEY, _COLON, _NEXT = range(6)


class SkipError(ValueError):
    """The text at ``position`` is not JSON."""

    def __init__(self, position: int) -> None:
        super().__init__(f"invalid JSON at character {position}")
        self.position = position


def skip_value(text: str, position: int) -> int:
    """Where the JSON value starting at ``position`` ends, checked as serde skips it.

    serde_json's ``ignore_value``: JSON's grammar alone. Any depth, number
    (``1e400``) or escape (``\\ud800``) passes; control characters in
    strings, ``NaN``, a trailing comma do not. Whitespace before is skipped.

    Raises:
        SkipError: the text there is not one JSON value.
    """
    open_brackets: list[str] = []
    expect = _VALUE
    while True:
        token = _TOKEN.match(text, position)
        if token is None:
            raise SkipError(SPACE.match(text, position).end())  # type: ignore[union-attr]
        kind = token.lastgroup
        char = text[token.end() - 1]
        position = token.end()
        if expect in (_VALUE, _ITEM_OR_END):
            if kind == "open":
                open_brackets.append(char)
                expect = _ITEM_OR_END if char == "[" else _KEY_OR_END
                continue
            if not (kind in _SCALARS or (expect == _ITEM_OR_END and char == "]")):
                raise SkipError(token.start(kind))  # type: ignore[arg-type]
            if kind == "close":
                open_brackets.pop()
        elif expect in (_KEY_OR_END, _KEY):
            if kind == "string":
                expect = _COLON
                continue
            if not (expect == _KEY_OR_END and char == "}" and kind == "close"):
                raise SkipError(token.start(kind))  # type: ignore[arg-type]
            open_brackets.pop()
        elif expect == _COLON:
            if kind != "colon":
                raise SkipError(token.start(kind))  # type: ignore[arg-type]
            expect = _VALUE
            continue
        else:  # _NEXT: after a value inside an array or object
            inside = open_brackets[-1]
            if kind == "comma":
                expect = _VALUE if inside == "[" else _KEY
                continue
            if kind != "close" or char != ("]" if inside == "[" else "}"):
                raise SkipError(token.start(kind))  # type: ignore[arg-type]
            open_brackets.pop()
        # A value ended: a scalar, or an array or object just closed.
        if not open_brackets:
            return position
        expect = _NEXT
