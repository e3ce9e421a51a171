"""The advisory log's rows, and where an advisory without a step leads: pure formatting, no state.

Contract: :data:`LOG_COLUMNS` and :func:`log_cells` say how a core ``LoggedAdvisory`` reads in the log
(level, code, active or "cleared at step N", first and last step and time, how often it was seen, the
message); :func:`view_of` names the view that shows what an advisory about the telemetry is about (the
engines for an engine rule, the GPUs for a stalled phase, the metrics for MFU), or None.
"""

from __future__ import annotations

from rich.text import Text

from miles_tui.core.analysis.advisory_log import LoggedAdvisory
from miles_tui.core.base.inert_text import inert
from miles_tui.tui.formatting import LEVEL_STYLE, LEVEL_TAG, MISSING, date_time
from miles_tui.tui.views.table_layout import Column

LOG_COLUMNS = (
    Column("level", "level", 6, "left", pinned=True),
    Column("code", "advisory", 22, "left", grow=32, pinned=True),
    Column("state", "state", 18, "left"),
    Column("message", "message", 40, "left"),
    Column("first_step", "first step", 10),
    Column("last_step", "last step", 9),
    Column("count", "seen", 5),
    Column("first_seen", "first seen", 20, "left"),
    Column("last_seen", "last seen", 20, "left"),
)

ENGINE_CODES = frozenset(
    {"engine_abort_storm", "kv_cache_pool_bound", "kv_cache_high", "low_concurrency", "low_prefix_cache_hit",
     "dp_imbalance"}
)  # fmt: skip
VIEW_OF_CODE = {**dict.fromkeys(ENGINE_CODES, "engines"), "stalled_phase": "compute", "low_mfu": "metrics"}
"""The global view (an app action) that shows what a telemetry advisory is about."""


def view_of(code: str) -> str | None:
    """The app action (``engines``, ``compute``, ``metrics``) of the view an advisory leads to, or None."""
    return VIEW_OF_CODE.get(code)


def _step(step: int | None) -> str:
    return MISSING if step is None else str(step)


def state_text(entry: LoggedAdvisory) -> Text:
    """``active``, or ``cleared at step N`` (dim): legible without colour."""
    if entry.active:
        return Text("active", style="bold")
    if entry.cleared_at is None:
        return Text("cleared", style="dim")
    return Text(f"cleared at step {entry.cleared_at}", style="dim")


def log_cells(entry: LoggedAdvisory) -> tuple[Text, ...]:
    """One log row."""
    advisory = entry.advisory
    style = "" if entry.active else "dim"
    return (
        Text(f"[{LEVEL_TAG[advisory.level]}]", style=LEVEL_STYLE[advisory.level] if entry.active else "dim"),
        Text(inert(advisory.code), style=style),
        state_text(entry),
        Text(inert(advisory.message), style=style),
        Text(_step(entry.first_step), style=style),
        Text(_step(entry.last_step), style=style),
        Text(str(entry.count), style=style),
        Text(date_time(entry.first_seen), style=style),
        Text(date_time(entry.last_seen), style=style),
    )
