"""Architecture checks anyone can run: the shape of the package, not its behaviour.

* No import cycle between the modules of sessionstore (a static walk of their imports).
* The layers of docs/README.md, one way: no module imports one of a later layer;
  SQLAlchemy and alembic only in the SQL store, ``json`` only in the codec and
  the adapters (which speak their frameworks' JSON).
* No module reaches a private name of a module outside that module's subpackage.
* No module is over `MODULE_LINES` lines but the protocol (``store.py``).
* ``import sessionstore`` in a fresh interpreter loads neither SQLAlchemy nor alembic.
* Every ``__all__`` is sorted and resolves; the top-level one lists exactly the public names.
* Integrations import only the public API (``sessionstore``, ``sessionstore.sync``).
* No test module imports another; the tests' folders mirror the package's.
"""

from __future__ import annotations

import ast
import inspect
import json
import os
import re
import subprocess
import sys
import types
import typing
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import sessionstore
import sessionstore.archive
import sessionstore.backends
import sessionstore.testing
import sessionstore.wire

ROOT = Path(__file__).parents[1]
PACKAGE = "sessionstore"
# Where the package's modules are. pyproject's package-dir ships the top-level
# migrations/ folder as sessionstore.migrations, so it is walked as such.
SOURCES = {PACKAGE: ROOT / "sessionstore", f"{PACKAGE}.migrations": ROOT / "migrations"}


# ------------------------------------------------------------ reading the sources


@dataclass(frozen=True)
class Module:
    """A module of the package: its dotted name and its file."""

    name: str
    path: Path
    is_package: bool

    @property
    def package(self) -> str:
        """The package it lives in (itself, for an ``__init__``)."""
        return self.name if self.is_package else parent_of(self.name)

    @property
    def where(self) -> str:
        return str(self.path.relative_to(ROOT))


@dataclass(frozen=True)
class Import:
    """One imported module (``module``) and the names taken from it (``from ... import``)."""

    line: int
    module: str
    names: tuple[str, ...]
    type_checking: bool  # under ``if TYPE_CHECKING:``
    in_function: bool  # in a function body: a deliberate lazy import


def parent_of(name: str) -> str:
    return name.rpartition(".")[0]


def ancestors(name: str) -> list[str]:
    """``a.b.c`` -> ``["a", "a.b"]``: the packages Python imports before ``a.b.c``."""
    parts = name.split(".")
    return [".".join(parts[:end]) for end in range(1, len(parts))]


def package_modules() -> dict[str, Module]:
    """Every module of the package, by dotted name."""
    modules: dict[str, Module] = {}
    for prefix, folder in SOURCES.items():
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            is_package = parts[-1] == "__init__"
            name = ".".join((prefix, *(parts[:-1] if is_package else parts)))
            modules[name] = Module(name, path, is_package)
    return modules


def syntax_tree(module: Module) -> ast.Module:
    return ast.parse(module.path.read_text(encoding="utf-8"), filename=str(module.path))


def imports_of(module: Module) -> list[Import]:
    """Every import statement of a module, wherever it stands, made absolute."""
    found: list[Import] = []

    def visit(nodes: Iterable[ast.AST], type_checking: bool, in_function: bool) -> None:
        for node in nodes:
            if isinstance(node, ast.Import):
                found.extend(
                    Import(node.lineno, alias.name, (), type_checking, in_function)
                    for alias in node.names
                )
            elif isinstance(node, ast.ImportFrom):
                names = tuple(alias.name for alias in node.names)
                target = absolute_module(node, module)
                found.append(Import(node.lineno, target, names, type_checking, in_function))
            elif isinstance(node, ast.If) and is_type_checking(node.test):
                visit(node.body, True, in_function)
                visit(node.orelse, type_checking, in_function)
            else:
                function = isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
                visit(ast.iter_child_nodes(node), type_checking, in_function or function)

    visit(syntax_tree(module).body, False, False)
    return found


