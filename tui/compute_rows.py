"""Core's compute view as lines for :class:`~miles_tui.tui.widgets.heat_rows.HeatRows`: pure formatting, no state.

Every function takes core values and returns :class:`HeatRow` values (or
Text); nothing here is computed beyond turning numbers into cells, and every
state that colour shows is also spelled out in text (DEAD, stale, open), so
the screen reads under NO_COLOR.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Final, overload

import numpy as np
from rich.style import Style
from rich.text import Text

from miles_tui.core.analysis.compute_view import ComputeView, FleetSummary, LaneHealth, Liveness
from miles_tui.core.inert_text import inert
from miles_tui.core.telemetry.gpu_samples import Lane
from miles_tui.core.telemetry.phase_bands import PhaseBand
from miles_tui.tui.formatting import MISSING, age
from miles_tui.tui.renderers.heat_strip import short_span, time_axis
from miles_tui.tui.widgets.heat_rows import HeatRow

SUFFIX_WIDTH: Final = 24
"""The narrowest ``util   mem    age state`` column (wider when an age or a phase's role needs it)."""

AGE_WIDTH: Final = 6
"""The narrowest age column (``59m59s``); a longer age (``102d14h``) widens it."""

PHASE_COLORS: Final = {
    "rollout": "#e8a33d",
    "actor_train": "#54c06a",
    "train_wait": "#8a8f98",
    "update_weights": "#c678dd",
    "eval": "#4aa3df",
}
"""Familiar phases keep their colour across runs; others take the next of :data:`MORE_COLORS`."""

MORE_COLORS: Final = ("#4aa3df", "#e06c75", "#56b6c2", "#d19a66", "#98c379", "#c8ae5d")

ALARM: Final = "bold reverse red"
"""Dead lanes and nodes: reverse video, so it stays loud when NO_COLOR turns red into grey."""

LIVENESS_STYLE: Final = {Liveness.DEAD: "bold red", Liveness.NEVER: "bold red", Liveness.STALE: "yellow"}


def lane_label(lane: Lane) -> str:
    """``node:gpu`` (the node name as the run wrote it, made inert)."""
    return inert(f"{lane[0]}:{lane[1]}")


def memory(mem_mb: float) -> str:
    """MB as a short GiB figure."""
    if math.isnan(mem_mb):
        return MISSING
    return f"{mem_mb / 1024:.1f}G" if mem_mb >= 1024 else f"{mem_mb:.0f}M"


def util_text(value: float) -> str:
    """A utilisation percent, en dash for none."""
    return MISSING if math.isnan(value) else f"{value:.0f}%"


def age_width(view: ComputeView) -> int:
    """Cells the age column needs for every lane of ``view``."""
    return max([AGE_WIDTH, *(len(age(h.age)) for h in view.health)])


def suffix_width(view: ComputeView, rows: Sequence[HeatRow] = ()) -> int:
    """Cells the suffix column needs: a lane's ``util mem age state`` and every suffix of ``rows``."""
    lanes = 4 + 1 + 6 + 1 + age_width(view) + len(" stale")
    return max([SUFFIX_WIDTH, lanes, *(row.suffix.cell_len for row in rows if row.suffix is not None)])


def lane_row(
    lane: Lane, util: np.ndarray, mean_util: float, mem_mb: float, health: LaneHealth, ages: int = AGE_WIDTH
) -> HeatRow:
    """``node:gpu  [strip]  util mem age [DEAD]`` (``ages``: the age column's width)."""
    state = health.liveness
    loud = LIVENESS_STYLE.get(state, "")
    label = Text(lane_label(lane), style="bold white on red" if state in (Liveness.DEAD, Liveness.NEVER) else "")
    suffix = Text(f"{util_text(mean_util):>4} {memory(mem_mb):>6} ")
    suffix.append(f"{age(health.age):>{ages}}", style=loud)
    if state is Liveness.DEAD or state is Liveness.NEVER:
        suffix.append(" ")
        suffix.append("DEAD", style=ALARM)
    elif state is Liveness.STALE:
        suffix.append(" stale", style="yellow")
    return HeatRow(lane, label, util, suffix)


class LaneRows(Sequence[HeatRow]):
    """The picked lanes of a view as rows, each built when first drawn: 512 lanes cost what the visible ones do."""

    def __init__(self, view: ComputeView, picked: Sequence[int]) -> None:
        self.view = view
        self.picked = tuple(picked)
        self._mem = view.grid.latest(view.grid.mem_mb)
        self._ages = age_width(view)
        self._made: dict[int, HeatRow] = {}

    def __len__(self) -> int:
        return len(self.picked)

    @overload
    def __getitem__(self, index: int) -> HeatRow: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[HeatRow]: ...

    def __getitem__(self, index: int | slice) -> HeatRow | Sequence[HeatRow]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        row = self._made.get(index)
        if row is None:
            i = self.picked[index]
            grid = self.view.grid
            row = lane_row(
                grid.lanes[i],
                grid.util[i],
                float(grid.mean_util[i]),
                float(self._mem[i]),
                self.view.health[i],
                self._ages,
            )
            self._made[index] = row
        return row


def phase_styles(name: str, index: int) -> tuple[Style, ...]:
    """One colour for every level of a phase band."""
    color = PHASE_COLORS.get(name, MORE_COLORS[index % len(MORE_COLORS)])
    return (Style(color=color),)


def phase_row(band: PhaseBand, index: int) -> HeatRow:
    """``name  [share of each bin]  role ×ranks (open)``."""
    suffix = Text(f"{inert(band.role or '?')} ×{len(band.ranks)}", style="dim")
    if band.open:
        suffix.append(f"  {band.open} open", style="cyan")
    share = np.where(band.share > 0, band.share, np.nan)  # not in the phase at all: blank, not a low bar
    label = Text(inert(band.name))
    return HeatRow(("phase", band.role, band.name), label, share, suffix, 1.0, phase_styles(band.name, index))


def fleet_rows(fleet: FleetSummary) -> list[HeatRow]:
    """p90 / median / p10 of utilisation across lanes, and how many lanes sent no sample, per bin."""

    def overall(values: np.ndarray) -> str:
        finite = values[np.isfinite(values)]
        return util_text(float(np.median(finite))) if len(finite) else MISSING

    rows = []
    for name, values, note in (
        ("p90", fleet.p90, "top 10% above"),
        ("median", fleet.median, "across lanes"),
        ("p10", fleet.p10, "bottom 10% below"),
    ):
        label = Text(name, style="bold" if name == "median" else "dim")
        rows.append(HeatRow(("fleet", name), label, values, Text(f"{overall(values):>4} {note}", style="dim")))
    silent = fleet.silent.astype(np.float64)
    now = fleet.silent_now
    silent_now = Text(f"{now} of {fleet.lanes} now", style=ALARM if now else "dim")
    peak = float(silent.max()) if len(silent) else 0.0
    # Any silent lane draws tall: one lost GPU of 512 must not look like a full fleet.
    values = np.where(silent > 0, silent, np.nan)
    styles = (Style(color="red"),)
    rows.append(HeatRow(("fleet", "silent"), Text("silent", style="dim"), values, silent_now, max(peak, 1.0), styles))
    return rows


def axis_row(view: ComputeView, width: int) -> HeatRow:
    """The time axis under the strips, with the suffix columns' headings."""
    bins = view.grid.bins
    end = "end" if view.anchored_to_data else "now"
    ticks = Text()
    for part in re.split(r"( +)", time_axis(bins.since, bins.until, width, end)):
        ticks.append(part, style="" if part.startswith(" ") else "bold")  # a style per label: each is placed alone
    headings = Text(f"{'util':>4} {'mem':>6} {'age':>{age_width(view)}}", style="bold")
    return HeatRow("axis", Text(""), None, headings, text=ticks)


def window_name(span: float | None) -> str:
    """``last 15m`` / ``whole run``."""
    return "whole run" if span is None else f"last {short_span(span)}"


def title(view: ComputeView, picked: str) -> Text:
    """Window, dead nodes (first: they must survive a narrow terminal), fleet size, sampling, the lane list."""
    grid = view.grid
    text = Text()
    text.append("Compute", style="bold")
    text.append(f" · {window_name(view.span)}")
    if view.anchored_to_data:
        text.append(f" (ends at the last sample, {age(view.now - view.grid.bins.until)} ago)", style="yellow")
    dead = view.dead_nodes()
    if dead:
        worst = ", ".join(f"{inert(str(node))} ({n} GPU{'s' if n != 1 else ''})" for node, n in list(dead.items())[:3])
        more = f" +{len(dead) - 3} more" if len(dead) > 3 else ""
        text.append(" · ")
        text.append(f"DEAD: {worst}{more}", style=ALARM)
    elif view.health and all(h.liveness is Liveness.STALE for h in view.health):
        text.append(" · no samples from any lane lately", style="yellow")
    nodes = len({lane[0] for lane in grid.lanes})
    text.append(f" · {len(grid.lanes)} GPUs on {nodes} node{'s' if nodes != 1 else ''}")
    if view.interval:
        text.append(f" · every {short_span(view.interval)}")
    text.append(f" · {inert(picked)}", style="dim")
    return text
