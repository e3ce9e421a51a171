"""``export --parquet DIR``: the per-sample table of every step and the telemetry columns, as Parquet files.

Contract:

- Writes ``DIR/samples.parquet`` (one row per sample of every visible step:
  ``rollout_id``, ``evaluation``, then the ROW columns of ``docs/cli.md`` in
  their order, steps ascending, train before eval at one id) and
  ``DIR/phases.parquet``, ``DIR/gpu_util.parquet``,
  ``DIR/engine_series.parquet`` (the fields of
  :data:`~miles_tui.core.commands.telemetry_export.FIELDS`, records in the window
  ``--since/--until``, every record without one), each written even when
  empty, so a query finds every table.
- Types: a ROW column is int64, float64, bool or string as its field is; a
  cell of an unrecognised record field is null (Parquet columns have one type)
  and ``unknown_format`` names the field. Telemetry numbers are float64 (a
  value that is not a number is null), names strings, GPU indices and ranks
  int64, ``gpus`` a list of int64, ``labels`` JSON text.
- Reading back equals ``export``'s JSON: ``export --step N`` rows (with the
  unknown-format cells nulled) and ``export --phases/--gpu/--engines``
  columns, value for value.
- pyarrow is an optional extra (``pip install 'miles-tui[parquet]'``);
  without it :func:`write_parquet` raises :class:`ParquetUnavailable` naming
  the extra. DIR must lie outside the run (nothing is written into a run).
- Steps that cannot be read are left out and returned as problems.
"""

from __future__ import annotations

import json
import os
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import numpy as np

from miles_tui.core.base.errors import MilesTuiError
from miles_tui.core.base.export_window import TimeBound
from miles_tui.core.commands.telemetry_export import FIELDS, read_window
from miles_tui.core.dump import ROW_COLUMNS, Run, SampleRow
from miles_tui.core.dump.record_formats import unknown_columns
from miles_tui.core.telemetry import TAG_INT
from miles_tui.core.telemetry.hours.columns import Columns
from miles_tui.core.telemetry.record_table import TAG_FLOAT

if TYPE_CHECKING:
    import pyarrow as pa


class ParquetUnavailable(MilesTuiError):
    """pyarrow, the optional extra ``--parquet`` writes with, is not installed."""


class OutputInsideRun(MilesTuiError):
    """The output folder lies inside the run, which miles-tui never writes to."""


SAMPLE_TABLE: Final = "samples"
"""The per-sample table's file stem."""


def _pyarrow() -> Any:
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError:
        raise ParquetUnavailable(
            "export --parquet needs pyarrow, an optional extra: pip install 'miles-tui[parquet]'"
        ) from None
    return pyarrow


def _row_type(pa: Any, annotation: str) -> Any:
    """The Arrow type of a ROW field from its annotation (``int``, ``float | None``, ``bool``, ``str | None``)."""
    base = annotation.split("|", maxsplit=1)[0].strip()
    return {"int": pa.int64(), "float": pa.float64(), "bool": pa.bool_(), "str": pa.string()}[base]


def sample_schema(pa: Any) -> pa.Schema:
    """``rollout_id``, ``evaluation``, then every ROW column with its type."""
    types = {f.name: _row_type(pa, str(f.type)) for f in fields(SampleRow)}
    return pa.schema(
        [("rollout_id", pa.int64()), ("evaluation", pa.bool_()), *((name, types[name]) for name in ROW_COLUMNS)]
    )


