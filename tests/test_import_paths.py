"""One import path per public name.

core's packages (dump, telemetry, analysis, synth) name their public API in
``__all__``; code outside a package imports those names from the package, code
inside it from the defining module (so a package's ``__init__`` never waits on
itself). Every other ``from module import name`` names the module that defines
``name``: a module never passes on a name it only imported.
"""

from __future__ import annotations

import ast
import importlib
from functools import cache
from pathlib import Path

import pytest

from miles_tui.core.base.lazy_exports import homes

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = (
    "miles_tui.core.dump",
    "miles_tui.core.telemetry",
    "miles_tui.core.analysis",
    "miles_tui.core.synth",
    "miles_tui.core.follow",
)
SCANNED = ("core", "tui", "tests", "bench", "screenshots")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["miles_tui", *parts] if parts[0] in ("core", "tui") else parts)


def _source(module: str) -> Path | None:
    """The file of a miles_tui module (a package's __init__), None for anything else."""
    if not module.startswith("miles_tui."):
        return None
    base = ROOT.joinpath(*module.split(".")[1:])
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


@cache
def _defined(path: Path) -> frozenset[str]:
    """Names a module binds itself at top level (defs, classes, assignments, also under if/try)."""
    names: set[str] = set()
    pending = list(ast.parse(path.read_text()).body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, ast.If | ast.Try | ast.With):
            pending += [*node.body, *getattr(node, "orelse", []), *getattr(node, "finalbody", [])]
            pending += [n for handler in getattr(node, "handlers", []) for n in handler.body]
    return frozenset(names)


def _package_of(module: str) -> str | None:
    return next((p for p in PACKAGES if module == p or module.startswith(p + ".")), None)


def _imports() -> list[tuple[str, str, str, int]]:
    """(importing module, imported module, name, line) of every absolute ``from miles_tui... import``."""
    found = []
    for folder in SCANNED:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if ".venv" in path.parts:
                continue
            here = _module_name(path)
            for node in ast.walk(ast.parse(path.read_text())):
                if (
                    isinstance(node, ast.ImportFrom)
                    and node.level == 0
                    and (node.module or "").startswith("miles_tui.")
                ):
                    found += [(here, node.module or "", alias.name, node.lineno) for alias in node.names]
    return found


@pytest.mark.parametrize("package", PACKAGES)
def test_each_package_names_its_api(package: str) -> None:
    """Each name in __all__ resolves (on first use) to what its defining module binds; none is also the name of
    a submodule (importing that submodule would rebind the package attribute to the module)."""
    module = importlib.import_module(package)
    names = module.__all__
    home_of = homes(module._EXPORTS)
    assert len(set(names)) == len(names) == len(home_of), f"{package}: a name exported twice"
    for name in names:
        home = f"{package}.{home_of[name]}"
        assert _source(f"{package}.{name}") is None, f"{package}.{name} is also a submodule"
        assert name in _defined(_source(home)), f"{home} does not define {name}"
        assert getattr(module, name) is getattr(importlib.import_module(home), name)


def _typing_exports(package: str) -> dict[str, str]:
    """Each name the package's ``if TYPE_CHECKING:`` block re-exports (``import X as X``) -> its submodule."""
    init = _source(package)
    assert init is not None
    tree = ast.parse(init.read_text())
    block = next(n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING")
    found = {}
    for node in block.body:
        assert isinstance(node, ast.ImportFrom) and (node.module or "").startswith(package + "."), ast.unparse(node)
        for alias in node.names:
            assert alias.asname == alias.name, f"{package}: {ast.unparse(node)} is not an explicit re-export"
            found[alias.name] = (node.module or "").removeprefix(package + ".")
    return found


@pytest.mark.parametrize("package", PACKAGES)
def test_the_two_writings_of_an_export_agree(package: str) -> None:
    """A public name is written twice: in the TYPE_CHECKING re-exports (what mypy reads) and in _EXPORTS (what
    runs); both name the same submodule, and nothing is in one and not the other."""
    assert _typing_exports(package) == homes(importlib.import_module(package)._EXPORTS)


def test_one_import_path_per_name() -> None:
    wrong = []
    for here, module, name, line in _imports():
        where = f"{here}:{line}: from {module} import {name}"
        package, home = _package_of(module), _package_of(here)
        submodule = _source(f"{module}.{name}") is not None
        if package is not None and module == package and home == package and here != package and not submodule:
            wrong.append(f"{where} (inside the package: import from the defining module)")
            continue
        outside = package is not None and package not in (module, home)
        if outside and name in importlib.import_module(str(package)).__all__:
            wrong.append(f"{where} (public: from {package} import {name})")
            continue
        source = _source(module)
        if source is None or (source.name == "__init__.py" and module in PACKAGES):
            continue  # a package's API is checked above
        if not submodule and name not in _defined(source):
            wrong.append(f"{where} ({module} does not define {name})")
    assert not wrong, "\n".join(wrong)
