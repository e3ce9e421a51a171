"""Writing dumps: miles' writer rules, a torch.save-compatible archive writer, the demo run."""

from __future__ import annotations

from typing import TYPE_CHECKING

from miles_tui.core.lazy_exports import lazy_getattr

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

__getattr__ = lazy_getattr(__name__, _HOMES)
