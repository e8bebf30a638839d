"""The word rule of search (`sessionstore.backends.words`), against its
definition written out plainly: runs of letters and digits of the NFC text."""

from __future__ import annotations

import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from sessionstore.backends.words import words


def plainly(text: str) -> list[str]:
    found, word = [], ""
    for char in unicodedata.normalize("NFC", text) + " ":
        if char.isalnum():
            word += char
        elif word:
            found.append(word.lower())
            word = ""
    return found


@given(st.text())
def test_words_are_the_runs_of_letters_and_digits(text: str) -> None:
    assert words(text) == plainly(text)


@given(st.text(st.characters(max_codepoint=127)))
def test_ascii_text_reads_the_same_by_its_shortcut(text: str) -> None:
    assert words(text) == plainly(text)


def test_case_and_composition_are_folded_and_separators_split() -> None:
    assert words("Café CAFE\u0301 bug_report fixed-bug it's x²") == [
        "café",
        "café",
        "bug",
        "report",
        "fixed",
        "bug",
        "it",
        "s",
        "x²",
    ]
