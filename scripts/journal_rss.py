"""Peak memory (RSS) of reading a large journal, each way, in a fresh process.

    python scripts/journal_rss.py [MEGABYTES]

Writes two journals of about MEGABYTES (default 100) under a temporary
directory: "writes", post and comment writes with one session header per
1,000 (what a reader returns is then about as large as the file), and
"skipped", lines of a format this version does not know (what it returns
is small, so the figure is the reading itself). Each reader runs in its own
process; its peak resident set (``ru_maxrss``) is printed beside that of a
process that only imports sessionstore. Run it with PYTHONPATH at another
checkout to compare versions.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

# Each reader keeps its journal in a global: returned from asyncio.run's
# coroutine, Python 3.11 would format it whole with repr() (asyncio.run looks
# up its SIGINT handler through an enum whose error message reprs the task).
READERS = {
    "import only": "import sessionstore as s",
    "FileJournal.read()": (
        "import asyncio, sessionstore as s\n"
        "async def main():\n"
        "    global j\n"
        "    j = await s.FileJournal(PATH).read()\n"
        "asyncio.run(main())\n"
        "print('writes', j.writes(), 'skipped', len(j.skipped))"
    ),
    "Journal.parse(read_bytes())": (
        "import asyncio, sessionstore as s\n"
        "async def main():\n"
        "    global j\n"
        "    j = s.Journal.parse(await s.FileJournal(PATH).read_bytes())\n"
        "asyncio.run(main())\n"
        "print('writes', j.writes(), 'skipped', len(j.skipped))"
    ),
}

PEAK = (
    "\nimport resource\n"
    "print('from', s.__file__.removesuffix('/sessionstore/__init__.py'))\n"
    "print('peak', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024, 'MB')"
)


def write_skipped(path: Path, megabytes: int) -> None:
    line = b'{"line":"newer","pad":"' + b"q" * 200 + b'"}\n'
    with path.open("wb") as file:
        for _ in range((megabytes << 20) // len(line)):
            file.write(line)


def write_journal(path: Path, megabytes: int) -> None:
    header = b'{"line":"session","started_at":"2026-10-13T11:00:00Z","model":"claude"}\n'
    with path.open("wb") as file:
        size = 0
        n = 0
        while size < megabytes << 20:
            if n % 1000 == 0:
                file.write(header)
            if n % 2:
                at = f"2026-10-13T11:00:{n % 60:02d}Z"
                line = f'{{"line":"post","at":"{at}","id":"{uuid.uuid4()}"}}\n'
            else:
                line = (
                    f'{{"line":"comment","at":"2026-10-13T11:00:{n % 60:02d}Z",'
                    f'"id":"{uuid.uuid4()}","on":"{uuid.uuid4()}"}}\n'
                )
            size += file.write(line.encode())
            n += 1


def main() -> None:
    megabytes = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    with tempfile.TemporaryDirectory() as work:
        for kind, write in (("writes", write_journal), ("skipped", write_skipped)):
            path = Path(work) / kind / "session_journal.jsonl"
            path.parent.mkdir()
            write(path, megabytes)
            print(f"journal of {kind}: {path.stat().st_size / 1e6:.0f} MB")
            for name, code in READERS.items():
                script = f"PATH = {str(path)!r}\n{code}{PEAK}"
                out = subprocess.run(  # in the temporary directory: sessionstore from PYTHONPATH
                    [sys.executable, "-c", script],
                    capture_output=True,
                    text=True,
                    check=True,
                    cwd=work,
                ).stdout
                print(f"  {name:30} {' '.join(out.split())}")


if __name__ == "__main__":
    main()
