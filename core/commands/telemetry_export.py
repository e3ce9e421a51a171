"""``export --phases | --gpu | --engines``: a partitioned telemetry stream's records in a time window.

Contract:

- A record is in the window when its time is: a sample's ``ts``, a phase's
  end ``t1`` (its start ``t0`` while it is open, ``t1`` -1 as miles writes
  it); both bounds are inclusive, either may be open. A span bound (``30m``)
  counts back from the newest record of the stream, found by reading its
  newest hour only.
- Only the hourly partitions the window touches are read (and a flat
  ``{stream}.jsonl`` of an older run, which covers all time), each through
  :class:`~miles_tui.core.telemetry.hours.store.HourStore` and its cache
  entries: the cost follows the window, not the run's length.
- :func:`stream_export` gives the JSON document: ``{"stream", "since",
  "until", "newest", "count", "fields", "columns": {FIELD: [...]},
  "problems": [{"file", "offset", "message"}]}``, records in file order,
  values as the record has them (a list of GPUs, a dict of labels; a number
  that is not finite is null). :func:`records_csv` writes the same records as
  CSV, one line per record, lists and dicts as JSON text, every cell made
  formula-safe by :func:`miles_tui.core.commands.export.csv_cell`.
- Never writes into the run.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import numpy as np

from miles_tui.core.base.errors import MilesTuiError
from miles_tui.core.base.export_window import TimeBound, utc_text
from miles_tui.core.base.json_out import clean
from miles_tui.core.commands.export import csv_cell
from miles_tui.core.dump import RunDir
from miles_tui.core.telemetry import TAG_INT, TAG_NONE, TAG_OTHER
from miles_tui.core.telemetry.hours.columns import Columns
from miles_tui.core.telemetry.hours.store import HourStore

STREAMS: Final = {"phases": "phases", "gpu": "gpu_util", "engines": "engine_series"}
"""Export flag (``--phases``) -> the stream it exports."""

FIELDS: Final = {
    "phases": ("name", "t0", "t1", "node", "rank", "role", "gpus"),
    "gpu_util": ("ts", "node", "gpu", "util", "mem_mb", "power_w"),
    "engine_series": ("ts", "addr", "metric", "labels", "value"),
}
"""Each stream's exported fields, in column order."""


@dataclass(frozen=True)
class StreamWindow:
    """One stream's records in a window, as columns."""

    stream: str
    """``phases``, ``gpu_util`` or ``engine_series``."""
    since: float | None
    """The window's start (None: open)."""
    until: float | None
    """The window's end (None: open)."""
    newest: float | None
    """The newest record's time, when a span bound needed it (else None)."""
    columns: Columns
    """The records in the window, in file order."""
    problems: tuple[MilesTuiError, ...]
    """Malformed lines and unreadable files met in the partitions read."""
    files_read: tuple[Path, ...]
    """The partition files read (the window's hours, and a flat file)."""


def read_window(run_dir: Path, stream: str, since: TimeBound | None, until: TimeBound | None) -> StreamWindow:
    """The records of ``stream`` in the window, reading only the partitions it touches."""
    store = HourStore(RunDir(run_dir).dashboard_dir, stream)
    problems: list[MilesTuiError] = []
    newest = None
    if any(bound is not None and bound.back is not None for bound in (since, until)):
        problems += store.refresh(newest=True)
        span = store.span()
        newest = None if span is None else span[1]
    start = None if since is None else since.at(newest)
    end = None if until is None else until.at(newest)
    if start is not None and end is not None and start > end:
        raise MilesTuiError(
            f"--since/--until give an empty window of {stream} (it would start {utc_text(start)}"
            f" and end {utc_text(end)}): --until must be later than --since"
        )
    problems += store.refresh(start, end)
    columns = store.columns(start, end)
    times = columns.time()
    keep = np.ones(columns.size, dtype=bool)
    if start is not None:
        keep &= times >= start
    if end is not None:
        keep &= times <= end
    files = tuple(path for path, _hour, read in store.partitions() if read)
    return StreamWindow(stream, start, end, newest, columns.take(keep), tuple(problems), files)


def field_values(columns: Columns, field: str) -> list[Any]:
    """One field over every record, as the records have it, a number that is not finite as None (vectorised:
    no call per cell for numbers, each shared value cleaned once)."""
    if field in columns.codes:
        codes = columns.codes[field]
        used = np.unique(codes).tolist()
        table = dict(zip(used, clean([columns.values[code] for code in used]), strict=True))
        return [table[code] for code in codes.tolist()]
    numbers = columns.numbers[field]
    values: list[Any] = numbers.tolist()
    tags = columns.tags[field]
    for row in np.flatnonzero(tags == TAG_INT).tolist():
        values[row] = int(values[row])
    for row in np.flatnonzero((tags == TAG_NONE) | ((tags != TAG_OTHER) & ~np.isfinite(numbers))).tolist():
        values[row] = None
    for row in np.flatnonzero(tags == TAG_OTHER).tolist():
        values[row] = clean(columns.other[field][row])
    return values


def _problem(error: MilesTuiError) -> dict[str, Any]:
    return {"file": None if error.path is None else str(error.path), "offset": error.offset, "message": str(error)}


def stream_export(window: StreamWindow) -> dict[str, Any]:
    """The JSON document of one stream's window (see the module docstring)."""
    fields = FIELDS[window.stream]
    document: dict[str, Any] = {
        "stream": window.stream,
        "since": window.since,
        "until": window.until,
        "newest": window.newest,
        "count": window.columns.size,
        "fields": list(fields),
        "columns": {field: field_values(window.columns, field) for field in fields},
        "problems": [_problem(p) for p in window.problems],
    }
    return document


def _cell(value: Any) -> str:
    if isinstance(value, list | dict):
        return csv_cell(json.dumps(value, ensure_ascii=False, separators=(",", ":")))
    return csv_cell(value)


def records_csv(document: dict[str, Any]) -> str:
    """A stream document's records as CSV, one line per record (lists and dicts as JSON text; formula-safe)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    fields = document["fields"]
    writer.writerow(fields)
    columns = [document["columns"][field] for field in fields]
    for row in zip(*columns, strict=True):
        writer.writerow([_cell(value) for value in row])
    return out.getvalue()
