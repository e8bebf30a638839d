"""What the command line's tests share: the command run in this process
(`run`) or in a real one on a terminal (`on_terminal`), and the stores,
texts and key files they run it on."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from sessionstore import Message, MessageEntry
from sessionstore.cli import main
from tests.helpers import ROOT

COMMAND = [sys.executable, "-m", "sessionstore"]
ANSI = re.compile(r"\x1b\[[0-9;?]*[a-zA-Z]")
TRICKY = ["[/bold]", "arr[i] = arr[j]", "[bold]loud[/bold]", ":smile: [red]x[/]", "\x1b[31mred"]
"""Texts a terminal's markup or escapes would change, were they not printed literally."""


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """The command line run in this process: its exit status, stdout and stderr."""
    status = main(list(args))
    out, err = capsys.readouterr()
    return status, out, err


def environment(**extra: str) -> dict[str, str]:
    """This process's environment for a child running the command, plus ``extra``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.pop("SESSIONSTORE_DB", None)
    env.update(extra)
    return env


def on_terminal(*args: str, columns: int = 80) -> subprocess.CompletedProcess[str]:
    """Run the command as if on a terminal (80 columns); its output without colours."""
    done = subprocess.run(
        [*COMMAND, *args],
        capture_output=True,
        text=True,
        env=environment(FORCE_COLOR="1", COLUMNS=str(columns), LINES="40"),
        timeout=60,
        check=False,
    )
    done.stdout, done.stderr = ANSI.sub("", done.stdout), ANSI.sub("", done.stderr)
    return done


def said(session_id: str, *texts: str, first: int = 0) -> list[MessageEntry]:
    """A user message per text, with ids ``<session_id>-<n>`` from ``first``."""
    return [
        MessageEntry(id=f"{session_id}-{n}", timestamp="t", message=Message.user(text))
        for n, text in enumerate(texts, first)
    ]


def key_file(path: Path, *keys: str) -> str:
    """A key file at ``path`` holding ``keys``, newest first; its name."""
    path.write_text("# newest first\n" + "\n".join(keys) + "\n")
    return str(path)
