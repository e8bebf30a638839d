"""Download the installed peers' source distributions and extract their tests.

    SESSIONSTORE_PEER_TESTS=$(.venv/bin/python tests/peers/fetch.py)

For each peer of `PEERS`, at the version installed in this Python
(`importlib.metadata`), ``pip download --no-deps --no-binary :all:`` takes
its sdist from PyPI, and its ``tests/`` and ``pyproject.toml`` (its pytest
settings) are extracted to ``<root>/<distribution>-<version>/``. The root is
``$SESSIONSTORE_PEER_TESTS_ROOT`` (default /tmp/sessionstore-peer-tests),
outside the repository: a peer's code is never committed here. A version
already extracted is not fetched again. Prints the root on stdout.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

PEERS = ("openai-agents", "langchain-core")
"""The distributions whose own tests run against our adapters."""

DEFAULT_ROOT = Path(tempfile.gettempdir()) / "sessionstore-peer-tests"
DONE = ".extracted"
"""A file written last in a peer's directory: its extraction is whole."""


def peer_dir(root: Path, distribution: str) -> Path:
    """Where the tests of the installed ``distribution`` are extracted."""
    return root / f"{distribution}-{importlib.metadata.version(distribution)}"


def fetch(root: Path, distribution: str) -> Path:
    """Extract the installed version's tests and pytest settings under ``root``."""
    where = peer_dir(root, distribution)
    if (where / DONE).is_file():
        return where
    version = importlib.metadata.version(distribution)
    with tempfile.TemporaryDirectory(prefix="peer-sdist-") as download:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--no-binary",
                ":all:",
                f"{distribution}=={version}",
                "-d",
                download,
            ],
            check=True,
            stdout=sys.stderr,
        )
        (sdist,) = Path(download).glob("*.tar.gz")
        shutil.rmtree(where, ignore_errors=True)
        staging = Path(download) / "extracted"
        with tarfile.open(sdist) as archive:
            members = [
                member
                for member in archive.getmembers()
                if len(parts := Path(member.name).parts) > 1
                and (parts[1] == "tests" or parts[1:] == ("pyproject.toml",))
            ]
            archive.extractall(staging, members=members, filter="data")
        (top,) = staging.iterdir()
        if not (top / "tests").is_dir():
            raise SystemExit(f"{sdist.name} holds no tests/ directory")
        where.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(top, where)
    (where / DONE).write_text(f"{distribution}=={version} from {sdist.name}\n")
    return where


def main() -> None:
    root = Path(os.environ.get("SESSIONSTORE_PEER_TESTS_ROOT") or DEFAULT_ROOT)
    for distribution in PEERS:
        print(f"peer tests: {fetch(root, distribution)}", file=sys.stderr)
    print(root)


if __name__ == "__main__":
    main()
