"""Core's compute view as lines for :class:`~miles_tui.tui.widgets.heat_rows.HeatRows`: pure formatting, no state.

Every function takes core values and returns :class:`HeatRow` values (or
Text); nothing here is computed beyond turning numbers into cells, and every
state that colour shows is also spelled out in text (DEAD, stale, open, live,
panned), so the screen reads under NO_COLOR. Each lane is three lines: its
utilisation, its own phase per bin (each phase its own character:
:data:`PHASE_MARKS`, ``·`` for ``train_wait``; the phase rows above carry the
same characters as a legend) and its memory.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Sequence
from typing import Final, overload

import numpy as np
from rich.style import Style
from rich.text import Text

from miles_tui.core.analysis import ComputeView, FleetSummary, LaneHealth, Liveness
from miles_tui.core.analysis.engine_lanes import EngineActivity
from miles_tui.core.base.inert_text import inert
from miles_tui.core.telemetry import BandKey, Frame, Lane, PhaseBand
from miles_tui.tui.formatting import MISSING, cadence, duration, fixed, memory, share_text, util_text
from miles_tui.tui.renderers.heat_strip import time_axis
from miles_tui.tui.views.heat_row import HeatRow

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

PHASE_MARKS: Final = {"actor_train": "█", "rollout": "▓", "update_weights": "▒", "eval": "▚", "train_wait": "·"}
"""The character a phase draws in a lane's phase line: a GPU waiting (``train_wait``) is dotted, not a bar."""

MORE_MARKS: Final = ("▞", "▀", "▄", "▌", "▐", "▖")

MEMORY_STYLES: Final = (Style(color="#5f87af"),)
"""Memory strips in one colour (their height is the level), so they never read as a utilisation heat strip."""

LANE_LINES: Final = 3
"""Lines per lane: utilisation, phases, memory."""

ALARM: Final = "bold reverse red"
"""Dead lanes and nodes: reverse video, so it stays loud when NO_COLOR turns red into grey."""

LIVENESS_STYLE: Final = {Liveness.DEAD: "bold red", Liveness.NEVER: "bold red", Liveness.STALE: "yellow"}


def lane_label(lane: Lane) -> str:
    """``node:gpu`` (the node name as the run wrote it, made inert)."""
    return inert(f"{lane[0]}:{lane[1]}")


def age_width(view: ComputeView) -> int:
    """Cells the age column needs for every lane of ``view``."""
    return max([AGE_WIDTH, *(len(duration(h.age, padded=True)) for h in view.health)])


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
    suffix.append(f"{duration(health.age, padded=True):>{ages}}", style=loud)
    if state is Liveness.DEAD or state is Liveness.NEVER:
        suffix.append(" ")
        suffix.append("DEAD", style=ALARM)
    elif state is Liveness.STALE:
        suffix.append(" stale", style="yellow")
    return HeatRow(lane, label, util, suffix)


def phase_mark(name: str, index: int) -> str:
    """The character of a phase (``index``: its place among the window's bands, for unfamiliar names)."""
    return PHASE_MARKS.get(name, MORE_MARKS[index % len(MORE_MARKS)])


def legend(bands: Sequence[PhaseBand]) -> dict[BandKey, tuple[str, Style]]:
    """(role, name) -> the mark and style its phase draws with, for the window's bands."""
    return {(b.role, b.name): (phase_mark(b.name, i), phase_styles(b.name, i)[0]) for i, b in enumerate(bands)}


def lane_phase_row(
    lane: Lane, kinds: np.ndarray, shares: Sequence[tuple[int, float]], looks: Sequence[tuple[str, Style]]
) -> HeatRow:
    """``  phases  [a mark per bin]  █50% ·40% ▒10%``: the lane's phase in each bin, each phase's share
    (``shares``: (band id, share), largest first)."""
    suffix = Text()
    for band, share in shares[:6]:  # what fits the column: the largest
        mark, style = looks[band]
        suffix.append(" " if suffix else "")
        suffix.append(f"{mark}{share_text(share)}", style=style)
    if not suffix:
        suffix = Text("no phases", style="dim")
    marks = tuple(mark for mark, _ in looks)
    styles = tuple(style for _, style in looks)
    return HeatRow(("phases", lane), Text("  phases", style="dim"), None, suffix, styles=styles, kinds=kinds,
                   marks=marks)  # fmt: skip


