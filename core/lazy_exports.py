"""A package's public names imported on first use (PEP 562), so importing the package stays cheap.

Contract: ``__getattr__ = lazy_getattr(__name__, HOMES)`` in a package's
``__init__`` (HOMES: each public name -> the submodule defining it) imports the
defining module when the name is first asked for, keeps the value on the
package, and raises AttributeError for any other name.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_getattr(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package`` for the names of ``homes``."""

    def __getattr__(name: str) -> Any:
        module = homes.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        setattr(sys.modules[package], name, value)  # found once
        return value

    return __getattr__
