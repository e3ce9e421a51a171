"""The headless ``export`` output: plain JSON-ready dicts and CSV text.

Contract: the shapes of ``../shared/spec/cli.md``, exactly; keys may be added,
never renamed or dropped. Values are raw (None for a value that does not
exist, never 0 or NaN). Reading goes through :class:`core.run.Run`, and the
metric series through :class:`core.streams.DashboardReader`.
"""

from __future__ import annotations

import csv
import io
import math
import os
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from core.run import Run
from core.run_dir import RunDir
from core.step_summary import ROW_COLUMNS, StepSummary

if TYPE_CHECKING:
    from core.metrics import MetricStore
    from core.step import OpenStep

# Modules that need numpy are imported where they are used: a step export served
# from the summary cache never imports numpy (nor the dump reader).


def clean(value: Any) -> Any:
    """Replace non-finite floats by None, recursively, so the JSON is strict."""
    # Finite floats, ints and None are by far the most common items: kept without a call.
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {
            k: v if v is None or type(v) is int or (type(v) is float and math.isfinite(v)) else clean(v)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [
            v if v is None or type(v) is int or (type(v) is float and math.isfinite(v)) else clean(v) for v in value
        ]
    return value


def step_list(run: Run, now: float) -> dict[str, Any]:
    """``{"train": [...], "eval": [...]}``: visible steps, ascending."""
    ids = run.step_ids(now)
    return {"train": list(ids.train), "eval": list(ids.evaluation)}


def metrics_export(run_dir: Path, keys: list[str] | None, x_key: str | None) -> dict[str, Any]:
    """The ``--metrics [KEY ...] [--x STEP_KEY]`` document, read once from ``RUN_DIR/dashboard/``.

    A run without a dashboard folder has no metrics: ``{"metrics": {}}`` (a named
    key still gets its empty lists, as for any key never logged). A missing or
    unusable RUN_DIR raises :class:`~core.errors.RunDirError`.
    """
    from core.metrics import export_metrics

    document: dict[str, Any] = clean(export_metrics(_metric_store(run_dir), keys, x_key))
    return document


def write_metrics_export(run_dir: Path, keys: list[str] | None, x_key: str | None, out: IO[bytes]) -> None:
    """:func:`metrics_export`'s document written to ``out`` as it is built (:mod:`core.metric_export`)."""
    from core.metric_export import write_metrics

    write_metrics(_metric_store(run_dir), keys, x_key, out)


def _metric_store(run_dir: Path) -> MetricStore:
    """metrics.jsonl read once: worker processes decode it, the user cache keeps its columns."""
    dashboard = RunDir(run_dir).dashboard_dir
    from core.streams import DashboardReader

    reader = DashboardReader(dashboard, parse_workers=os.cpu_count() or 1)
    if dashboard.is_dir():
        reader.poll()
    return reader.metrics


def _problems(summary: StepSummary) -> list[dict[str, Any]]:
    return [{"file": str(p.path), "kind": p.kind.value, "message": p.message} for p in summary.problems]


def _per_token(opened: OpenStep, sample_index: int) -> dict[str, Any]:
    """A sample's loss mask and resolved per-token arrays, as lists (None: blank)."""
    from core.resolve import PER_TOKEN_FIELDS

    train = opened.train_rows.get(sample_index)
    mask: Any = None
    if train is not None and train.loss_mask is not None:
        mask = train.loss_mask.tolist()
    elif opened.sample(sample_index).get("loss_mask") is not None:
        mask = [int(m) for m in opened.sample(sample_index)["loss_mask"]]
    values: dict[str, Any] = {"loss_mask": mask}
    for name in PER_TOKEN_FIELDS:
        array = None if train is None else train.per_token.get(name)
        values[name] = None if array is None else array.tolist()
    return values


def step_export(run: Run, rollout_id: int, evaluation: bool, now: float, per_token: bool = False) -> dict[str, Any]:
    """The ``--step N [--eval] [--per-token]`` document."""
    if per_token:
        opened = run.open(rollout_id, evaluation, now)
        summary = opened.summary
    else:
        summary = run.summary(rollout_id, evaluation, now)
    samples = []
    for row in summary.rows:
        record = row.to_dict()
        if per_token:
            record["per_token"] = _per_token(opened, row.sample_index)
        samples.append(record)
    document: dict[str, Any] = clean(
        {
            "rollout_id": summary.rollout_id,
            "evaluation": summary.evaluation,
            "samples": samples,
            "groups": [g.to_dict() for g in summary.groups],
            "aggregate": summary.aggregate.to_dict(),
            "complete": summary.complete,
            "problems": _problems(summary),
        }
    )
    return document


def tokens_export(
    run: Run,
    rollout_id: int,
    evaluation: bool,
    sample_index: int,
    now: float,
    start: int | None = None,
    end: int | None = None,
) -> dict[str, Any]:
    """The ``--sample I --tokens`` payload."""
    opened = run.open(rollout_id, evaluation, now)
    from core.token_view import find_view, token_payload

    view = find_view(opened, sample_index)
    payload: dict[str, Any] = clean(token_payload(view, run.detokenizer, start, end))
    return payload


def rows_csv(document: dict[str, Any]) -> str:
    """ROW columns of a step document as CSV, one line per sample (empty cell for null)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(ROW_COLUMNS)
    for sample in document["samples"]:
        cells = []
        for column in ROW_COLUMNS:
            value = sample.get(column)
            if value is None:
                cells.append("")
            elif isinstance(value, bool):
                cells.append("true" if value else "false")
            else:
                cells.append(str(value))
        writer.writerow(cells)
    return out.getvalue()