def lane_memory_row(lane: Lane, mem_mb: np.ndarray, peak: float, scale: float) -> HeatRow:
    """``  memory  [strip]  peak 58.6G █=58.8G``: a full cell is the largest lane's peak in the window."""
    suffix = Text(f"peak {memory(peak)}")
    if math.isfinite(scale) and scale > 0:
        suffix.append(f" █={memory(scale)}", style="dim")
    ok = math.isfinite(scale) and scale > 0
    label = Text("  memory", style="dim")
    return HeatRow(("memory", lane), label, mem_mb, suffix, scale if ok else 1.0, MEMORY_STYLES)


class LaneRows(Sequence[HeatRow]):
    """The picked lanes of a view as rows (:data:`LANE_LINES` a lane), each built when first drawn: 512 lanes
    cost what the visible ones do."""

    lines: int = LANE_LINES
    """Lines per lane."""

    def __init__(self, view: ComputeView, picked: Sequence[int]) -> None:
        self.view = view
        self.picked = tuple(picked)
        grid = view.grid
        self._mem = grid.latest(grid.mem_mb)
        self._peak = grid.peak(grid.mem_mb)
        finite = self._peak[np.isfinite(self._peak)]
        self._scale = float(finite.max()) if len(finite) else math.nan
        known = legend(view.bands)
        self._looks = tuple(known.get(key, ("?", Style())) for key in view.lane_phases.bands)
        self._ages = age_width(view)
        self._made: dict[int, HeatRow] = {}

    def __len__(self) -> int:
        return self.lines * len(self.picked)

    @overload
    def __getitem__(self, index: int) -> HeatRow: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[HeatRow]: ...

    def __getitem__(self, index: int | slice) -> HeatRow | Sequence[HeatRow]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        row = self._made.get(index)
        if row is None:
            row = self._made[index] = self._make(*divmod(index, self.lines))
        return row

    def _make(self, position: int, line: int) -> HeatRow:
        i = self.picked[position]
        grid, view = self.view.grid, self.view
        lane = grid.lanes[i]
        if line == 0:
            return lane_row(
                lane, grid.util[i], float(grid.mean_util[i]), float(self._mem[i]), view.health[i], self._ages
            )
        if line == 1:
            phases = view.lane_phases
            return lane_phase_row(lane, phases.dominant[i], phases.shares(i), self._looks)
        return lane_memory_row(lane, grid.mem_mb[i], float(self._peak[i]), self._scale)


def phase_styles(name: str, index: int) -> tuple[Style, ...]:
    """One colour for every level of a phase band."""
    color = PHASE_COLORS.get(name, MORE_COLORS[index % len(MORE_COLORS)])
    return (Style(color=color),)


def phase_row(band: PhaseBand, index: int) -> HeatRow:
    """``█ name  [share of each bin]  role ×ranks (open)``: the mark is what the lanes' phase lines draw."""
    suffix = Text(f"{inert(band.role or '?')} ×{len(band.ranks)}", style="dim")
    if band.open:
        suffix.append(f"  {band.open} open", style="cyan")
    share = np.where(band.share > 0, band.share, np.nan)  # not in the phase at all: blank, not a low bar
    styles = phase_styles(band.name, index)
    label = Text.assemble((phase_mark(band.name, index), styles[0]), " ", inert(band.name))
    return HeatRow(("phase", band.role, band.name), label, share, suffix, 1.0, styles)


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


FAR_BACK_SECONDS: Final = 86400.0
FAR_BACK_WINDOWS: Final = 4.0
"""A panned window ending further back than this (and than this many of its own lengths) has an axis counted
from its own end, named by its date and time (UTC)."""


