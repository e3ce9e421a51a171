"""The metrics screen's text lines: the status line and the inspector's lines, from core values.

Pure formatters (values in, Rich Text out), so the screen only decides when
to show them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from rich.text import Text

from miles_tui.core.analysis import PointAt
from miles_tui.core.base.inert_text import inert
from miles_tui.core.telemetry import WandbLink, metric_meaning
from miles_tui.tui.formatting import MISSING, metric_value, significant, step_label, step_range


@dataclass(frozen=True)
class ChartView:
    """How every chart of the view is drawn."""

    smoothing: float = 0.0
    """EMA smoothing weight (weight of the past; 0: off)."""
    log_y: bool = False
    """Log-scaled y axis (non-positive values are gaps, counted in each chart's title)."""
    steps: tuple[tuple[str, float, float], ...] = ()
    """(step key, first, last) of the steps the charts logged against that key show (none: every step):
    ``+``/``-`` zoom, ``0`` every step. Each step key has its own window: a train step is not a rollout step."""

    def window(self, x_key: str) -> tuple[float, float] | None:
        """The steps a chart plotted against ``x_key`` shows (None: all)."""
        return next(((lo, hi) for key, lo, hi in self.steps if key == x_key), None)


Source = Literal["metrics", "dump", "none"]
"""Where the charted series come from: metrics.jsonl, the step dumps, or nowhere yet."""

NO_METRICS_NOTE = "this run has no dashboard/metrics.jsonl; showing dump-derived step figures"
NOTHING_YET_NOTE = "this run has no dashboard/metrics.jsonl and no step summaries yet: charts appear as they arrive"
INSPECTOR_HINT = (
    "←/→: a step cursor on every chart, with each chart's value at it · tab: select a chart, see what it means"
)
NO_MEANING_NOTE = "no description (not a key miles documents)"
"""What the inspector says of a selected key that has no traced description."""


def status_line(source: Source, shown: int, total: int, pattern: str, view: ChartView) -> Text:
    """``[dump note ·] 4/13 series · filter 'x' · y: log · smoothing: EMA 0.9``."""
    text = Text(no_wrap=True, overflow="ellipsis")
    if source == "dump":
        text.append(NO_METRICS_NOTE + " · ", style="yellow")
    text.append(f"{shown}/{total} series")
    if pattern:
        text.append(" · filter ")
        text.append(repr(pattern), style="bold")
    if view.steps:
        text.append(" · ")
        for i, (key, lo, hi) in enumerate(view.steps):
            text.append(", " if i else "")
            text.append(f"{inert(key)} ")
            text.append(step_range(lo, hi), style="bold")
        text.append(" (0: all)", style="dim")
    text.append(" · y: ")
    text.append("log" if view.log_y else "linear", style="bold" if view.log_y else "")
    text.append(" · smoothing: ")
    text.append(
        f"EMA {significant(view.smoothing, 6)}" if view.smoothing else "off", style="bold" if view.smoothing else ""
    )
    return text


def meaning_line(key: str) -> Text:
    """``train/loss  total loss: ...``: the selected key and what it means (core's line), or that it has none."""
    text = Text()
    text.append(inert(key), style="bold")
    text.append("  ")
    meaning = metric_meaning(key)
    if meaning is None:
        text.append(NO_MEANING_NOTE, style="dim italic")
    else:
        text.append(meaning)
    return text


def inspector_text(cursor: float | None, points: Mapping[str, PointAt | None], selected: str | None) -> Text:
    """The inspector: the selected chart's meaning line (when one is selected) above the cursor line."""
    line = inspector_line(cursor, points)
    if selected is None:
        return line
    return Text("\n").join([meaning_line(selected), line])


def inspector_line(cursor: float | None, points: Mapping[str, PointAt | None]) -> Text:
    """``step 42  train/loss 0.4612  eval/aime 0.31 @40 …``: each key's point at the cursor (or just before it)."""
    if cursor is None:
        return Text(INSPECTOR_HINT, style="dim")
    text = Text()
    text.append(f"step {step_label(cursor)}", style="bold reverse")
    for key, point in points.items():
        text.append("  ")
        text.append(inert(key), style="dim")
        text.append(" ")
        if point is None:
            text.append(MISSING, style="dim")
            continue
        text.append(metric_value(point.value), style="bold")
        if point.step != cursor:
            text.append(f" @{step_label(point.step)}", style="dim")
    return text


def wandb_line(link: WandbLink) -> Text:
    """``W&B run  https://wandb.ai/team/project/runs/id  · group g · W: copy``, or why there is no URL."""
    text = Text(no_wrap=True, overflow="ellipsis")
    if link.url is None:
        text.append(inert(link.note), style="yellow")
        return text
    text.append(inert(link.note), style="bold" if link.run_known else "yellow")
    text.append("  ")
    text.append(inert(link.url), style="underline")
    if link.group is not None:
        text.append(" · group ", style="dim")
        text.append(inert(link.group))
    text.append(" · W: copy", style="dim")
    return text
