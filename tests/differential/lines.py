"""Lines for the differential tests: valid records encoded by us, then mutated.

A line is drawn as a small JSON tree (objects as lists of pairs, so a key
may repeat; numbers and literals as the text they are written with), bent
by a few mutations (repeated and unknown members, deep nesting, odd
numbers, timestamps, escapes, surrogates, wrong types), written out with
drawn whitespace and escapes, and now and then hit at the byte level.
"""

from __future__ import annotations

import json
import string
import uuid
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from sessionstore import (
    CommentWrite,
    CompactionEntry,
    Erasure,
    HeadMove,
    Message,
    MessageEntry,
    PostWrite,
    SessionHeader,
    SessionMeta,
    Timestamp,
    TitleChange,
    encode,
)
from sessionstore.wire import Record

# ------------------------------------------------------------------ the tree


@dataclass
class Raw:
    """A literal exactly as written: a number, true, NaN, a pre-spelled string..."""

    text: str


@dataclass
class Obj:
    pairs: list[tuple[str, Node]] = field(default_factory=list)


@dataclass
class Arr:
    items: list[Node] = field(default_factory=list)


Node = Raw | str | Obj | Arr


def tree(text: str) -> Node:
    """The tree of a JSON text, each number and literal kept as written."""

    def convert(value: Any) -> Node:
        if isinstance(value, Obj):
            return value
        if isinstance(value, list):
            return Arr([convert(item) for item in value])
        if value is None or isinstance(value, bool):
            return Raw(json.dumps(value))
        return value  # type: ignore[no-any-return]

    def pairs(items: list[tuple[str, Any]]) -> Obj:
        return Obj([(key, convert(value)) for key, value in items])

    return convert(
        json.loads(
            text, object_pairs_hook=pairs, parse_int=Raw, parse_float=Raw, parse_constant=Raw
        )
    )


# ------------------------------------------------------------------ values

ODD_NUMBERS = [
    "0",
    "-0",
    "-0.0",
    "1.0",
    "1E2",
    "1e+2",
    "1e-7",
    "0.1",
    "6e25",
    "1e400",
    "-1e400",
    "1e-400",
    "2.4703282292062328e-324",
    "4.9406564584124654e-324",
    "1.7976931348623157e308",
    "1.7976931348623158e308",
    "1.797693134862315807e308",
    "1.7976931348623159e308",
    "9007199254740993",
    "0.30000000000000004",
    "123456789012345678901234567890",
    "18446744073709551615",
    "18446744073709551616",
    "-9223372036854775808",
    "-9223372036854775809",
    "4294967295",
    "4294967296",
    "01",
    "1.",
    "18446744073709551616.",
    "-123456789012345678901.",
    "123456789012345678901.e5",
    ".5",
    "+1",
    "-",
    "NaN",
    "Infinity",
    "-Infinity",
]
ODD_STRINGS = [
    '"\\ud800"',
    '"\\udc00"',
    '"\\ud83d\\ude00"',
    '"\\uD83D\\uDE00"',
    '"\\ud800\\u0041"',
    '"\\ud800\\ud800\\udc00"',
    '"\\u0000"',
    '"\\u0022"',
    '"\\/"',
    '"\\\\ud800"',
    '"\\x"',
    '"\\u12"',
    '"\x01"',
    '"\x7f"',
    '"\u2028"',
    '"\ufeff"',
    '"a\\\\"',
]
LITERALS = ["true", "false", "null", "[]", "{}", "tru", "nul"]


def numbers() -> st.SearchStrategy[str]:
    return (
        st.sampled_from(ODD_NUMBERS)
        | st.integers(min_value=-(2**70), max_value=2**70).map(str)
        | st.floats(allow_nan=False, allow_infinity=False).map(repr)
        | st.floats(allow_nan=False, allow_infinity=False).map(lambda x: f"{x:.17e}")
        | st.builds(
            lambda m, e: f"{m}e{e}",
            st.integers(min_value=1, max_value=99_999_999_999_999_999),
            st.integers(min_value=-340, max_value=330),
        )
    )


def raws() -> st.SearchStrategy[Node]:
    return (numbers() | st.sampled_from(ODD_STRINGS + LITERALS)).map(Raw)