def sample_table(pa: Any, run: Run, now: float) -> tuple[pa.Table, list[MilesTuiError]]:
    """Every visible step's rows (steps ascending, train before eval), and the steps that could not be read."""
    ids = run.step_ids(now)
    steps = sorted([(rid, False) for rid in ids.train] + [(rid, True) for rid in ids.evaluation])
    columns: dict[str, list[Any]] = {name: [] for name in ("rollout_id", "evaluation", *ROW_COLUMNS)}
    problems: list[MilesTuiError] = []
    for rid, evaluation in steps:
        try:
            summary = run.summary(rid, evaluation, now)
        except MilesTuiError as err:
            problems.append(err)
            continue
        rows = [row.to_dict() for row in summary.rows]
        columns["rollout_id"] += [rid] * len(rows)
        columns["evaluation"] += [evaluation] * len(rows)
        for row in rows:  # a cell of an unrecognised field is null here: a Parquet column has one type
            for column in unknown_columns(row["unknown_format"]):
                row[column] = None
        for name in ROW_COLUMNS:
            columns[name] += [row[name] for row in rows]
    schema = sample_schema(pa)
    arrays = [pa.array(columns[field.name], type=field.type) for field in schema]
    return pa.Table.from_arrays(arrays, schema=schema), problems


def _shared(pa: Any, columns: Columns, field: str) -> Any:
    """A shared field as an Arrow array: the values its rows use, converted once, then taken by code (the
    value table is shared by every field of the stream, so only this field's values are converted)."""
    codes = columns.codes[field].astype(np.int64)
    used = np.unique(codes)
    table = [columns.values[code] for code in used.tolist()]
    if field == "labels":
        array = pa.array([None if v is None else json.dumps(v, separators=(",", ":")) for v in table], pa.string())
    elif field == "gpus":
        array = pa.array(table, pa.list_(pa.int64()))
    elif field in ("rank", "gpu"):
        array = pa.array(table, pa.int64())
    else:
        array = pa.array(table, pa.string())
    return array.take(pa.array(np.searchsorted(used, codes)))


def stream_table(pa: Any, columns: Columns, stream: str) -> pa.Table:
    """A stream's records as an Arrow table of :data:`FIELDS` (numbers float64: a non-number is null)."""
    arrays, names = [], []
    for field in FIELDS[stream]:
        if field in columns.codes:
            arrays.append(_shared(pa, columns, field))
        else:
            tags = columns.tags[field]
            number = (tags == TAG_FLOAT) | (tags == TAG_INT)
            values = np.where(number, columns.numbers[field], 0.0)
            finite = number & np.isfinite(values)
            arrays.append(pa.array(values, type=pa.float64(), mask=~finite))
        names.append(field)
    return pa.Table.from_arrays(arrays, names=names)


def _refuse_inside(run_dir: Path, out: Path) -> None:
    run_real, out_real = os.path.realpath(run_dir), os.path.realpath(out)
    if out_real == run_real or out_real.startswith(run_real.rstrip(os.sep) + os.sep):
        message = "the Parquet folder is inside the run, which miles-tui never writes to: pick another"
        raise OutputInsideRun(message, out)


def write_parquet(
    run_dir: Path, out: Path, now: float, since: TimeBound | None = None, until: TimeBound | None = None
) -> dict[str, Any]:
    """Write the four tables into ``out``; return ``{"dir", "tables": {NAME: {"path", "rows"}}, "problems"}``."""
    pa = _pyarrow()
    _refuse_inside(run_dir, out)
    out.mkdir(parents=True, exist_ok=True)
    tables: dict[str, Any] = {}
    samples, problems = sample_table(pa, Run(run_dir), now)
    tables[SAMPLE_TABLE] = samples
    for stream in FIELDS:
        window = read_window(run_dir, stream, since, until)
        problems += window.problems
        tables[stream] = stream_table(pa, window.columns, stream)
    written = {}
    for name, table in tables.items():
        path = out / f"{name}.parquet"
        tmp = out / f".{name}.parquet.{os.getpid()}.tmp"
        pa.parquet.write_table(table, tmp)
        os.replace(tmp, path)
        written[name] = {"path": str(path), "rows": table.num_rows}
    return {
        "dir": str(out),
        "tables": written,
        "problems": [{"file": None if p.path is None else str(p.path), "message": str(p)} for p in problems],
    }