def axis_row(view: ComputeView, width: int) -> HeatRow:
    """The time axis under the strips (counted back from now, or from the end of a stopped run's data), with
    the suffix columns' headings."""
    frame = view.frame
    bins = view.grid.bins
    back = view.now - bins.until
    if frame.live:
        end, ref = ("end" if frame.anchored_to_data else "now"), None
    elif back > max(FAR_BACK_SECONDS, FAR_BACK_WINDOWS * (bins.until - bins.since)):
        # far from now: offsets from now would all read alike (-104d02h); count back from the window's end,
        # which is named by its date
        end, ref = time.strftime("%m-%d %H:%M", time.gmtime(bins.until)), None
    else:
        end, ref = f"-{duration(back)}", view.now
    ticks = Text()
    for part in re.split(r"( +)", time_axis(bins.since, bins.until, width, end, ref)):
        ticks.append(part, style="" if part.startswith(" ") else "bold")  # a style per label: each is placed alone
    headings = Text(f"{'util':>4} {'mem':>6} {'age':>{age_width(view)}}", style="bold")
    return HeatRow("axis", Text(""), None, headings, text=ticks)


def window_name(span: float | None, live: bool = True) -> str:
    """``last 15m`` / ``15m`` (panned) / ``whole run``."""
    if span is None:
        return "whole run"
    return f"last {duration(span)}" if live else duration(span)


def clock_range(since: float, until: float) -> str:
    """``10:21:40–10:36:40 UTC`` (with the dates when the window crosses a day)."""
    day = time.gmtime(since)[:3] != time.gmtime(until)[:3] or until - since >= 86400
    pattern = "%m-%d %H:%M" if day else "%H:%M:%S"
    return f"{time.strftime(pattern, time.gmtime(since))}–{time.strftime(pattern, time.gmtime(until))} UTC"


def window_text(frame: Frame, now: float) -> Text:
    """The window: its length, live or panned (spelled out: it must read without colour), and its times."""
    text = Text(f" · {window_name(frame.window.span, frame.live)} · ")
    if not frame.live:
        text.append(f"PANNED, ends {duration(now - frame.until, padded=True)} ago (0: live)", style="bold yellow")
    elif frame.anchored_to_data:  # following, but nothing came lately: not "live" (a trial read 103 days as live)
        text.append(f"ends at the last sample, {duration(now - frame.until, padded=True)} ago", style="yellow")
    else:
        text.append("live", style="green")
    text.append(f" · {clock_range(frame.since, frame.until)}")
    return text


def title(view: ComputeView, picked: str) -> Text:
    """Window, dead nodes (early: they must survive a narrow terminal), fleet size, sampling, the lane list."""
    grid = view.grid
    text = Text()
    text.append("Compute", style="bold")
    text.append_text(window_text(view.frame, view.now))
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
        text.append(f" · every {cadence(view.interval)}")
    if view.resolution:
        text.append(f" · {duration(view.resolution, minutes=True)} buckets", style="dim")
    text.append(f" · {inert(picked)}", style="dim")
    return text


def lanes_text(lanes: Sequence[tuple[str, int]]) -> str:
    """``10.0.0.1:0-3 10.0.0.2:0,2``: the GPUs of each node, runs of consecutive GPUs as ranges (made inert)."""
    by_node: dict[str, list[int]] = {}
    for node, gpu in lanes:
        by_node.setdefault(node, []).append(gpu)
    parts = []
    for node, gpus in by_node.items():
        runs: list[list[int]] = []
        for gpu in sorted(gpus):
            if runs and gpu == runs[-1][-1] + 1:
                runs[-1].append(gpu)
            else:
                runs.append([gpu])
        spans = ",".join(f"{r[0]}-{r[-1]}" if len(r) > 2 else ",".join(map(str, r)) for r in runs)
        parts.append(f"{inert(node)}:{spans}")
    return " ".join(parts)


def engine_row(activity: EngineActivity, scale: float) -> HeatRow:
    """``⚙ engine  [running requests per bin]  run N · its GPUs``: an engine's load over the GPU lanes that
    serve it (a full cell: the busiest engine's peak, ``scale``)."""
    name = activity.addr.split("://", 1)[-1] if activity.addr else "(no address)"
    suffix = Text(f"run {MISSING if activity.latest is None else fixed(activity.latest, 0)}", style="bold")
    suffix.append(f" · {lanes_text(activity.lanes) or 'no GPU in topology'}", style="dim")
    label = Text(f"⚙ {inert(name)}", style="bold")
    return HeatRow(("engine", activity.addr), label, activity.running, suffix, max(scale, 1.0))
