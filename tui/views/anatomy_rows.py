"""A step's batch anatomy as text: each sample's lane drawn in characters on one time axis, its axis, legend
and the cells of its table row; and a sample's own lane (the sample screen's).

Each state has a glyph of its own (colour is a second cue, never the only one, so NO_COLOR still reads):
generating ``█``, tool call ``▒``, queued ``░``, after generation (reward, then waiting for the train step)
``·``; the column where the train step consumed the batch is ``│``. Pure: core's lanes in, Rich Text out.
"""

from __future__ import annotations

from typing import Final

from rich.text import Text

from miles_tui.core.analysis.batch_anatomy import AnatomyRow, BatchAnatomy
from miles_tui.core.telemetry.trajectory_lanes import (
    EMPTY,
    GENERATING,
    QUEUE_STATE,
    STALE_GENERATING,
    TOOL_STATE,
    WAITING,
    SampleLane,
    lane_cells,
    lane_totals,
)
from miles_tui.tui.formatting import MISSING, cell_text, duration, number
from miles_tui.tui.views.lazy_rows import TableRow
from miles_tui.tui.views.table_layout import Column

GLYPHS: Final = {
    EMPTY: " ", WAITING: "·", QUEUE_STATE: "░", TOOL_STATE: "▒", STALE_GENERATING: "▓", GENERATING: "█",
}  # fmt: skip
STYLES: Final = {
    EMPTY: "", WAITING: "dim", QUEUE_STATE: "#b8a98f", TOOL_STATE: "#1baf7a", STALE_GENERATING: "#c23b3b",
    GENERATING: "#d55816",
}  # fmt: skip
CONSUME_GLYPH: Final = "│"
CONSUME_STYLE: Final = "bold #2a78d6"
LEGEND: Final = (
    (GENERATING, "generating"),
    (STALE_GENERATING, "on older weights"),
    (TOOL_STATE, "tool call"),
    (QUEUE_STATE, "queued"),
    (WAITING, "reward · waiting for train"),
)
NO_TRAJECTORY: Final = "no trajectory recorded"
MIN_LANE: Final = 10
"""The lane column is never narrower than this."""
FIXED_COLUMNS: Final = (
    Column("sample", "sample", 7, pinned=True),
    Column("info", "turns·tools·reward", 18, justify="left", grow=24),
    Column("status", "status", 9, justify="left", grow=12),
)
"""The anatomy table's columns besides the lane (which goes second)."""


def consume_column(start: float, end: float, width: int, consumed: float | None) -> int | None:
    """The column of the consume line on [start, end] (None: not known, or off the axis)."""
    if consumed is None or width <= 0 or not end > start or not start <= consumed <= end:
        return None
    return min(width - 1, int((consumed - start) / (end - start) * width))


def lane_text(
    lane: SampleLane, start: float, end: float, width: int, consumed: float | None, newest: int | None = None
) -> Text:
    """``lane`` drawn on ``width`` columns of [start, end], the consume line over it; generation on a weight
    version older than ``newest`` drawn apart."""
    cells = lane_cells(lane, start, end, width, consumed, newest)
    mark = consume_column(start, end, width, consumed)
    text = Text(no_wrap=True, overflow="crop")
    run_state, run_length = -1, 0

    def flush() -> None:
        if run_length:
            text.append(GLYPHS[run_state] * run_length, STYLES[run_state])

    for column, state in enumerate(cells):
        if column == mark:
            flush()
            text.append(CONSUME_GLYPH, CONSUME_STYLE)
            run_state, run_length = -1, 0
            continue
        if state != run_state:
            flush()
            run_state, run_length = state, 0
        run_length += 1
    flush()
    return text


def axis_label(start: float, end: float, width: int) -> str:
    """The time axis over ``width`` columns: offsets from ``start`` (``+0s``, ``+30s``, ``+1m00s``) at
    round ticks, each at its column."""
    if width <= 0 or not end > start:
        return ""
    span = end - start
    rounds = (1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0)
    tick = next((s for s in rounds if span / s <= width / 9), span)
    line = [" "] * width
    t = 0.0
    while t <= span:
        label = "+" + duration(t, padded=True)
        column = int(t / span * width)
        if column + len(label) <= width and all(c == " " for c in line[max(column - 1, 0) : column + len(label)]):
            line[column : column + len(label)] = label
        t += tick
    return "".join(line).rstrip()


def legend_text() -> Text:
    """What each glyph means."""
    text = Text()
    for state, label in LEGEND:
        text.append(GLYPHS[state] * 2, STYLES[state])
        text.append(f" {label}   ")
    text.append(CONSUME_GLYPH, CONSUME_STYLE)
    text.append(" consumed by the train step")
    return text


