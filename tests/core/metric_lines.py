"""metrics.jsonl lines for decoder tests, and what json.loads makes of a block of them (the reference every
decoder is held to)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from miles_tui.core.base.tail import TailFile
from miles_tui.core.telemetry import MetricStore
from miles_tui.core.telemetry.metrics.metric_batch import BadLine, MetricBatch, check_value, decode_metric_record


def line(ts: Any, step_key: str, step: Any, **metrics: Any) -> bytes:
    """A record as json.dumps writes it (default separators)."""
    return json.dumps({"ts": ts, "step_key": step_key, "step": step, "metrics": metrics}).encode()


def reference(block: bytes) -> tuple[list[str], list[int]]:
    """The records json.loads keeps (as sorted JSON text: equal text means equal values with equal JSON types)
    and the offsets of the lines it skips, each line decoded alone (the tail's line rule)."""

    def checked(value: Any) -> Any:
        row = decode_metric_record(value)
        for part in (row[0], row[2], row[3]):
            check_value(part)
        return row

    rows, malformed = TailFile("x", checked)._decode_block(block, 0)
    records = [{"ts": ts, "step_key": key, "step": step, "metrics": dict(m)} for ts, key, step, m in rows]
    return [json.dumps(r, sort_keys=True) for r in records], [m.offset for m in malformed]


def as_text(batch: MetricBatch, bad: Sequence[BadLine]) -> tuple[list[str], list[int]]:
    """A decoder's batch and bad lines in :func:`reference`'s form (the records read back through a store)."""
    store = MetricStore()
    store.append_batch(batch)
    records = []
    for i in range(len(store)):
        r = store.record(i)
        records.append({"ts": r.ts, "step_key": r.step_key, "step": r.step, "metrics": dict(r.metrics)})
    return [json.dumps(r, sort_keys=True) for r in records], [b.offset for b in bad]
