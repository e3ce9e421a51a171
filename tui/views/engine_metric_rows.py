"""Core's engine metrics as text: the metric list's entries, a metric's values, a chart's title and legend.

Pure formatting. Each engine (or DP rank) of a chart has a mark, the digit of
its place (``1``..``9``, then letters), which is also the key that shows or
hides it; a hidden one stays in the legend, dimmed and marked ``hidden``, so
the state reads under NO_COLOR. Names from the run are made inert.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from typing import Final

from rich.text import Text

from miles_tui.core.analysis.engine_metrics import ChartLine, EngineMetric, Kind, MetricChart
from miles_tui.core.base.inert_text import inert
from miles_tui.tui.formatting import MISSING, fixed, latency
from miles_tui.tui.views.engine_rows import engine_name, value_text

KIND_TITLES: Final[dict[Kind, str]] = {
    "gauge": "gauges, as scraped",
    "counter": "counters, per second",
    "latency": "means per interval (Δsum/Δcount)",
}
"""The metric list's group headings."""

MARKS: Final = "123456789abcdefghijklmnopqrstuvwxyz"
"""Each line's mark by its place; the first nine are also its show/hide key."""

LINE_COLORS: Final = (12, 10, 14, 13, 6, 5, 4, 2, 11, 9)
"""plotext colour numbers of the lines (cycled)."""


def mark(index: int) -> str:
    """The mark of line ``index`` (``·`` past the last mark)."""
    return MARKS[index] if index < len(MARKS) else "·"


def metric_value(metric: EngineMetric, value: float | None) -> str:
    """A value of ``metric``: a mean in ms or s, a rate per second, a gauge as the six panels write it."""
    if value is None or not math.isfinite(value):
        return MISSING
    if metric.kind == "latency":
        if metric.name.endswith(("_s", "_seconds_mean")):
            return latency(value)
        return value_text(metric.name, value)
    if metric.kind == "counter":
        return f"{value_text(metric.name, value)}/s" if abs(value) >= 10 else f"{fixed(value, 2)}/s"
    return value_text(metric.name, value)


def line_label(line: ChartLine, split: bool) -> str:
    """``rollout-alpha`` (and its other labels' values), or ``dp3`` on a chart of one engine's ranks."""
    if split and line.dp_rank is not None:
        return f"dp{inert(line.dp_rank)}"
    extra = "".join(f" {inert(value.strip(chr(34)))}" for _, value in line.labels)
    return engine_name(line.addr) + extra


def chart_title(chart: MetricChart, engines: int) -> Text:
    """``sglang_ttft_mean_s · 2 engines (d: DP ranks of one) · means per interval`` (or ``· DP ranks of
    rollout-alpha ·``): what is charted, whose lines, how it is derived (the part a narrow screen cuts)."""
    text = Text(inert(chart.metric.name), style="bold", no_wrap=True, overflow="ellipsis")
    if chart.ranks_of is not None:
        text.append(f" · DP ranks of {engine_name(chart.ranks_of)}")
    else:
        text.append(f" · {engines} engine{'s' if engines != 1 else ''} (d: DP ranks of one)")
    text.append(f" · {KIND_TITLES[chart.metric.kind]}", style="dim")
    return text


def legend(chart: MetricChart, hidden: Collection[int], width: int) -> Text:
    """``1 rollout-alpha 47  2 rollout-bravo hidden ...``: each line's mark, name and newest value, cut to
    ``width`` cells."""
    text = Text(no_wrap=True, overflow="ellipsis")
    split = chart.ranks_of is not None
    for index, line in enumerate(chart.lines):
        if index:
            text.append("  ")
        color = f"color({LINE_COLORS[index % len(LINE_COLORS)]})"
        if index in hidden:
            text.append(f"{mark(index)} {line_label(line, split)} hidden", style="dim strike")
            continue
        text.append(mark(index), style=f"bold {color}")
        text.append(f" {line_label(line, split)} ")
        text.append(metric_value(chart.metric, line.latest), style="bold")
    if not chart.lines:
        text.append("no engine exports this metric in the window", style="dim italic")
    text.truncate(width, overflow="ellipsis")
    return text


def list_heading(kind: Kind, count: int) -> Text:
    """A group heading of the metric list."""
    return Text(f"── {KIND_TITLES[kind]} ({count})", style="bold")


def list_entry(metric: EngineMetric, engines: int, ranks: int, width: int) -> Text:
    """``  sglang_ttft_mean_s   2 engines, 8 DP ranks  ← _sum/_count``: a metric of the list, cut to ``width``
    cells (the scraped names it is derived from give way first)."""
    text = Text("  " + inert(metric.name), no_wrap=True, overflow="ellipsis")
    where = f"{engines} engine{'s' if engines != 1 else ''}" + (f", {ranks} DP ranks" if ranks else "")
    text.append(f"  {where}", style="dim")
    if metric.kind != "gauge":
        text.append(f"  ← {' / '.join(inert(s) for s in metric.sources)}", style="dim")
    text.truncate(width, overflow="ellipsis")
    return text