def is_type_checking(test: ast.expr) -> bool:
    """``TYPE_CHECKING`` or ``typing.TYPE_CHECKING``."""
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def absolute_module(node: ast.ImportFrom, module: Module) -> str:
    """The module a ``from ... import`` names, relative dots resolved."""
    if node.level == 0:
        return node.module or ""
    base = module.package.split(".")
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


# ---------------------------------------------------------------- 1. import cycles


@dataclass(frozen=True)
class Edge:
    """Module ``source`` runs module ``target`` when it is imported."""

    source: Module
    target: str
    line: int
    how: str


def imported_modules(statement: Import, modules: dict[str, Module]) -> list[str]:
    """The package's modules an import names: ``from X import Y`` names ``X.Y``
    when that is a module, else ``X``."""
    if not statement.names:
        targets = [statement.module]
    else:
        targets = [
            f"{statement.module}.{name}"
            if f"{statement.module}.{name}" in modules
            else statement.module
            for name in statement.names
        ]
    return [target for target in dict.fromkeys(targets) if target in modules]


def import_edges(modules: dict[str, Module]) -> list[Edge]:
    """What each module runs as it is imported: the modules its top-level imports
    name (``TYPE_CHECKING`` ones included: a cycle there is still a cycle), and the
    package ``__init__``\\ s Python runs on the way to them, except the ones already
    running when the module runs (its own packages)."""
    edges: list[Edge] = []
    for module in modules.values():
        running = {module.name, *ancestors(module.name)}
        for statement in imports_of(module):
            if statement.in_function:
                continue
            how = "TYPE_CHECKING import" if statement.type_checking else "import"
            for target in imported_modules(statement, modules):
                edges.append(Edge(module, target, statement.line, how))
                edges.extend(
                    Edge(module, package, statement.line, f"{how} of {target} runs its __init__")
                    for package in ancestors(target)
                    if package in modules and package not in running
                )
    return edges


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    """The modules ``start`` leads to, one import or more away."""
    seen: set[str] = set()
    todo = list(graph[start])
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(graph[name])
    return seen


def import_cycles(edges: list[Edge]) -> list[list[str]]:
    """The strongly connected components of the import graph that hold a cycle
    (two modules or more, or a module importing itself)."""
    graph: dict[str, set[str]] = {edge.target: set() for edge in edges}
    for edge in edges:
        graph.setdefault(edge.source.name, set()).add(edge.target)
    reach = {name: reachable(graph, name) for name in graph}
    cycles: list[list[str]] = []
    for name in sorted(reach):
        if name in reach[name] and not any(name in cycle for cycle in cycles):
            cycles.append(sorted(other for other in reach[name] if name in reach[other]))
    return cycles


def describe_cycle(cycle: list[str], edges: list[Edge]) -> str:
    inside = {
        (e.source.name, e.target): e
        for e in reversed(edges)
        if {e.source.name, e.target} <= set(cycle)
    }
    lines = [f"cycle through {len(cycle)} modules: {', '.join(cycle)}"]
    lines += [
        f"    {e.source.where}:{e.line}  {e.source.name} -> {e.target}  ({e.how})"
        for e in sorted(inside.values(), key=lambda e: (e.source.name, e.line, e.target))
    ]
    return "\n".join(lines)


def test_no_import_cycle_in_the_package() -> None:
    edges = import_edges(package_modules())
    cycles = import_cycles(edges)
    assert not cycles, "import cycles:\n" + "\n".join(describe_cycle(c, edges) for c in cycles)


MODULE_LINES = 600
"""The most lines a module of the package holds: one read in a sitting. The
protocol (``sessionstore/store.py``), the contract's text stated once where
users read it, is the exception."""


def test_no_module_is_over_the_line_limit_but_the_protocol() -> None:
    long = [
        f"{module.where}: {lines} lines"
        for module in package_modules().values()
        if module.name != f"{PACKAGE}.store"
        for lines in [len(module.path.read_text(encoding="utf-8").splitlines())]
        if lines > MODULE_LINES
    ]
    assert not long, f"modules over {MODULE_LINES} lines (split them by concept):\n" + "\n".join(
        long
    )


