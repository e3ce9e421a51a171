"""Writing dumps: miles' writer rules, a torch.save-compatible archive writer, the demo run."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from miles_tui.core.synth.demo_cleanup import claim_demo_dir, make_temp_demo, remove_temp_demo

__all__ = [
    "claim_demo_dir",
    "make_temp_demo",
    "remove_temp_demo",
]

_HOMES = {
    "claim_demo_dir": "demo_cleanup",
    "make_temp_demo": "demo_cleanup",
    "remove_temp_demo": "demo_cleanup",
}
"""Each public name's defining module, imported on first use (importing the package stays cheap)."""


def __getattr__(name: str) -> Any:
    module = _HOMES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # found once
    return value
