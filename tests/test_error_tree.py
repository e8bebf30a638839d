"""errors.py draws the exception tree; every public exception is in it,
under its parent, with the builtin it also derives from."""

import re

import sessionstore
import sessionstore.errors as errors

_ROW = re.compile(r"^(?P<indent>[ │├└─]*)(?P<name>[A-Z]\w+Error)\s*(?:\(also (?P<also>\w+)\))?")


def _drawn() -> dict[str, tuple[str | None, str | None]]:
    """Each drawn exception's parent and its "(also ...)" builtin."""
    assert errors.__doc__ is not None
    drawn: dict[str, tuple[str | None, str | None]] = {}
    parents: list[tuple[int, str]] = []  # (column, name) of the rows above
    for line in errors.__doc__.splitlines():
        found = _ROW.match(line.strip("\n")[4:] if line.startswith("    ") else line)
        if found is None or not line.startswith("    "):
            continue
        column = len(found["indent"])
        while parents and parents[-1][0] >= column:
            parents.pop()
        drawn[found["name"]] = (parents[-1][1] if parents else None, found["also"])
        parents.append((column, found["name"]))
    return drawn


def _public() -> dict[str, type[BaseException]]:
    return {
        name: getattr(errors, name)
        for name in errors.__all__
        if isinstance(getattr(errors, name), type)
        and issubclass(getattr(errors, name), BaseException)
    }


def test_every_public_exception_is_drawn_under_its_parent() -> None:
    drawn, public = _drawn(), _public()
    assert sorted(drawn) == sorted(public)
    for name, cls in public.items():
        parent, also = drawn[name]
        ours = [base for base in cls.__bases__ if issubclass(base, errors.SessionStoreError)]
        builtins = [base.__name__ for base in cls.__bases__ if base not in ours]
        assert [base.__name__ for base in ours] == ([parent] if parent else []), name
        if parent is None:
            assert builtins == ["Exception"]
        else:
            assert builtins == ([also] if also else []), name


def test_every_exception_the_package_exports_is_one_of_the_tree() -> None:
    exported = {
        name
        for name in dir(sessionstore)
        if isinstance(getattr(sessionstore, name, None), type)
        and issubclass(getattr(sessionstore, name), BaseException)
    }
    assert exported <= set(_public())


def test_every_exception_of_the_tree_raised_anywhere_is_drawn_or_named() -> None:
    # Walks every module of the package (the adapters need their frameworks,
    # which the test environment installs).
    import importlib
    import pkgutil

    assert errors.__doc__ is not None
    found: set[str] = set()
    for module in pkgutil.walk_packages(sessionstore.__path__, "sessionstore."):
        if module.name.endswith("__main__"):
            continue
        loaded = importlib.import_module(module.name)
        for name, value in vars(loaded).items():
            if (
                isinstance(value, type)
                and issubclass(value, errors.SessionStoreError)
                and value.__module__ == module.name
                and not name.startswith("_")
            ):
                found.add(f"{module.name}.{name}")
    assert found  # the walk found the tree
    for qualified in sorted(found):
        where, name = qualified.rsplit(".", 1)
        if where == "sessionstore.errors":
            assert name in _drawn(), qualified
        else:  # named in the paragraph on adapters, with its module
            assert f"``{name}``" in errors.__doc__ or f"{where}.{name}``" in errors.__doc__, (
                qualified
            )
            assert where.rsplit(".", 1)[-1] in errors.__doc__, qualified