# ------------------------------------------------------------------ 1b. the layers

# docs/README.md's layers, earliest first: each module by the longest prefix
# of its dotted name found here ("" the package itself; a new module is given
# its layer here).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "wire",
        ("errors", "timestamps", "models", "wire", "parts", "pairing", "context"),
    ),
    (
        "journal records",
        ("journal", "effect_lines", "effect_values", "effect_options", "effects"),
    ),
    (
        "stores",
        (
            *("store", "backends", "encryption", "scoped", "scoped_journal", "scoped_names"),
            *("migrate", "migrations"),
        ),
    ),
    (
        "tools and integrations",
        (
            *("", "__main__", "archive", "anchors", "verify", "retention", "transcript"),
            *("effect_journals", "demo", "sync", "cli", "integrations", "testing"),
        ),
    ),
)

# Who may import a library the rest never touches.
ONLY_IN: dict[str, tuple[str, ...]] = {
    "sqlalchemy": ("backends.sql", "migrate", "migrations"),
    "alembic": ("backends.sql", "migrate", "migrations"),
    "json": ("wire", "integrations"),
}


def longest_prefix(name: str, prefixes: Iterable[str]) -> str | None:
    """The longest of ``prefixes`` (dotted, under the package) that ``name`` is
    or lies under; None when none is."""
    found = None
    for prefix in prefixes:
        full = f"{PACKAGE}.{prefix}" if prefix else PACKAGE
        if (name == full or name.startswith(full + ".")) and (
            found is None or len(prefix) > len(found)
        ):
            found = prefix
    return found


def layer_of(name: str) -> int:
    """The index in `LAYERS` of the module ``name``."""
    prefix = longest_prefix(name, (p for _, prefixes in LAYERS for p in prefixes))
    if prefix is None or (prefix == "" and name != PACKAGE):
        raise AssertionError(f"{name} has no layer: give it one in LAYERS")
    return next(n for n, (_, prefixes) in enumerate(LAYERS) if prefix in prefixes)


def test_every_module_has_a_layer() -> None:
    for name in package_modules():
        layer_of(name)


def test_no_module_imports_one_of_a_later_layer() -> None:
    """Any import (lazy or for type checking too) is of the module's own layer
    or an earlier one: a store never reaches up into a tool."""
    modules = package_modules()
    wrong = [
        f"{module.where}:{statement.line}  ({LAYERS[own][0]}) imports {target}"
        f" ({LAYERS[layer_of(target)][0]})"
        for module in modules.values()
        for own in [layer_of(module.name)]
        for statement in imports_of(module)
        for target in imported_modules(statement, modules)
        if layer_of(target) > own
    ]
    assert not wrong, "imports against the layers:\n" + "\n".join(wrong)


def test_the_libraries_kept_to_one_part_are_imported_there_only() -> None:
    wrong = [
        f"{module.where}:{statement.line}  imports {statement.module}"
        for module in package_modules().values()
        for statement in imports_of(module)
        for library, owners in ONLY_IN.items()
        if statement.module.partition(".")[0] == library
        and longest_prefix(module.name, owners) is None
    ]
    assert not wrong, "libraries imported outside their part:\n" + "\n".join(wrong)


# ------------------------------------------------ 2. reaching into others' privates

# Private names of the stdlib or of third parties that a module cannot do without:
# (the module using it, the private name) -> why. Never for sessionstore's own.
ALLOWED_PRIVATES: dict[tuple[str, str], str] = {}


def is_private(name: str) -> bool:
    """``_name``, but not ``__dunder__``."""
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_part_and_owner(dotted: str, modules: dict[str, Module]) -> tuple[str, str] | None:
    """The first ``_part`` of ``dotted`` and the package it belongs to: the package
    holding the module that defines it. None when nothing is private."""
    parts = dotted.split(".")
    for index, part in enumerate(parts):
        if is_private(part):
            holder = ".".join(parts[:index])
            known = modules.get(holder)
            owner = holder if known is None or known.is_package else parent_of(holder)
            return part, owner
    return None


