"""The word rule of search (`sessionstore.backends.words`), against its
definition written out plainly: runs of letters and digits of the NFC text."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sessionstore import Message, MessageEntry, SessionMeta
from sessionstore.backends import words as words_module
from sessionstore.backends.sql.wordindex import BACKLOG
from sessionstore.backends.words import words
from tests.kinds import StoreTargets


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


@pytest.mark.parametrize("kind", ["memory", "jsonl", "sqlite", "postgresql", "sqlite-sealed"])
async def test_search_finds_the_words_of_a_message_s_first_indexed_chars_only(
    kind: str, store_targets: StoreTargets, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(words_module, "INDEXED_CHARS", 40)  # of 1,000,000
    text = "early words here " + "x" * 30 + " lateword"
    backend = store_targets.backend(kind)
    store = await backend.open()
    try:
        await store.create(SessionMeta(id="long"))
        await store.append_many(
            "long", [MessageEntry.new(Message.user(text)) for _ in range(BACKLOG + 1)]
        )
        assert len(await store.search("early", limit=500)) == BACKLOG + 1
        assert await store.search("lateword") == []  # past the limit: not indexed
    finally:
        await store.close()
