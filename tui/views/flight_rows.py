"""The GPU view's trajectory rows: samples generating, in a tool call and queued per bin, under the phases.

One heat row per state, its mark the batch anatomy's glyph, drawn on the window's bins to the peak of the
three (so their heights compare), the suffix the state's peak. Pure: core's :class:`InFlight` in, rows out.
"""

from __future__ import annotations

from typing import Final

import numpy as np
from rich.style import Style
from rich.text import Text

from miles_tui.core.analysis.trajectory_flight import InFlight
from miles_tui.core.telemetry.trajectory_lanes import GENERATING, QUEUE_STATE, TOOL_STATE
from miles_tui.tui.formatting import number
from miles_tui.tui.views.anatomy_rows import GLYPHS, STYLES
from miles_tui.tui.views.heat_row import HeatRow

STATES: Final = ((GENERATING, "generating"), (TOOL_STATE, "tool call"), (QUEUE_STATE, "queued"))


def flight_rows(flight: InFlight | None) -> list[HeatRow]:
    """Three rows, or none when the run recorded no trajectory events in the window's reach."""
    if flight is None or not flight.samples:
        return []
    peak = max(flight.peak, 1.0)
    rows = []
    for state, name in STATES:
        values = {GENERATING: flight.generating, TOOL_STATE: flight.tools, QUEUE_STATE: flight.queued}[state]
        label = Text.assemble((GLYPHS[state], STYLES[state]), f" {name}")
        top = float(values.max()) if len(values) else 0.0
        suffix = Text(f"samples, peak {number(top, 1)}", style="dim")
        drawn = np.where(values > 0, values, np.nan)  # none in the state: blank, not a low bar
        rows.append(HeatRow(("flight", name), label, drawn, suffix, peak, (Style.parse(STYLES[state]),)))
    return rows