def within(package: str, owner: str) -> bool:
    return package == owner or package.startswith(owner + ".")


def private_imports(module: Module, modules: dict[str, Module]) -> Iterator[str]:
    """Imports of a private module or name whose package is not the importer's,
    nor one above it: ``backends/sql/*`` may use ``backends/_common``, but
    ``archive/*`` may not use ``backends/_files``."""
    for statement in imports_of(module):
        reached = [f"{statement.module}.{name}" for name in statement.names] or [statement.module]
        for dotted in reached:
            private = private_part_and_owner(dotted, modules)
            if private is None or (module.name, private[0]) in ALLOWED_PRIVATES:
                continue
            if not within(module.package, owner=private[1]):
                yield f"{module.where}:{statement.line}  imports {dotted}"


def own_privates(module: Module) -> set[str]:
    """The private attributes a module defines itself: its classes' methods and
    class attributes, and what its code assigns to ``self._x``."""
    names: set[str] = set()
    for node in ast.walk(syntax_tree(module)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and is_private(node.name):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.ClassDef):
            for statement in node.body:
                targets = (
                    statement.targets
                    if isinstance(statement, ast.Assign)
                    else [statement.target]
                    if isinstance(statement, ast.AnnAssign)
                    else []
                )
                names.update(t.id for t in targets if isinstance(t, ast.Name))
    return {name for name in names if is_private(name)}


def private_attributes(module: Module) -> Iterator[str]:
    """``<expr>._name`` where ``<expr>`` is not ``self`` or ``cls`` and ``_name``
    is not one the module defines itself: a reach into the internals of an
    object of another module (``self._store._runner``, ``Q._compiled``). A
    class reading the privates of another of its own instances (``other._key``
    in ``__eq__``) stays inside its module."""
    own = own_privates(module)
    attributes = [node for node in ast.walk(syntax_tree(module)) if isinstance(node, ast.Attribute)]
    for node in sorted(attributes, key=lambda node: (node.lineno, node.col_offset)):
        if (
            is_private(node.attr)
            and node.attr not in own
            and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
            and (module.name, node.attr) not in ALLOWED_PRIVATES
        ):
            yield f"{module.where}:{node.lineno}  {ast.unparse(node)}"


def test_no_module_imports_the_privates_of_another_subpackage() -> None:
    modules = package_modules()
    found = [hit for module in modules.values() for hit in private_imports(module, modules)]
    assert not found, f"{len(found)} imports of another subpackage's privates:\n" + "\n".join(found)


def test_no_module_reaches_into_another_objects_private_attributes() -> None:
    found = [hit for module in package_modules().values() for hit in private_attributes(module)]
    assert not found, f"{len(found)} reaches into another object's privates:\n" + "\n".join(found)


# ------------------------------------------------------ 3. a fresh interpreter

# Runs first in the child: it notes who first imports SQLAlchemy or alembic
# (the chain of sessionstore lines that led there), then lets the import go on.
WATCH_HEAVY_IMPORTS = """
import json, sys, traceback
HEAVY = ("sqlalchemy", "alembic")
first_imported_by = {}

class WatchHeavyImports:
    def find_spec(self, name, path=None, target=None):
        top = name.partition(".")[0]
        if top in HEAVY and top not in first_imported_by:
            first_imported_by[top] = [
                f"{frame.filename.rpartition('/sessionstore/')[2]}:{frame.lineno}"
                for frame in traceback.extract_stack()
                if "/sessionstore/" in frame.filename
            ]
        return None

sys.meta_path.insert(0, WatchHeavyImports())
"""

REPORT_HEAVY_IMPORTS = """
loaded = sorted(name for name in sys.modules if name.partition(".")[0] in HEAVY)
print(json.dumps({"loaded": loaded, "first_imported_by": first_imported_by}))
"""

