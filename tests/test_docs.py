"""The README and docs/: every Python example runs as a script, links hold.

Every ```python block in README.md and docs/*.md is a complete script. Each
runs in a subprocess (``sys.executable snippet.py``) in a directory of its
own, and must exit 0 twice in that directory: a reader runs an example
again, and it finds what its first run left (a ``sessions.db``, an effect
recorded). Examples that are not meant to run use another fence
(```text), so that rule stays simple.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from sessionstore.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
README_LIMIT = 8 * 1024  # bytes: runnable examples, the long form in docs/

FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```$", re.S | re.M)
LINK = re.compile(r"\]\(([^)\s]+)\)")


def blocks(page: Path) -> list[tuple[str, int, str]]:
    """The fenced blocks of a page: language, line number, code."""
    text = page.read_text()
    return [
        (match[1].strip(), text.count("\n", 0, match.start()) + 1, match[2])
        for match in FENCE.finditer(text)
    ]


SNIPPETS = [
    pytest.param(str(page.relative_to(ROOT)), line, code, id=f"{page.relative_to(ROOT)}:{line}")
    for page in PAGES
    for language, line, code in blocks(page)
    if language == "python"
]


def test_the_docs_have_examples() -> None:
    assert len(SNIPPETS) >= 10
    assert any(language == "python" for language, _, _ in blocks(README))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_python_examples_use_the_python_fence(page: Path) -> None:
    # ```py or ```python3 would escape the test: one spelling for all.
    for language, line, _ in blocks(page):
        assert language not in ("py", "py3", "python3"), f"{page.name}:{line}: use ```python"


def run_script(script: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    # The checkout's package, whatever the environment installed.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, str(script)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,  # a guard against a hang: a loaded machine may take minutes
        check=False,
    )


@pytest.mark.parametrize(("page", "line", "code"), SNIPPETS)
def test_example_runs_as_a_script_twice(page: str, line: int, code: str, tmp_path: Path) -> None:
    # The script sits beside the example's directory, not in it: the
    # directory holds only what the example writes.
    script = tmp_path / "example.py"
    script.write_text(code)
    directory = tmp_path / "run"
    directory.mkdir()
    for run in ("first", "second"):
        done = run_script(script, directory)
        if done.returncode != 0:
            pytest.fail(
                f"{page}:{line}: the example failed on its {run} run in {directory}"
                f" (the script's line n is the page's line {line} + n)\n"
                f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}",
                pytrace=False,
            )


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_links_between_pages_resolve(page: Path) -> None:
    # Only links to the README and docs/: code and benchmark results change elsewhere.
    for target in LINK.findall(page.read_text()):
        path = target.split("#", 1)[0]
        if "://" in path or not path:
            continue
        resolved = (page.parent / path).resolve()
        if resolved == README or resolved.parent == ROOT / "docs":
            assert resolved.is_file(), f"{page.name}: broken link {target}"


def test_the_readme_stays_short() -> None:
    size = len(README.read_bytes())
    assert size <= README_LIMIT, f"README.md is {size} bytes; move detail into docs/"


def test_the_cli_page_covers_every_command() -> None:
    parser = build_parser()
    choices = next(a.choices for a in parser._actions if a.dest == "command")
    assert choices is not None
    page = (ROOT / "docs" / "cli.md").read_text()
    for command in choices:
        assert f"sessionstore {command}" in page, command
