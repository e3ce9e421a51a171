"""Following a live run: the one join of dump and telemetry.

``run_follower``: :class:`RunFollower`, the telemetry streams and the run's state (open phases, attempts, data
age); ``steps``: :class:`StepFollower`, the step files (visibility, signatures, the summary queue, failures),
read by the monitor and by ``report`` alike; ``summary_queue`` and ``backfill`` (helper processes) serve it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from miles_tui.core.base.lazy_exports import lazy_getattr, public_names

if TYPE_CHECKING:
    from miles_tui.core.follow.run_follower import RunDelta as RunDelta
    from miles_tui.core.follow.run_follower import RunFollower as RunFollower
    from miles_tui.core.follow.run_follower import RunState as RunState
    from miles_tui.core.follow.steps import PollResult as PollResult
    from miles_tui.core.follow.steps import StepFollower as StepFollower

_EXPORTS = {
    "run_follower": ("RunDelta", "RunFollower", "RunState"),
    "steps": ("PollResult", "StepFollower"),
}
"""Each submodule and the public names it defines, imported on first use (importing the package stays cheap)."""

__all__ = public_names(_EXPORTS)  # noqa: PLE0605 (derived: the TYPE_CHECKING block re-exports for mypy)
__getattr__ = lazy_getattr(__name__, _EXPORTS)
