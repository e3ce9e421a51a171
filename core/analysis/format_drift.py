"""Format drift is said: one advisory per step file and field whose shape this reader does not know.

Contract: :func:`unknown_formats` is a pure rule over a step summary's rows
(their ``unknown_format``, set by :mod:`miles_tui.core.dump.record_formats`);
it returns one warning per field, naming the rollout file (relative to the
run), the field, how many samples hold it, the run's dashboard
``schema_version`` (:func:`schema_label`) and the columns that read
"unknown format" instead of a value. Reads no files.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from miles_tui.core.analysis.advisories import Advisory, Level
from miles_tui.core.dump import StepSummary
from miles_tui.core.dump.record_formats import DERIVED_COLUMNS, UNKNOWN_FORMAT

CODE = "unknown_format"
"""The advisory's code."""


def schema_label(meta: Any) -> str:
    """``schema_version N`` from ``dashboard/meta.json`` (a run meta or None), or why there is none."""
    if meta is None:
        return "schema_version unknown (no dashboard/meta.json)"
    version = getattr(meta, "schema_version", None)
    if version is None:
        return "schema_version not recorded in dashboard/meta.json"
    return f"schema_version {str(version)[:20]} in dashboard/meta.json"


def rollout_file(summary: StepSummary) -> Path:
    """The step's rollout file, relative to the run (the name miles writes and the reader reads)."""
    name = f"eval_{summary.rollout_id}.pt" if summary.evaluation else f"{summary.rollout_id}.pt"
    return Path("rollout_data") / name


def unknown_formats(summary: StepSummary, schema: str) -> list[Advisory]:
    """One warning per field of the step's samples in an unrecognised shape (``schema``: :func:`schema_label`)."""
    counts: Counter[str] = Counter()
    first: dict[str, int] = {}
    for row in summary.rows:
        for field in (row.unknown_format or "").split():
            counts[field] += 1
            first.setdefault(field, row.sample_index)
    path = rollout_file(summary)
    out = []
    for field, count in counts.items():
        columns = ", ".join(DERIVED_COLUMNS.get(field, ()))
        samples = f"{count} sample{'s' if count != 1 else ''}"
        message = (
            f"{path}: '{field}' of {samples} in step {summary.rollout_id} has a shape this miles-tui does not "
            f"recognise ({schema}): {columns} read {UNKNOWN_FORMAT!r}, not a value. The run was likely written by "
            "a newer miles: update miles-tui"
        )
        out.append(Advisory(Level.WARNING, CODE, message, summary.rollout_id, summary.evaluation, first[field], path))
    return out