USE_MEMORY_AND_JSONL_STORES = """
import asyncio
import sessionstore
from sessionstore import Message, MessageEntry, SessionMeta

async def use(target):
    async with sessionstore.open_store(target) as store:
        await store.create(SessionMeta(id="s1"))
        message = Message(role="user", content="hello")
        await store.append("s1", MessageEntry(id="m1", timestamp="2024-01-01", message=message))
        assert [entry.id for entry in await store.load("s1")] == ["m1"]
        assert await store.load_context("s1") == [message]
        assert [meta.id for meta in await store.list()] == ["s1"]

asyncio.run(use("memory://"))
asyncio.run(use("sessions"))  # a JsonlStore in the current (temporary) directory
"""

OPEN_SQLITE_THROUGH_THE_LAZY_SQLSTORE = """
import asyncio
import sessionstore
from sessionstore import SessionMeta, SqlStore
assert "sqlalchemy" in sys.modules, "SqlStore came without SQLAlchemy"

async def use():
    async with sessionstore.open_store("x.db") as store:
        assert isinstance(store, SqlStore), type(store)
        await store.create(SessionMeta(id="s1"))
        assert [meta.id for meta in await store.list()] == ["s1"]

asyncio.run(use())
"""


@dataclass(frozen=True)
class HeavyImports:
    loaded: list[str]
    first_imported_by: dict[str, list[str]]

    def explain(self, doing: str) -> str:
        tops = sorted({name.partition(".")[0] for name in self.loaded})
        chains = [f"  {top} first via {' -> '.join(self.first_imported_by[top])}" for top in tops]
        return "\n".join(
            [f"{doing} loaded {', '.join(tops)} ({len(self.loaded)} modules)", *chains]
        )


def fresh_python(code: str, directory: Path) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a new interpreter (in ``directory``, this checkout's
    package first on its path); it must succeed."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    child = subprocess.run(
        [sys.executable, "-c", code],
        cwd=directory,
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=600,  # a guard against a hang: a loaded machine may take minutes
        check=False,
    )
    assert child.returncode == 0, child.stderr
    return child


def run_fresh(code: str, directory: Path) -> HeavyImports:
    """Run ``code`` in a new interpreter (in ``directory``, this checkout's package
    first on its path); what of SQLAlchemy and alembic it loaded, and who first did."""
    child = fresh_python(WATCH_HEAVY_IMPORTS + code + REPORT_HEAVY_IMPORTS, directory)
    report = json.loads(child.stdout.splitlines()[-1])
    return HeavyImports(report["loaded"], report["first_imported_by"])


def test_import_sessionstore_loads_neither_sqlalchemy_nor_alembic(tmp_path: Path) -> None:
    heavy = run_fresh("import sessionstore\n", tmp_path)
    assert not heavy.loaded, heavy.explain("import sessionstore")


def test_memory_and_jsonl_stores_work_without_sqlalchemy_or_alembic(tmp_path: Path) -> None:
    heavy = run_fresh(USE_MEMORY_AND_JSONL_STORES, tmp_path)
    assert not heavy.loaded, heavy.explain("using a memory:// and a JSONL store")


def test_import_sessionstore_cli_loads_neither_sqlalchemy_nor_alembic(tmp_path: Path) -> None:
    heavy = run_fresh("import sessionstore.cli\n", tmp_path)
    assert not heavy.loaded, heavy.explain("import sessionstore.cli")


