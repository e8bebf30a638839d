"""The README's Quickstart is what CI runs, word for word."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def quickstart_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```sh\n(.*?)```", section, re.S)
    return str(block).strip().splitlines()


def test_the_quickstart_is_exactly_two_commands_one_demo_one_tests() -> None:
    demo, tests = quickstart_commands()
    assert demo.endswith("sessionstore demo")
    assert "pytest" in tests


def test_ci_runs_the_quickstart_commands_exactly_as_written() -> None:
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    for command in quickstart_commands():
        assert command in ci, command
