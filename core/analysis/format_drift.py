"""Format drift is said: one advisory for the record fields whose shape this reader does not know.

Contract: :func:`unknown_formats` is a pure rule over a step summary's rows
(their ``unknown_format``, set by :mod:`miles_tui.core.dump.record_formats`);
it returns one warning for the step, naming the rollout file (relative to the
run), each field in a shape not recognised with how many samples hold it and
the columns that read "unknown format" instead of a value, and the run's
dashboard ``schema_version`` (:func:`schema_label`). The advisory carries no
path, so the advisory log keeps one entry for the run, seen at every step
that has it. Reads no files.
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
    """One warning for the step when some sample has a field in an unrecognised shape (``schema``:
    :func:`schema_label`), naming the file, each such field, its samples and the columns it leaves unknown."""
    counts: Counter[str] = Counter()
    first: int | None = None
    for row in summary.rows:
        if row.unknown_format:
            counts.update(row.unknown_format.split())
            first = row.sample_index if first is None else first
    if not counts:
        return []
    path = rollout_file(summary)
    fields = "; ".join(
        f"'{field}' of {count} sample{'s' if count != 1 else ''} ({', '.join(DERIVED_COLUMNS.get(field, ()))})"
        for field, count in counts.items()
    )
    message = (
        f"{path} (step {summary.rollout_id}) has records in a shape this miles-tui does not recognise "
        f"({schema}): {fields} read {UNKNOWN_FORMAT!r}, not a value. The run was likely written by a newer "
        "miles: update miles-tui"
    )
    # no path: the log keeps one entry for the run's format drift, seen at every step that has it
    return [Advisory(Level.WARNING, CODE, message, summary.rollout_id, summary.evaluation, first)]