def test_import_sessionstore_leaves_what_a_turn_may_not_need_for_first_use(
    tmp_path: Path,
) -> None:
    """A process started for one turn never loads the archive, the stores it
    does not use, or the rules of a tool-call dialect it does not repair;
    naming one loads it."""
    code = (
        "import json, sys\n"
        "import sessionstore\n"
        "later = ('sessionstore.archive', 'sessionstore.backends.jsonl',\n"
        "         'sessionstore.backends.memory', 'sessionstore.pairing.anthropic')\n"
        "def loaded():\n"
        "    return sorted(m for m in sys.modules if m.startswith(later))\n"
        "at_start = loaded()\n"
        "from sessionstore import JsonlStore, MemoryStore, export_archive, repair_pairing\n"
        "from sessionstore.backends.jsonl import JsonlStore as Jsonl\n"
        "from sessionstore.backends.memory import MemoryStore as Memory\n"
        "assert JsonlStore is Jsonl and MemoryStore is Memory and callable(export_archive)\n"
        "assert repair_pairing([], dialect='anthropic') == []\n"
        "print(json.dumps([at_start, loaded()]))\n"
    )
    child = fresh_python(code, tmp_path)
    at_start, after = json.loads(child.stdout)
    assert at_start == []
    assert "sessionstore.archive" in after
    assert "sessionstore.backends.jsonl" in after
    assert "sessionstore.backends.memory" in after
    assert "sessionstore.pairing.anthropic" in after


def test_sqlstore_loads_sqlalchemy_on_demand_and_opens_sqlite(tmp_path: Path) -> None:
    heavy = run_fresh(OPEN_SQLITE_THROUGH_THE_LAZY_SQLSTORE, tmp_path)
    assert "sqlalchemy" in heavy.loaded
    assert (tmp_path / "x.db").is_file()


def test_reading_an_existing_sqlite_database_leaves_the_postgresql_dialect(
    tmp_path: Path,
) -> None:
    """SQLAlchemy's PostgreSQL dialect (about 55 ms to import) is for the
    migrations alone (their indexes name its options): a process that opens a
    SQLite database already migrated, and reads it, never loads it."""
    run_fresh(OPEN_SQLITE_THROUGH_THE_LAZY_SQLSTORE, tmp_path)  # made, and migrated
    read = (
        "import asyncio, sessionstore\n"
        "async def read():\n"
        "    async with sessionstore.open_store('x.db') as store:\n"
        "        assert await store.load_context('s1') == []\n"
        "asyncio.run(read())\n"
    )
    heavy = run_fresh(read, tmp_path)
    assert "sqlalchemy.engine" in heavy.loaded
    assert not [m for m in heavy.loaded if m.startswith("sqlalchemy.dialects.postgresql")]


# ------------------------------------------------------------------ 4. __all__

SUBPACKAGES = [sessionstore.backends, sessionstore.wire, sessionstore.archive, sessionstore.testing]


def ruff_sort_key(name: str) -> tuple[int, list[str | int]]:
    """The order ruff's RUF022 (on in this project) keeps ``__all__`` in, so the
    test and the linter agree: SCREAMING_CASE, then CamelCase, then the rest,
    each in natural order (``a2`` before ``a10``)."""
    kind = 0 if len(name) > 1 and name.isupper() else 1 if name[:1].isupper() else 2
    natural: list[str | int] = [
        int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)
    ]
    return kind, natural


def unresolved(module: types.ModuleType) -> list[str]:
    return [name for name in module.__all__ if not hasattr(module, name)]


def public_names(module: types.ModuleType) -> set[str]:
    """The names ``module.<name>`` offers, submodules aside. Both ``vars`` and
    ``dir``: a module ``__dir__`` adds the lazy names but may hide others."""
    names = {name for name in {*vars(module), *dir(module)} if not name.startswith("_")}
    return {name for name in names if not isinstance(getattr(module, name, None), types.ModuleType)}


@pytest.mark.parametrize("module", [sessionstore, *SUBPACKAGES], ids=lambda m: m.__name__)
def test_all_is_sorted_unique_and_resolves(module: types.ModuleType) -> None:
    listed: list[str] = module.__all__
    expected = sorted(set(listed), key=ruff_sort_key)
    assert listed == expected, f"unsorted or repeated; sorted once each: {expected}"
    assert not unresolved(module), f"in __all__ but missing: {unresolved(module)}"


