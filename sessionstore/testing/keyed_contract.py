"""The keyed lines' contract as tests (part of `SessionJournalContract`):
`SessionJournal.keyed`, `scan`, `append_keyed_unless` and `drop`."""

from __future__ import annotations

import asyncio

import pytest

from sessionstore.errors import ConfigurationError, InvalidRecordError
from sessionstore.testing.common import JournalBackend, digest


def keyed(key: str, value: str = "v") -> bytes:
    """A keyed line."""
    return f'{{"key":"{key}","value":"{value}"}}'.encode()


@pytest.mark.asyncio
class KeyedContract:
    """Every rule of a journal's keyed lines, on each journal backend."""

    async def test_lines_are_found_under_their_key_oldest_first(
        self, journal_backend: JournalBackend
    ) -> None:
        journal = await journal_backend.open()
        await journal.append_raw(keyed("a", "1"), keyed("b", "1"))
        await journal.append_raw(b'{"line":"post"}', keyed("a", "2"))
        assert await journal.keyed("a", "b", "c") == {
            "a": [keyed("a", "1"), keyed("a", "2")],
            "b": [keyed("b", "1")],
        }
        assert await journal.keyed("c") == {}
        assert await journal.keyed() == {}
        assert await journal.keyed("a", "a") == {"a": [keyed("a", "1"), keyed("a", "2")]}

    async def test_only_a_valid_object_with_one_string_key_is_keyed(
        self, journal_backend: JournalBackend
    ) -> None:
        journal = await journal_backend.open()
        kept = [
            b'{"k\\u0065y":"spelled","n":1}',  # the name escaped
            b'{"key":"\\u00e9t\\u00e9"}',  # the key escaped: "été"
            b' {"nested":{"key":"inner"},"key":"outer"} \r',  # only the top level
        ]
        refused = [
            b'{"key":"torn","value":"a',  # torn by a crash
            b'{"key":"twice","key":"twice"}',  # repeated
            b'{"key":5}',
            b'["key","array"]',
            b'{"key":"nan","n":NaN}',
            b'{"key":"lone","s":"\\ud800"}',
            b'{"key":"bad-utf8","s":"\xff"}',
            b'{"key":"trailing"} x',
            b"\xef\xbb\xbf" + keyed("bom"),
        ]
        await journal.append_raw(*kept, *refused)
        wanted = ["spelled", "été", "outer", "inner", "torn", "twice", "nan", "lone"]
        wanted += ["bad-utf8", "trailing", "bom"]
        assert await journal.keyed(*wanted) == {
            "spelled": [kept[0]],
            "été": [kept[1]],
            "outer": [kept[2]],
        }

    async def test_a_clear_forgets_the_keys_before_it(
        self, journal_backend: JournalBackend
    ) -> None:
        journal = await journal_backend.open()
        await journal.append_raw(keyed("a", "old"), keyed("b", "old"))
        assert len(await journal.keyed("a", "b")) == 2
        await journal.clear()
        await journal.append_raw(keyed("a", "new"))
        assert await journal.keyed("a", "b") == {"a": [keyed("a", "new")]}
        assert await journal.scan("") == [("a", [keyed("a", "new")])]

    async def test_another_object_sees_every_line_written_since_its_last_look(
        self, journal_backend: JournalBackend
    ) -> None:
        first, second = await journal_backend.open(), await journal_backend.open()
        await first.append_raw(keyed("a", "1"))
        assert await second.keyed("a") == {"a": [keyed("a", "1")]}
        await first.append_raw(keyed("a", "2"), keyed("b", "1"))
        assert await second.keyed("a", "b") == {
            "a": [keyed("a", "1"), keyed("a", "2")],
            "b": [keyed("b", "1")],
        }
        await first.clear()
        assert await second.keyed("a", "b") == {}
        await first.append_raw(keyed("b", "2"))
        assert await second.scan("") == [("b", [keyed("b", "2")])]

    async def test_scan_gives_the_keys_of_a_prefix_last_first(
        self, journal_backend: JournalBackend
    ) -> None:
        journal = await journal_backend.open()
        for key in ("t1:003", "t1:001", "t2:009", "t1:002", "t1", "s:1"):
            await journal.append_raw(keyed(key))
        await journal.append_raw(keyed("t1:001", "again"))
        ones = await journal.scan("t1:")
        assert [key for key, _ in ones] == ["t1:003", "t1:002", "t1:001"]
        assert ones[2] == ("t1:001", [keyed("t1:001"), keyed("t1:001", "again")])
        assert [key for key, _ in await journal.scan("t1:", limit=2)] == ["t1:003", "t1:002"]
        before = await journal.scan("t1:", before="t1:003", limit=1)
        assert [key for key, _ in before] == ["t1:002"]
        assert [key for key, _ in await journal.scan("t1:", before="t1:001")] == []
        everything = [key for key, _ in await journal.scan("")]
        assert everything == ["t2:009", "t1:003", "t1:002", "t1:001", "t1", "s:1"]
        assert await journal.scan("u") == []

    async def test_keys_sort_by_code_point(self, journal_backend: JournalBackend) -> None:
        journal = await journal_backend.open()
        for key in ("a", "B", "é", "z", "a\x7f", "😀"):
            await journal.append_raw(keyed(key))
        assert [key for key, _ in await journal.scan("")] == ["😀", "é", "z", "a\x7f", "a", "B"]

    async def test_a_conditional_append_is_given_only_its_keys(
        self, journal_backend: JournalBackend
    ) -> None:
        journal = await journal_backend.open()
        await journal.append_raw(keyed("a", "1"), keyed("b", "1"))
        seen: list[dict[str, list[bytes]]] = []

        def look(found: dict[str, list[bytes]]) -> str | None:
            seen.append(found)
            return "taken" if "a" in found else None

        assert await journal.append_keyed_unless(["a", "c"], look, keyed("c")) == "taken"
        assert await journal.append_keyed_unless(["c"], look, keyed("c", "1")) is None
        assert seen == [{"a": [keyed("a", "1")]}, {}]
        assert await journal.keyed("c") == {"c": [keyed("c", "1")]}
        assert await journal.read_bytes() == b"".join(
            line + b"\n" for line in (keyed("a", "1"), keyed("b", "1"), keyed("c", "1"))
        )

    async def test_conditional_appends_racing_for_a_key_append_once(
        self, journal_backend: JournalBackend
    ) -> None:
        journals = [await journal_backend.open() for _ in range(3)]

        def free(found: dict[str, list[bytes]]) -> bool | None:
            return True if found else None

        runs = [
            journals[n % 3].append_keyed_unless(["k"], free, keyed("k", str(n))) for n in range(12)
        ]
        answers = await asyncio.gather(*runs)
        assert answers.count(None) == 1
        assert len((await journals[0].keyed("k"))["k"]) == 1

    async def test_bad_keys_and_reasons_are_refused_and_nothing_written(
        self, journal_backend: JournalBackend
    ) -> None:
        journal = await journal_backend.open()
        with pytest.raises(ConfigurationError, match="string"):
            await journal.keyed(5)  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError, match="surrogate"):
            await journal.keyed("\ud800")
        with pytest.raises(ConfigurationError, match="sequence of strings"):
            await journal.append_keyed_unless("ab", lambda found: None, keyed("a"))
        with pytest.raises(InvalidRecordError, match="newline"):
            await journal.append_keyed_unless(["a"], lambda found: None, b"one\ntwo")
        with pytest.raises(ConfigurationError, match="prefix"):
            await journal.scan(None)  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError, match="limit"):
            await journal.scan("", limit=0)
        with pytest.raises(ConfigurationError, match="before"):
            await journal.scan("", before=3)  # type: ignore[arg-type]
        assert await journal.read_bytes() == b""
        await journal.append_raw(keyed("a"))
        for reason in ("", " ", None):
            with pytest.raises(ConfigurationError, match="reason"):
                await journal.drop("a", reason=reason)  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError, match="string"):
            await journal.drop(b"a", reason="why")  # type: ignore[arg-type]
        assert await journal.keyed("a") == {"a": [keyed("a")]}

    async def test_drop_removes_the_lines_of_its_keys_and_records_them(
        self, journal_backend: JournalBackend
    ) -> None:
        journal = await journal_backend.open()
        assert await journal.drop("a", reason="nothing yet") is None
        kept = [b'{"line":"post"}', keyed("b"), b"torn {"]
        await journal.append_raw(keyed("a", "1"), kept[0], keyed("c"), kept[1])
        await journal.append_raw(keyed("a", "2"), kept[2])
        record = await journal.drop("a", "c", "z", reason="thread deleted")
        assert record is not None
        gone = keyed("a", "1") + b"\n" + keyed("c") + b"\n" + keyed("a", "2") + b"\n"
        assert (record.kind, record.lines, record.keys) == ("journal", 3, 2)
        assert (record.reason, record.key) == ("thread deleted", None)
        assert record.digest == digest(gone)
        again = await journal_backend.open()
        for reader in (journal, again):
            assert await reader.read_bytes() == b"".join(line + b"\n" for line in kept)
            assert await reader.keyed("a", "b", "c") == {"b": [keyed("b")]}
            assert await reader.scan("") == [("b", [keyed("b")])]
        assert await journal.drop("a", reason="again") is None

    async def test_a_journal_goes_on_after_a_drop(self, journal_backend: JournalBackend) -> None:
        journal = await journal_backend.open()
        await journal.append_raw(keyed("a", "1"), keyed("b", "1"))
        assert await journal.keyed("a") == {"a": [keyed("a", "1")]}  # indexed before the drop
        await journal.drop("a", reason="pruned")
        await journal.append_raw(keyed("a", "2"))
        assert await journal.append_keyed_unless(["a"], lambda found: found or None) == {
            "a": [keyed("a", "2")]
        }
        assert await (await journal_backend.open()).keyed("a", "b") == {
            "a": [keyed("a", "2")],
            "b": [keyed("b", "1")],
        }
