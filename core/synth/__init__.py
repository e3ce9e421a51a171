"""Writing dumps: miles' writer rules, a torch.save-compatible archive writer, the demo run."""

from miles_tui.core.synth.demo_cleanup import make_temp_demo, remove_temp_demo

__all__ = [
    "make_temp_demo",
    "remove_temp_demo",
]
