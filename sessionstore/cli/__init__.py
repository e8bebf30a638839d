"""The ``sessionstore`` command: a thin shell over the library.

Every command opens the store named by ``--db`` (or ``SESSIONSTORE_DB``;
default ``./sessions.db``, SQLite), does one thing, and prints it: tables
and progress bars on a terminal, plain tab-separated text when piped.

What the store holds is shown as it is, never read as markup, with control
characters escaped. Commands that only read (``ls``, ``show``, ``verify``,
``export``, ``html``, ``journal``, ``erasures``, ``migrate --status``), and ``erase``,
refuse a store that does not exist rather than create an empty one. Errors
become one line on stderr and a non-zero exit, never a traceback; Ctrl-C
stops at once with status 130, and a closed pipe (``| head``) ends the output quietly.

The package's modules, in the order a command runs through them: `parser`
(every command and option), `running` (`main`: errors, Ctrl-C, pipes),
`opening` (the store ``--db`` names), one module per family of commands
(`browse`, `show`, `archives`, `commands`), and `output` (what every
command prints, and how stored text is made safe to print).
"""

from sessionstore.cli.opening import DB_ENV, DEFAULT_DB
from sessionstore.cli.parser import build_parser
from sessionstore.cli.running import main

__all__ = ["DB_ENV", "DEFAULT_DB", "build_parser", "main"]