def info_text(row: AnatomyRow) -> str:
    """``3t·2x·r=1.000``: turns, tool calls and reward, as miles' anatomy labels a lane."""
    parts = []
    if row.turns is not None:
        parts.append(f"{row.turns}t")
    if row.tool_calls:
        parts.append(f"{row.tool_calls}x")
    if row.reward is not None:
        parts.append(f"r={number(row.reward)}")
    return "·".join(parts) or MISSING


def status_of(row: AnatomyRow) -> str:
    """The sample's status: the lane's (its last attempt's), else the dump's; made a cell's text."""
    if row.lane is not None and row.lane.status:
        return cell_text(row.lane.status)
    if row.row is not None and row.row.status:
        return cell_text(row.row.status)
    return MISSING


def anatomy_columns(anatomy: BatchAnatomy, lane_width: int) -> tuple[Column, ...]:
    """The table's columns, the lane's header its time axis."""
    width = max(lane_width, MIN_LANE)
    header = MISSING
    if anatomy.start is not None and anatomy.end is not None:
        header = axis_label(anatomy.start, anatomy.end, width) or MISSING
    lane = Column("lane", header.ljust(width), width, justify="left")
    return (FIXED_COLUMNS[0], lane, *FIXED_COLUMNS[1:])


def anatomy_row(row: AnatomyRow, anatomy: BatchAnatomy, lane_width: int) -> TableRow:
    """One sample's row: its index, its lane (or why there is none), turns·tools·reward and its status."""
    width = max(lane_width, MIN_LANE)
    if row.lane is None or anatomy.start is None or anatomy.end is None:
        lane = Text(NO_TRAJECTORY, style="dim italic")
    else:
        lane = lane_text(row.lane, anatomy.start, anatomy.end, width, anatomy.consumed, anatomy.newest_version)
    cells = (Text(f"s{row.sample_index}"), lane, Text(info_text(row)), Text(status_of(row)))
    return TableRow(row.sample_index, cells, "dim" if row.lane is None else "")


def anatomy_title(anatomy: BatchAnatomy, sort: str) -> Text:
    """What the view shows: the step, how many samples have lanes, the window and the order."""
    text = Text(f"Batch anatomy · step {anatomy.rollout_id} · ", style="bold")
    text.append(f"{anatomy.lanes} of {len(anatomy.rows)} samples with a trajectory", style="")
    if anatomy.start is not None and anatomy.end is not None:
        text.append(f" · {duration(anatomy.end - anatomy.start, padded=True)} from first event to ", style="")
        text.append("consumed" if anatomy.consumed is not None else "last event", style="")
    text.append(f" · sorted by {sort}", style="")
    if anatomy.skipped:
        text.append(f" · {anatomy.skipped} events not miles' skipped", style="yellow")
    if anatomy.dropped:
        text.append(f" · {anatomy.dropped} events over a sample's cap not read", style="yellow")
    return text


def sample_lane_lines(lane: SampleLane | None, consumed: float | None, rollout_id: int, width: int) -> list[Text]:
    """The sample screen's lifecycle: its lane from its first event to the consume line, and one line of
    totals; ``no trajectory recorded`` when it has none."""
    if lane is None:
        return [Text(f"lifecycle: {NO_TRAJECTORY}", style="dim")]
    end = consumed if consumed is not None and consumed > lane.first_ts else lane.last_ts
    label = "lifecycle "
    drawn = max(width - len(label), MIN_LANE)
    head = Text(label, style="bold")
    if end > lane.first_ts:
        newest = lane.versions[-1] if lane.versions else None
        head.append_text(lane_text(lane, lane.first_ts, end, drawn, consumed, newest))
    else:
        head.append("(one instant)", style="dim")
    totals = lane_totals(lane)
    line = Text(" " * len(label))
    turns = "1 turn" if totals.turns == 1 else f"{totals.turns} turns"
    queued, generating = duration(totals.queued, padded=True), duration(totals.generating, padded=True)
    line.append(f"queued {queued} · generating {generating} in {turns}")
    if totals.tool_calls:
        calls = "1 tool call" if totals.tool_calls == 1 else f"{totals.tool_calls} tool calls"
        line.append(f" · {calls} {duration(totals.tools, padded=True)}")
    if lane.status:
        line.append(f" · {cell_text(lane.status)}")
    if len(lane.attempts) > 1:
        line.append(f" · {len(lane.attempts)} attempts", style="yellow")
    if consumed is not None:
        line.append(f" · consumed by step {rollout_id} after {duration(consumed - lane.first_ts, padded=True)}")
    return [head, line]
