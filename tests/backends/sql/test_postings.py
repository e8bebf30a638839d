"""SQLite's packed word index (`sessionstore.backends.sql.postings`): what is
packed comes back, in few bytes, and bytes that are no postings never raise."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from sessionstore.backends.sql.postings import BATCH, LENGTHS, pack, packed_rows, unpack

_postings = st.lists(
    st.tuples(st.integers(0, 2**40), st.integers(1, 2**20)), unique_by=lambda p: p[0]
).map(sorted)


@given(_postings, st.integers(0, 2**20))
def test_what_is_packed_comes_back(postings: list[tuple[int, int]], batch: int) -> None:
    moved = [(seq + batch, hits) for seq, hits in postings]
    assert list(unpack(pack(moved, batch), batch)) == moved


def test_a_word_held_once_by_close_messages_costs_a_byte_each() -> None:
    postings = [(seq, 1) for seq in range(10, 200, 3)]
    assert len(pack(postings, 10)) == len(postings)
    assert len(pack([(10, 2)], 10)) == 2  # and one more for its hits


@given(st.binary(max_size=64), st.integers(0, 1000))
def test_bytes_that_are_no_postings_never_raise(blob: bytes, batch: int) -> None:
    for seq, hits in unpack(blob, batch):
        assert seq >= batch
        assert hits >= 0


def test_values_that_are_no_bytes_hold_no_postings() -> None:
    # SQLite keeps what a raw writer gives: postings || x'00' is a text.
    assert list(unpack("\x00", 1)) == []  # type: ignore[arg-type]
    assert list(unpack(7, 1)) == []  # type: ignore[arg-type]
    assert list(unpack(b"\x00", "1")) == []  # type: ignore[arg-type]


def test_a_session_s_messages_are_cut_into_batches_with_their_lengths() -> None:
    messages = [(1, seq, {"plum": seq % 3 + 1, f"w{seq}": 1}, 5) for seq in range(1, 601)]
    messages.append((2, 7, {"plum": 1}, 1))
    rows = packed_rows(reversed(messages))  # in any order
    assert rows == sorted(rows)
    batches = {(pk, batch) for _, pk, batch, _ in rows}
    assert batches == {(1, 1), (1, 1 + BATCH), (1, 1 + 2 * BATCH), (2, 7)}
    held = {
        (word, pk, seq): hits for word, pk, batch, blob in rows for seq, hits in unpack(blob, batch)
    }
    assert held == {
        **{(word, pk, seq): hits for pk, seq, words, _ in messages for word, hits in words.items()},
        **{(LENGTHS, pk, seq): length for pk, seq, _, length in messages},
    }


_HITS = [1, 1, 2, 127, 128, 300]  # most words once; hits of one byte and of two
_messages = st.lists(
    st.tuples(
        st.integers(1, 3),
        st.integers(0, 700),  # seq: past a BATCH, steps of more than a byte
        st.dictionaries(st.sampled_from("abcdef"), st.sampled_from(_HITS), min_size=1),
        st.integers(1, 2**20),
    ),
    unique_by=lambda message: message[:2],
)


@given(_messages)
def test_each_row_holds_its_word_s_postings_of_its_batch_packed(
    messages: list[tuple[int, int, dict[str, int], int]],
) -> None:
    # Each session's messages in seq order, BATCH at a time.
    expected = []
    for pk in {message[0] for message in messages}:
        held = sorted(message[1:] for message in messages if message[0] == pk)
        for start in range(0, len(held), BATCH):
            chunk = held[start : start + BATCH]
            batch = chunk[0][0]
            expected.append((LENGTHS, pk, batch, pack([(s, n) for s, _, n in chunk], batch)))
            for word in {word for _, words, _ in chunk for word in words}:
                postings = [(s, words[word]) for s, words, _ in chunk if word in words]
                expected.append((word, pk, batch, pack(postings, batch)))
    assert packed_rows(messages) == sorted(expected)
