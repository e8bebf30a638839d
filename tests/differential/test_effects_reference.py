"""Effects beside a journal, as the reference's journal reader sees them
(docs/effects.md): the session journal holds only lines it reads; an
effect line, had it been there, is one it refuses (and so would skip)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sessionstore import FileJournal, Journal
from sessionstore.effects import EFFECTS_FILE
from sessionstore.testing.journal_contract import header, post
from tests.differential.oracle import Oracle, oracle_or_skip


async def test_the_reference_reads_a_journal_with_effects_as_one_without(
    tmp_path: Path,
) -> None:
    oracle = Oracle(oracle_or_skip())
    journal = FileJournal.in_dir(tmp_path)
    await journal.begin(header(1), Journal())
    await journal.append(post(2))
    await journal.effects.once(lambda: {"id": 1}, tool="send", args={"to": "a"}, key="k1")
    with pytest.raises(RuntimeError):
        await journal.effects.once(_fail, tool="send", key="k2")
    await journal.append(post(3))

    lines = journal.path.read_bytes().splitlines()
    assert len(lines) == 3
    assert all(answer.ok for answer in oracle.answers("journal", lines))

    effects = (tmp_path / EFFECTS_FILE).read_bytes().splitlines()
    assert len(effects) == 4  # two intents, a done, a failed
    refused = oracle.answers("journal", effects)
    assert not any(answer.ok for answer in refused)
    assert all("unknown" in answer.text or "missing field" in answer.text for answer in refused)


def _fail() -> None:
    raise RuntimeError("down")