def test_all_lists_exactly_the_public_names_and_the_version() -> None:
    listed = set(sessionstore.__all__)
    public = public_names(sessionstore) | {"__version__"}
    assert listed == public, (
        f"public but not in __all__: {sorted(public - listed)}; "
        f"in __all__ but not public: {sorted(listed - public)}"
    )


def walk_type(hint: object) -> Iterator[object]:
    """A type and every type inside it (``list[Summary]`` -> list[...], Summary)."""
    yield hint
    for argument in typing.get_args(hint):  # Callable's parameters come as a list
        for inner in argument if isinstance(argument, list) else [argument]:
            yield from walk_type(inner)


def top_level_assignments(modules: dict[str, Module]) -> set[str]:
    """The names package modules bind at their top level by assignment, where
    their type aliases are (``Entry = MessageEntry | CompactionEntry``)."""
    names: set[str] = set()
    for module in modules.values():
        for node in syntax_tree(module).body:
            targets = node.targets if isinstance(node, ast.Assign) else []
            if isinstance(node, ast.AnnAssign):
                targets = [node.target]
            names |= {target.id for target in targets if isinstance(target, ast.Name)}
    return names


def package_types_in_return(method: types.FunctionType, aliases: set[str]) -> set[str]:
    """The classes and type aliases of sessionstore a method's return annotation
    names: classes from the evaluated hint (through aliases too), aliases from
    the annotation as written."""
    hint = typing.get_type_hints(method).get("return")
    found = {
        str(getattr(part, "__name__", ""))
        for part in walk_type(hint)
        if str(getattr(part, "__module__", "")).partition(".")[0] == PACKAGE
        and not isinstance(part, typing.TypeVar)  # a generic method's own type
    }
    written = inspect.get_annotations(method).get("return")
    if isinstance(written, str):
        tree = ast.parse(written, mode="eval")
        names = (n.id for n in ast.walk(tree) if isinstance(n, ast.Name))
        found |= {name for name in names if name in aliases and not name.startswith("_")}
    return found - {""}


def test_what_the_store_protocols_return_is_exported() -> None:
    aliases = top_level_assignments(package_modules())
    missing: dict[str, list[str]] = defaultdict(list)
    for protocol in (sessionstore.SessionStore, sessionstore.SessionJournal):
        for name, member in vars(protocol).items():
            if name.startswith("_") or not inspect.isfunction(member):
                continue
            for type_name in package_types_in_return(member, aliases):
                if type_name not in sessionstore.__all__:
                    missing[type_name].append(f"{protocol.__name__}.{name}")
    assert not missing, "returned by the store protocols, not in sessionstore.__all__: " + (
        "; ".join(f"{type_name} (from {', '.join(by)})" for type_name, by in missing.items())
    )


# ------------------------------------------------------------ 5. integrations

# What a framework adapter may import of sessionstore: what a user imports,
# the conversation under a head that the adapters share included, the wire
# codec (the JSON of an adapter's own records: LangGraph's checkpoints), and
# the LangChain adapter's messages (LangGraph's messages are LangChain's).
PUBLIC_MODULES = {
    PACKAGE,
    f"{PACKAGE}.sync",
    f"{PACKAGE}.wire",
    f"{PACKAGE}.integrations.langchain",
    f"{PACKAGE}.integrations.conversation",
    f"{PACKAGE}.integrations.kept",
    f"{PACKAGE}.integrations.owned",
    f"{PACKAGE}.integrations.turns",
}


def _own_helper(importer: str, imported: str) -> bool:
    """Whether ``imported`` is one of the modules an adapter is split into
    (``integrations.langgraph`` and its ``integrations.langgraph_records``...)."""
    family = importer.removeprefix(f"{PACKAGE}.integrations.").partition("_")[0]
    return imported.removeprefix(f"{PACKAGE}.integrations.").partition("_")[0] == family


