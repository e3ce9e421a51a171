"""``engine_series`` columns as an :class:`~miles_tui.core.telemetry.engine_series.EngineTable`, with no record built.

Contract: :func:`engine_table` groups the samples by (metric, engine, labels) as
logged, in order of first appearance, each group's times and finite values in
file order: the table equals one built from the same lines' records (values
that are not finite numbers skipped and counted alike). Pure.
"""

from __future__ import annotations

import numpy as np

from miles_tui.core.telemetry.engine_series import EngineTable
from miles_tui.core.telemetry.hours.columns import Columns, dense_keys
from miles_tui.core.telemetry.record_table import TAG_INT


def engine_table(columns: Columns) -> EngineTable:
    """See the module docstring."""
    if not columns.size:
        return EngineTable(())
    value, tags = columns.numbers["value"], columns.tags["value"]
    finite = (tags <= TAG_INT) & np.isfinite(value)
    skipped = int(columns.size - finite.sum())
    rows = np.flatnonzero(finite)
    metric = columns.codes["metric"][rows].astype(np.int64)
    addr = columns.codes["addr"][rows].astype(np.int64)
    labels = columns.codes["labels"][rows].astype(np.int64)
    key = dense_keys(metric, addr, labels)
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    inverse = inverse.ravel()
    order = np.argsort(inverse, kind="stable")
    cuts = np.r_[0, np.cumsum(np.bincount(inverse, minlength=len(first)))]
    ts = columns.numbers["ts"][rows]
    values = columns.numbers["value"][rows]
    groups = []
    names = columns.values
    for group in np.argsort(first, kind="stable").tolist():
        picked = order[cuts[group] : cuts[group + 1]]
        row = int(picked[0])
        groups.append(
            (names[int(metric[row])], names[int(addr[row])], names[int(labels[row])], ts[picked], values[picked])
        )
    return EngineTable.from_groups(groups, skipped)
