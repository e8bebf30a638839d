"""Run a worker script many times, each run a child forked from one process
that imported it once, for kill tests (`tests.helpers.ForkServer`).

Usage: python forking.py SCRIPT [ARGS...]

A kill test kills many runs, and a fork costs far less than a new
interpreter importing sessionstore (and a framework) again. This program
runs SCRIPT's top level once, as the module ``forked_worker`` with ARGS in
``sys.argv``, so its imports are done and its main block is not run (a
script may import there what depends on ARGS). Then, for each line on
stdin (a JSON list of arguments; an empty line or the end of stdin stops
it), it forks a child that runs SCRIPT as ``__main__`` with those arguments
in ``sys.argv``, as ``python SCRIPT ARGS...`` would. The child prints
``pid P`` (its own) before anything else; once it is gone, this program
prints ``exit CODE`` on a line of its own (a kill may cut the child's last
line short), CODE as `subprocess` gives it (``-9`` for SIGKILL).

It imports beforehand what opening a SQL store imports on demand.
Nothing runs before a fork but imports: no thread, event loop or store
exists yet, so each child starts as a new process would.
"""

import json
import os
import runpy
import sys
import traceback


def child(script: str, args: list[str]) -> None:
    code = 0
    try:
        print("pid", os.getpid(), flush=True)
        sys.argv = [script, *args]
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def preload() -> None:
    """Import what opening a SQL store imports on demand (SQLAlchemy, the SQL
    backend, both drivers), once here rather than in every child."""
    import sqlalchemy.dialects.postgresql.psycopg
    import sqlalchemy.dialects.sqlite.pysqlite  # noqa: F401

    import sessionstore.backends.sql.store  # noqa: F401


def serve(script: str, args: list[str]) -> None:
    preload()
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    sys.argv = [script, *args]
    runpy.run_path(script, run_name="forked_worker")
    for line in sys.stdin:
        if not line.strip():
            break
        pid = os.fork()
        if pid == 0:
            child(script, json.loads(line))
        _, status = os.waitpid(pid, 0)
        print(f"\nexit {os.waitstatus_to_exitcode(status)}", flush=True)


if __name__ == "__main__":
    serve(sys.argv[1], sys.argv[2:])
