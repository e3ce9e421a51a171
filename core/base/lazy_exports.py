"""A package's public names imported on first use (PEP 562), so importing the package stays cheap.

Contract: a package's ``__init__`` writes each public name twice: once in an
``if TYPE_CHECKING:`` block as ``from <package>.<module> import Name as Name``
(the explicit re-export mypy reads), once in ``_EXPORTS``, a table of each
defining submodule and the names it exports. ``__all__ = public_names(_EXPORTS)``
and ``__getattr__ = lazy_getattr(__name__, _EXPORTS)`` derive the rest: the
getattr imports the defining module when a name is first asked for, keeps the
value on the package, and raises AttributeError for any other name.
``tests/test_import_paths.py`` checks that the two writings agree.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

Exports = Mapping[str, tuple[str, ...]]
"""Each defining submodule (relative to the package) -> the public names it exports."""


def public_names(exports: Exports) -> list[str]:
    """The package's ``__all__``: every exported name, sorted."""
    return sorted(name for names in exports.values() for name in names)


def homes(exports: Exports) -> dict[str, str]:
    """Each exported name -> the submodule that defines it."""
    return {name: module for module, names in exports.items() for name in names}


def lazy_getattr(package: str, exports: Exports) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package`` for the names of ``exports``."""
    home_of = homes(exports)

    def __getattr__(name: str) -> Any:
        module = home_of.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        setattr(sys.modules[package], name, value)  # found once
        return value

    return __getattr__
