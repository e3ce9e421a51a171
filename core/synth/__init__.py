"""Writing dumps: miles' writer rules, a torch.save-compatible archive writer, the demo run."""

from __future__ import annotations

from typing import TYPE_CHECKING

from miles_tui.core.base.lazy_exports import lazy_getattr, public_names

if TYPE_CHECKING:
    from miles_tui.core.synth.demo_cleanup import claim_demo_dir as claim_demo_dir
    from miles_tui.core.synth.demo_cleanup import make_temp_demo as make_temp_demo
    from miles_tui.core.synth.demo_cleanup import remove_temp_demo as remove_temp_demo

_EXPORTS = {
    "demo_cleanup": ("claim_demo_dir", "make_temp_demo", "remove_temp_demo"),
}
"""Each submodule and the public names it defines, imported on first use (importing the package stays cheap)."""

__all__ = public_names(_EXPORTS)  # noqa: PLE0605 (derived: the TYPE_CHECKING block re-exports for mypy)
__getattr__ = lazy_getattr(__name__, _EXPORTS)