def test_integrations_use_only_the_public_api() -> None:
    found = [
        f"{module.where}:{statement.line}  imports {statement.module}"
        for module in package_modules().values()
        if module.name.startswith(f"{PACKAGE}.integrations.")
        for statement in imports_of(module)
        if statement.module.partition(".")[0] == PACKAGE
        and statement.module not in PUBLIC_MODULES
        and not _own_helper(module.name, statement.module)
    ]
    assert not found, "integrations reach past sessionstore and sessionstore.sync:\n" + "\n".join(
        found
    )


def test_a_module_of_the_sql_package_loads_without_the_store(tmp_path: Path) -> None:
    """The package's face names `SqlStore` but loads it on first use: the
    migrations import the tables without the store, and no import runs the
    store's module before the module asked for."""
    code = (
        "import sys\n"
        "import sessionstore.backends.sql.tables\n"
        "assert 'sessionstore.backends.sql.store' not in sys.modules\n"
        "from sessionstore.backends.sql import SqlStore\n"
        "assert SqlStore.__module__ == 'sessionstore.backends.sql.store'\n"
    )
    fresh_python(code, tmp_path)


# ------------------------------------------------------------------ 6. the tests

TESTS = ROOT / "tests"
# Folders of tests that span the package rather than mirror a part of it.
ACROSS = {
    "contract": "the contract suites of sessionstore.testing, run on every backend",
    "differential": "the package against reference implementations",
}


def modules_of_the_tests() -> dict[str, Module]:
    """Every module below tests/, by dotted name (``tests.cli.helpers``)."""
    modules: dict[str, Module] = {}
    for path in sorted(TESTS.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        is_package = parts[-1] == "__init__"
        name = ".".join(parts[:-1] if is_package else parts)
        modules[name] = Module(name, path, is_package)
    return modules


def test_no_test_module_imports_another() -> None:
    """What tests share lives in a helper module (``helpers.py``, ``scripted.py``
    beside them), never in a test module: importing one runs its module-level
    set-up, and moving or renaming a test file must not break another."""
    modules = modules_of_the_tests()
    found = [
        f"{module.where}:{statement.line}  imports {target}"
        for module in modules.values()
        for statement in imports_of(module)
        for target in [
            statement.module,
            *(f"{statement.module}.{name}" for name in statement.names),
        ]
        if target in modules and target.rpartition(".")[2].startswith("test_")
    ]
    assert not found, "test modules imported by others:\n" + "\n".join(found)


def subpackages(folder: Path) -> set[str]:
    """The names of the packages directly in ``folder``."""
    return {path.parent.name for path in folder.glob("*/__init__.py")}


def test_the_tests_mirror_the_package() -> None:
    """The tests of ``sessionstore/<path>/`` are in ``tests/<path>/``: every
    folder holding test files is ``tests/`` itself (the top-level modules and
    the package as a whole), the mirror of a subpackage, or one of `ACROSS`.
    A test file named after a subpackage of what its folder mirrors
    (``test_<sub>.py``, ``test_<sub>_*.py``) is in that subpackage's folder
    instead. Each folder is a package (``__init__.py``), as test files of one
    name in two folders need."""
    wrong = []
    for path in sorted(TESTS.rglob("test_*.py")):
        folder = path.parent.relative_to(TESTS)
        mirrored = ROOT / PACKAGE / folder
        where = str(path.relative_to(ROOT))
        if folder.parts and folder.parts[0] in ACROSS:
            pass
        elif not (mirrored / "__init__.py").is_file():
            wrong.append(f"{where}: no package {PACKAGE}/{folder.as_posix()}/ to mirror")
        else:
            for sub in subpackages(mirrored):
                if path.stem == f"test_{sub}" or path.stem.startswith(f"test_{sub}_"):
                    wrong.append(f"{where}: belongs in tests/{(folder / sub).as_posix()}/")
        if not (path.parent / "__init__.py").is_file():
            wrong.append(f"{where}: its folder has no __init__.py")
    assert not wrong, "test files out of place:\n" + "\n".join(wrong)