def values(depth: int = 3) -> st.SearchStrategy[Node]:
    scalars: st.SearchStrategy[Node] = st.text(max_size=8) | raws()
    if depth == 0:
        return scalars
    inner = values(depth - 1)
    return (
        scalars
        | st.lists(inner, max_size=3).map(Arr)
        | st.lists(st.tuples(st.text(max_size=4), inner), max_size=3).map(Obj)
    )


def deep(levels: int, arrays: bool) -> Raw:
    """A value nested ``levels`` deep, as text (the writer need not recurse into it)."""
    if arrays:
        return Raw("[" * levels + "0" + "]" * levels)
    return Raw('{"k":' * levels + "0" + "}" * levels)


DEPTHS = [1, 120, 124, 125, 126, 127, 128, 129, 200, 1_000, 5_000]

# ------------------------------------------------------------------ timestamps


@st.composite
def timestamps(draw: st.DrawFn) -> str:
    """Date-times as chrono might or might not read them."""
    if draw(st.integers(0, 9)) == 0:
        return draw(st.text(alphabet="0123456789-:T tZz+.Uu\u3000", max_size=30))
    space = st.sampled_from(["", "", "", "", " ", "\t", "\u3000", "\xa0", "\x1c", "  "])

    def number(low: int, high: int, width: int) -> str:
        value = draw(st.integers(low, high))
        style = draw(st.integers(0, 7))
        if style == 0:
            return str(value)
        if style == 1:
            return f"{value:0{width + 1}d}"
        return f"{value:0{width}d}"

    sign = draw(st.sampled_from(["", "", "", "", "+", "-"]))
    year = sign + number(0, 10_000 if sign else 9999, 4)
    if draw(st.integers(0, 20)) == 0:
        year = sign + str(draw(st.integers(0, 300_000)))
    parts = [
        draw(space),
        year,
        draw(space),
        "-",
        draw(space),
        number(0, 13, 2),
        draw(space),
        "-",
        draw(space),
        number(0, 32, 2),
        draw(st.sampled_from(["T", "T", "T", "T", " ", "t", "x", ""])),
        draw(space),
        number(0, 24, 2),
        draw(space),
        ":",
        draw(space),
        number(0, 60, 2),
        draw(space),
        ":",
        draw(space),
        draw(st.sampled_from(["59", "60", "60", "00", "61"])) if draw(st.booleans()) else "",
    ]
    if parts[-1] == "":
        parts[-1] = number(0, 61, 2)
    if draw(st.booleans()):
        digits = draw(st.integers(0, 12))
        parts.append("." + "".join(draw(st.sampled_from("0123456789")) for _ in range(digits)))
    parts.append(draw(space))
    offsets = st.sampled_from(["Z", "z", "UTC", "utc", "uTC", "UT", "", "+00:00", "-00:00"])
    offset = draw(offsets)
    if draw(st.booleans()):
        offset = (
            draw(st.sampled_from("+-"))
            + number(0, 25, 2)
            + draw(st.sampled_from([":", ":", "", " ", "::", ": "]))
            + draw(st.sampled_from(["00", "30", "59", "60", "5", ""]))
        )
    parts += [offset, draw(space)]
    if draw(st.integers(0, 15)) == 0:
        parts.append(draw(st.sampled_from(["x", "Z", "0", "\u3000"])))
    return "".join(parts)


# ------------------------------------------------------------------ records

