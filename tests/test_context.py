"""build_context: the seed's cases and the fallback."""

from sessionstore import CompactionEntry, Message, MessageEntry, build_context


def message(entry_id: str, text: str) -> MessageEntry:
    return MessageEntry(id=entry_id, timestamp="t", message=Message.user(text))


def compaction(entry_id: str, summary: str, first_kept_id: str) -> CompactionEntry:
    return CompactionEntry(
        id=entry_id, timestamp="t", summary=summary, first_kept_id=first_kept_id, tokens_before=1000
    )


Entries = list[MessageEntry | CompactionEntry]


def texts(entries: Entries) -> list[str]:
    return [m.text() for m in build_context(entries)]


def test_without_compaction_every_message_in_order() -> None:
    assert texts([message("e1", "a"), message("e2", "b")]) == ["a", "b"]


def test_empty_log_builds_empty_context() -> None:
    assert build_context([]) == []


def test_compaction_drops_the_prefix_from_the_context() -> None:
    entries: Entries = [
        message("e1", "old1"),
        message("e2", "old2"),
        message("e3", "kept"),
        message("e4", "tail"),
        compaction("c1", "the summary", "e3"),
    ]
    context = build_context(entries)
    assert context[0].role == "user"
    assert [m.text() for m in context] == ["[Conversation summary]\nthe summary", "kept", "tail"]


def test_last_compaction_wins() -> None:
    entries: Entries = [
        message("e1", "a"),
        compaction("c1", "first summary", "e1"),
        message("e2", "b"),
        message("e3", "c"),
        compaction("c2", "second summary", "e3"),
        message("e4", "d"),
    ]
    assert texts(entries) == ["[Conversation summary]\nsecond summary", "c", "d"]


def test_unknown_first_kept_id_falls_back_to_messages_after_the_compaction() -> None:
    entries: Entries = [
        message("e1", "old"),
        compaction("c1", "the summary", "nonexistent"),
        message("e2", "after1"),
        message("e3", "after2"),
    ]
    assert texts(entries) == ["[Conversation summary]\nthe summary", "after1", "after2"]


def test_first_kept_id_naming_a_compaction_falls_back() -> None:
    # Only a *message* entry with that id counts.
    entries: Entries = [
        message("e1", "old"),
        compaction("c0", "s0", "e1"),
        compaction("c1", "s1", "c0"),
    ]
    assert texts(entries) == ["[Conversation summary]\ns1"]


def test_first_match_anywhere_in_the_log_is_the_cut() -> None:
    entries: Entries = [
        message("dup", "first"),
        message("x", "middle"),
        message("dup", "second"),
        compaction("c1", "s", "dup"),
    ]
    assert texts(entries) == ["[Conversation summary]\ns", "first", "middle", "second"]


def test_building_the_context_keeps_the_entries() -> None:
    entries: Entries = [message("e1", "a"), compaction("c1", "s", "e1")]
    build_context(entries)
    assert len(entries) == 2
