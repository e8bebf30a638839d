"""The ``sessionstore`` command: a thin shell over the library (docs/cli.md).

The package's modules, in the order a command runs through them: `parser`
(every command and option; it names each command's module without loading
it), `running` (errors, Ctrl-C, pipes), `opening` (the store ``--db``
names), `naming` (the session a command is given: a conversation's name,
an id, ``latest``, an id's start), the one module of the command's family (`browse`, `search`,
`show`, `keys`, `archives`, `commands`), and `output` (what every command
prints, and how stored text is made safe to print). A run loads only the
modules its command uses: ``--version`` loads none of them, ``ls`` neither
the archive nor alembic.
"""

from __future__ import annotations

from collections.abc import Sequence

from sessionstore.cli.defaults import DB_ENV, DEFAULT_DB
from sessionstore.cli.parser import build_parser

__all__ = ["DB_ENV", "DEFAULT_DB", "build_parser", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    args = build_parser().parse_args(argv)  # --help, --version and wrong arguments end here
    from sessionstore.cli.running import run  # asyncio and rich: for a command only

    return run(args)