text = st.text(max_size=12)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8,
)
messages = st.builds(
    lambda role, content, streaming, extra: Message(
        role=role, content=content, streaming=streaming, **extra
    ),
    text,
    json_values,
    st.booleans(),
    st.dictionaries(
        text.filter(lambda key: key not in ("role", "content", "streaming")),
        json_values,
        max_size=2,
    ),
)
optional = st.none() | text
metas = st.builds(
    SessionMeta,
    id=text,
    version=st.integers(min_value=0, max_value=2**32 - 1),
    parent_session=optional,
    created_at=text,
    title=optional,
    owner=optional,
    tags=st.lists(text, max_size=3).map(tuple),
    metadata=st.dictionaries(text, json_values, max_size=3),
)
entries = st.builds(
    MessageEntry, id=text, parent_id=optional, timestamp=text, message=messages
) | st.builds(
    CompactionEntry,
    id=text,
    parent_id=optional,
    timestamp=text,
    summary=text,
    first_kept_id=text,
    tokens_before=st.none() | st.integers(min_value=0, max_value=2**64 - 1),
)
AT = Timestamp.parse("2026-10-13T11:00:00Z")
journal_lines = (
    st.builds(SessionHeader, started_at=st.just(AT), model=text)
    | st.builds(PostWrite, at=st.just(AT), id=st.uuids())
    | st.builds(CommentWrite, at=st.just(AT), id=st.uuids(), on=st.none() | st.uuids())
)
heads = st.builds(HeadMove, session_id=text, at=text)
titles = st.builds(TitleChange, session_id=text, title=optional, at=text)
erasures = st.builds(
    Erasure,
    kind=st.sampled_from(["session", "journal"]),
    name=text,
    at=text,
    reason=text,
    lines=st.integers(min_value=0, max_value=2**64 - 1),
    digest=text,
    key=optional,
    keys=st.none() | st.integers(min_value=0, max_value=2**64 - 1),
)
RECORDS: dict[str, st.SearchStrategy[Any]] = {
    "meta": metas,
    "entry": entries,
    "message": messages,
    "journal": journal_lines,
    "head": heads,
    "title": titles,
    "erasure": erasures,
}
ENTRY_KEYS = ["type", "id", "parent_id", "timestamp", "message", "summary", "first_kept_id"]
KNOWN_KEYS = {
    "meta": ["id", "version", "parent_session", "created_at", "title", "owner", "tags", "metadata"],
    "entry": [*ENTRY_KEYS, "tokens_before"],
    "message": ["role", "content", "streaming"],
    "journal": ["line", "started_at", "model", "at", "id", "on"],
    "head": ["session_id", "at"],
    "title": ["session_id", "title", "at"],
    "erasure": ["kind", "name", "at", "reason", "lines", "digest", "key", "keys"],
}
TIME_KEYS = ("at", "started_at")
UUID_KEYS = ("id", "on")


def uuid_spellings(value: uuid.UUID) -> st.SearchStrategy[str]:
    plain = str(value)
    return st.sampled_from(
        [
            plain,
            plain.upper(),
            value.hex,
            "{" + plain + "}",
            "urn:uuid:" + plain,
            "URN:UUID:" + plain,
            "{" + value.hex + "}",
            plain[:-1],
            plain + "0",
            plain.replace("-", "", 1),
            "(" + plain + ")",
        ]
    )


# ------------------------------------------------------------------ mutations


def containers(node: Node) -> list[Obj | Arr]:
    found: list[Obj | Arr] = []
    todo = [node]
    while todo:
        current = todo.pop()
        if isinstance(current, Obj):
            found.append(current)
            todo.extend(value for _, value in current.pairs)
        elif isinstance(current, Arr):
            found.append(current)
            todo.extend(current.items)
    return found


@st.composite
def mutate(draw: st.DrawFn, root: Obj, kind: str) -> None:
    """Bend the tree in place, once."""
    choice = draw(st.integers(0, 11))
    if choice <= 2:  # a member added: repeated known key, unknown key, tag
        key = draw(st.sampled_from([*KNOWN_KEYS[kind], "type", "line", "x", "name", "\u00e9"]))
        value = draw(values(2) | st.sampled_from(["message", "compaction", "post", "session"]))
        where = containers(root) if draw(st.booleans()) else [root]
        into = draw(st.sampled_from([c for c in where if isinstance(c, Obj)] or [root]))
        into.pairs.insert(draw(st.integers(0, len(into.pairs))), (key, value))
    elif choice == 3 and root.pairs:  # a member repeated with its own value or another
        index = draw(st.integers(0, len(root.pairs) - 1))
        key, value = root.pairs[index]
        if draw(st.booleans()):
            value = draw(values(1))
        root.pairs.insert(draw(st.integers(0, len(root.pairs))), (key, value))
    elif choice == 4 and root.pairs:  # a member's value replaced
        index = draw(st.integers(0, len(root.pairs) - 1))
        root.pairs[index] = (root.pairs[index][0], draw(values(2)))
    elif choice == 5 and root.pairs:  # a member removed
        del root.pairs[draw(st.integers(0, len(root.pairs) - 1))]
    elif choice == 6:  # deep nesting somewhere
        levels = draw(st.sampled_from(DEPTHS))
        target: Obj | Arr = draw(st.sampled_from(containers(root)))
        inner = deep(levels, draw(st.booleans()))
        if isinstance(target, Obj):
            target.pairs.append((draw(st.sampled_from(["x", "content", "name"])), inner))
        else:
            target.items.append(inner)
    elif choice == 7:  # an odd number or string somewhere
        target = draw(st.sampled_from(containers(root)))
        if isinstance(target, Obj):
            target.pairs.append((draw(st.sampled_from(["x", "n", "version"])), draw(raws())))
        else:
            target.items.append(draw(raws()))
    elif choice == 8:  # timestamps of the journal
        for index, (key, _) in enumerate(root.pairs):
            if key in TIME_KEYS:
                root.pairs[index] = (key, draw(timestamps()))
    elif choice == 9:  # UUID spellings of the journal
        for index, (key, value) in enumerate(root.pairs):
            if key in UUID_KEYS and isinstance(value, str):
                try:
                    parsed = uuid.UUID(value)
                except ValueError:
                    continue
                root.pairs[index] = (key, draw(uuid_spellings(parsed)))
    elif choice == 10 and root.pairs:  # a known field given a value of another type
        index = draw(st.integers(0, len(root.pairs) - 1))
        odd = ["1", "1.0", "-1", '"1"', "true", "null", "[]", "{}", "-0", "4294967296"]
        root.pairs[index] = (root.pairs[index][0], Raw(draw(st.sampled_from(odd))))
    else:  # moved: any order of members
        root.pairs[:] = draw(st.permutations(root.pairs))


