"""Frameworks are optional: sessionstore never imports one by itself, and an
adapter whose framework is missing says which extra brings it."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]

# (adapter module, the framework's top-level package, the extra that installs it)
ADAPTERS = [
    ("sessionstore.integrations.adk", "google", "adk"),
    ("sessionstore.integrations.langchain", "langchain_core", "langchain"),
    ("sessionstore.integrations.langgraph", "langgraph", "langgraph"),
    ("sessionstore.integrations.openai_agents", "agents", "openai-agents"),
    ("sessionstore.integrations.pydantic_ai", "pydantic_ai", "pydantic-ai"),
]
FRAMEWORKS = sorted({framework for _, framework, _ in ADAPTERS})


def test_sessionstore_imports_no_framework(tmp_path: Path) -> None:
    code = (
        "import json, sys\n"
        "import sessionstore, sessionstore.sync, sessionstore.integrations\n"
        f"frameworks = {FRAMEWORKS!r}\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.partition('.')[0] in frameworks)))\n"
    )
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    child = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=600,  # a guard against a hang: a loaded machine may take minutes
        check=True,
    )
    assert json.loads(child.stdout) == []


@pytest.mark.parametrize(("adapter", "framework", "extra"), ADAPTERS)
def test_a_missing_framework_names_its_extra(
    monkeypatch: pytest.MonkeyPatch, adapter: str, framework: str, extra: str
) -> None:
    # None in sys.modules makes an import fail, as if the package were not installed.
    for name in [name for name in sys.modules if name.partition(".")[0] == framework]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, framework, None)
    monkeypatch.delitem(sys.modules, adapter, raising=False)
    with pytest.raises(ImportError, match=rf"pip install 'sessionstore\[{extra}\]'"):
        importlib.import_module(adapter)
