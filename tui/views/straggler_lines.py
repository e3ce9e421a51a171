"""The GPU view's straggler tools as lines: power rows, the cursor on the axis, the point-in-time inspector.

Pure formatting of core values (:mod:`miles_tui.core.analysis.lane_grammar`,
:mod:`~miles_tui.core.analysis.slowest_phase`, :mod:`~miles_tui.core.telemetry.process_hours`), no state:
every string from the run (hosts, phase and process names) goes through :func:`inert`, and every state colour
shows is spelled out too.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Final

import numpy as np
from rich.style import Style
from rich.text import Text

from miles_tui.core.analysis import ComputeView
from miles_tui.core.analysis.slowest_phase import SlowLane
from miles_tui.core.base.inert_text import inert
from miles_tui.core.telemetry import Lane
from miles_tui.core.telemetry.process_hours import LaneProcesses
from miles_tui.tui.formatting import MISSING, memory, seconds_text, util_text, watts
from miles_tui.tui.views.compute_rows import LANE_LINES, LaneRows, lane_label
from miles_tui.tui.views.heat_row import HeatRow

POWER_STYLES: Final = (Style(color="#d7875f"),)
"""Power strips in one colour (their height is the level), apart from utilisation and memory."""

CURSOR_MARK: Final = "▼"


def power_row(lane: Lane, power_w: np.ndarray | None, peak: float, scale: float) -> HeatRow:
    """``  power  [strip]  peak 603W █=640W``: a full cell is the largest lane's peak in the window."""
    label = Text("  power", style="dim")
    if power_w is None:
        return HeatRow(("power", lane), label, None, Text("no power_w", style="dim"), text=Text(""))
    ok = math.isfinite(scale) and scale > 0
    suffix = Text(f"peak {watts(peak)}")
    if ok:
        suffix.append(f" █={watts(scale)}", style="dim")
    return HeatRow(("power", lane), label, power_w, suffix, scale if ok else 1.0, POWER_STYLES)


def _peaks(values: np.ndarray) -> np.ndarray:
    present = ~np.isnan(values)
    top = np.where(present, values, -np.inf).max(axis=1, initial=-np.inf)
    return np.where(present.any(axis=1), top, np.nan)


class PowerLaneRows(LaneRows):
    """:class:`LaneRows` with a fourth line a lane: its power draw."""

    lines = LANE_LINES + 1

    def __init__(self, view: ComputeView, picked: Sequence[int]) -> None:
        super().__init__(view, picked)
        power = view.grid.power_w
        self._power_peak = _peaks(power) if power is not None else None
        finite = self._power_peak[np.isfinite(self._power_peak)] if self._power_peak is not None else []
        self._power_scale = float(np.max(finite)) if len(finite) else math.nan

    def _make(self, position: int, line: int) -> HeatRow:
        if line < LANE_LINES:
            return super()._make(position, line)
        i = self.picked[position]
        power = self.view.grid.power_w
        peak = float(self._power_peak[i]) if self._power_peak is not None else math.nan
        return power_row(self.view.grid.lanes[i], None if power is None else power[i], peak, self._power_scale)


def cursor_cell(since: float, until: float, at: float, width: int) -> int | None:
    """The strip cell (0-based) that time ``at`` falls in, None outside the window."""
    if width <= 0 or not since <= at <= until or until <= since:
        return None
    return min(int((at - since) / (until - since) * width), width - 1)


def with_cursor(axis: HeatRow, cell: int | None) -> HeatRow:
    """The axis row with :data:`CURSOR_MARK` over the cursor's cell."""
    if cell is None or axis.text is None:
        return axis
    text = axis.text.copy()
    if text.cell_len <= cell:
        text.pad_right(cell + 1 - text.cell_len)
    marked = Text()
    marked.append_text(text[:cell])
    marked.append(CURSOR_MARK, style="bold reverse cyan")
    marked.append_text(text[cell + 1 :])
    return HeatRow(axis.key, axis.label, None, axis.suffix, text=marked)


def clock(ts: float) -> str:
    """``11:40:05 UTC``."""
    return time.strftime("%H:%M:%S UTC", time.gmtime(ts))


def inspector_lines(
    view: ComputeView,
    shown: Sequence[int],
    at: float,
    processes: Sequence[LaneProcesses] | None,
    written: bool = True,
) -> list[Text]:
    """What every shown lane was doing in the bin holding ``at``: util, memory, power, phase; then each lane's
    processes at the nearest ``gpu_processes`` snapshot (``processes``: None while being read; ``written``: False
    when the run has no such stream, said once)."""
    grid = view.grid
    bins = grid.bins
    where = int(bins.index(np.array([at]))[0])
    head = Text(f"at {clock(at)}", style="bold")
    if where < 0:
        head.append("  outside the window ([ ] move, esc: close)", style="yellow")
        return [head]
    start = bins.since + where * bins.width
    head.append(f"  bin {clock(start)} +{seconds_text(bins.width)}  ([ ] move, {{ }} ×10, esc: close)", style="dim")
    lines = [head]
    if not written:
        lines.append(Text("processes: this run wrote no gpu_processes/ (miles writes it with dashboard telemetry on)",
                          style="dim"))  # fmt: skip
    lines.append(Text(f"{'lane':<20} {'util':>5} {'mem':>7} {'power':>6}  phase", style="bold"))
    names = view.lane_phases.bands
    by_lane = {p.lane: p for p in processes or ()}
    for i in shown:
        lane = grid.lanes[i]
        band = int(view.lane_phases.dominant[i, where])
        phase = inert(str(names[band][1])) if 0 <= band < len(names) else MISSING
        power = grid.power_w[i, where] if grid.power_w is not None else math.nan
        lines.append(
            Text(
                f"{lane_label(lane)[:20]:<20} {util_text(float(grid.util[i, where])):>5} "
                f"{memory(float(grid.mem_mb[i, where])):>7} {watts(float(power)):>6}  {phase}"
            )
        )
        if written:
            lines += _process_lines(by_lane.get(lane), processes is None)
    return lines


def _process_lines(found: LaneProcesses | None, pending: bool) -> list[Text]:
    if pending:
        return [Text("    processes: reading gpu_processes…", style="dim")]
    if found is None or found.ts is None:
        return [Text("    processes: no gpu_processes snapshot near this time", style="dim")]
    out = [Text(f"    processes at {clock(found.ts)}:", style="dim")]
    for process in found.processes:
        pid = MISSING if process.pid is None else str(process.pid)
        name = inert(process.name or "?")
        out.append(Text(f"      {memory(process.mem_mb):>7}  pid {pid:<8} {name}"))
    if found.more:
        out.append(Text(f"      +{found.more} more", style="dim"))
    return out


def pick_lines(phase: str, picked: Sequence[SlowLane]) -> Text:
    """``slowest update_weights (mean span): 10.0.0.3:1 41.2s, …`` or what is missing."""
    text = Text(f"slowest {inert(phase)} (mean span, miles' pick): ", style="bold")
    if not picked:
        text.append("no closed span of it in the window", style="yellow")
        return text
    text.append(", ".join(f"{lane_label(p.lane)} {seconds_text(p.mean)}" for p in picked))
    return text