# ------------------------------------------------------------------ writing


@st.composite
def written(draw: st.DrawFn, node: Node) -> str:
    """The tree as JSON text, with drawn whitespace and string escapes."""
    spaced = draw(st.integers(0, 3)) == 0
    gap = st.sampled_from(["", "", "", " ", "\t", "\r", " \t\r "]) if spaced else st.just("")
    style = draw(st.sampled_from(["canonical", "canonical", "canonical", "ascii", "escaped"]))

    def spell(value: str) -> str:
        if style == "ascii":
            return json.dumps(value, ensure_ascii=True)
        if style == "escaped":
            out = []
            for char in value:
                if char.isalnum() and draw(st.booleans()):
                    code = f"{ord(char):04x}" if ord(char) < 0x10000 else None
                    if code is not None:
                        out.append("\\u" + (code.upper() if draw(st.booleans()) else code))
                        continue
                out.append(json.dumps(char, ensure_ascii=False)[1:-1].replace("/", "\\/"))
            return '"' + "".join(out) + '"'
        return json.dumps(value, ensure_ascii=False)

    def write(current: Node) -> str:
        if isinstance(current, Raw):
            return current.text
        if isinstance(current, str):
            return spell(current)
        if isinstance(current, Arr):
            inner = ",".join(draw(gap) + write(item) + draw(gap) for item in current.items)
            return "[" + (inner or draw(gap)) + "]"
        members = ",".join(
            draw(gap) + spell(key) + draw(gap) + ":" + draw(gap) + write(value) + draw(gap)
            for key, value in current.pairs
        )
        return "{" + (members or draw(gap)) + "}"

    return draw(gap) + write(node) + draw(gap)


BYTE_EDITS = [b"", b" ", b"{", b"}", b"[", b"]", b'"', b",", b":", b"\\", b"0", b"e", b"-"]
BYTE_EDITS += [b"\xff", b"\xc3", b"\xef\xbb\xbf", b"\x00", b"\x0c", b"\r", b"n", b"u"]


@st.composite
def lines(draw: st.DrawFn, kind: str) -> bytes:
    """A line of the given kind: a valid record, most often bent."""
    record: Record = draw(RECORDS[kind])
    root = tree(encode(record))
    assert isinstance(root, Obj)
    for _ in range(draw(st.integers(0, 3))):
        draw(mutate(root, kind))
    data = draw(written(root)).encode("utf-8", "surrogatepass")
    if draw(st.integers(0, 7)) == 0:  # a byte-level edit
        at = draw(st.integers(0, len(data)))
        cut = draw(st.integers(0, 2))
        data = data[:at] + draw(st.sampled_from(BYTE_EDITS)) + data[at + cut :]
    return data.replace(b"\n", b"")


def alphabet_line() -> st.SearchStrategy[bytes]:
    """Short lines of JSON's own characters, for the parser's corners."""
    return st.text(alphabet=string.digits + '{}[]",:.eE+-\\ untrfalsNIy', max_size=12).map(
        lambda text: text.encode()
    )
