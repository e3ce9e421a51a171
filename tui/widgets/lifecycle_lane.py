"""A sample's lifecycle on the sample screen: its lane (queued, generating, tool calls, waiting, consumed) and
one line of totals, read from ``dashboard/trajectories/`` in a thread; "no trajectory recorded" without one.

The lane is the one its step's batch anatomy draws (:func:`~miles_tui.core.analysis.batch_anatomy.sample_lane`,
the same window and consume anchor), drawn over the widget's width by
:func:`~miles_tui.tui.views.anatomy_rows.sample_lane_lines`. An app with no telemetry follower (a test's bare app)
shows the "no trajectory" line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, cast

from rich.text import Text
from textual import work
from textual.widgets import Static

from miles_tui.core.analysis.batch_anatomy import consume_time, event_window, sample_lane
from miles_tui.core.base.inert_text import inert
from miles_tui.core.telemetry.trajectory_lanes import SampleLane
from miles_tui.tui.views.anatomy_rows import NO_TRAJECTORY, sample_lane_lines

if TYPE_CHECKING:
    from miles_tui.core.follow import RunFollower

STREAM: Final = "trajectories"


class LifecycleLane(Static):
    """One sample's lifecycle lane, two lines."""

    DEFAULT_CSS = """
    LifecycleLane { height: auto; max-height: 2; padding: 0 1; text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("", id=id)
        self.shown: tuple[int, int, SampleLane | None, float | None] | None = None
        """(step, sample, its lane, the consume anchor) as last read; None before."""
        self._key: tuple[int, bool, int] | None = None

    def show(self, rollout_id: int, evaluation: bool, sample_index: int) -> None:
        """Read and draw the lifecycle of ``sample_index`` of step ``rollout_id``."""
        self._key = (rollout_id, evaluation, sample_index)
        if evaluation:
            self.shown = (rollout_id, sample_index, None, None)
            self.update(Text(f"lifecycle: {NO_TRAJECTORY} (miles records none for eval samples)", style="dim"))
            return
        follower = cast("RunFollower | None", getattr(getattr(self.app, "watcher", None), "follower", None))
        if follower is None:
            self.shown = (rollout_id, sample_index, None, None)
            self._draw()
            return
        self._read(follower, rollout_id, sample_index)

    @work(thread=True, exclusive=True, group="lifecycle", exit_on_error=False)
    def _read(self, follower: RunFollower, rollout_id: int, sample_index: int) -> None:
        try:
            consumed = consume_time(follower.metrics, rollout_id)
            since, until = event_window(consumed)
            events = follower.dashboard.records(STREAM, since, until)
            lane = sample_lane(events, sample_index, consumed)
        except Exception as err:  # telemetry problems never take the screen down
            message = Text(f"lifecycle: cannot read the trajectory events: {inert(str(err))}", style="red")
            self.app.call_from_thread(self.update, message)
            return
        self.app.call_from_thread(self._read_done, rollout_id, sample_index, lane, consumed)

    def _read_done(self, rollout_id: int, sample_index: int, lane: SampleLane | None, consumed: float | None) -> None:
        if self._key is None or self._key[::2] != (rollout_id, sample_index):
            return  # another sample is shown now
        self.shown = (rollout_id, sample_index, lane, consumed)
        self._draw()

    def _draw(self) -> None:
        if self.shown is None:
            return
        rollout_id, _, lane, consumed = self.shown
        lines = sample_lane_lines(lane, consumed, rollout_id, max(self.size.width - 2, 20))
        self.update(Text("\n").join(lines))

    def on_resize(self) -> None:
        self._draw()
