"""``export --metrics`` written as a stream: the document of :func:`~.metrics.export_metrics`, fast.

Contract:

- :func:`write_metrics` writes to a binary stream the same JSON document as
  ``json.dumps(clean(export_metrics(store, keys, x_key)))`` (cli.md): the same
  keys in the same order, the same values with the same JSON types (an int is
  written as an int, a float as a float); NaN and ±Infinity are written as
  null. Numbers may be spelled differently (``1e-06`` as ``1e-6``), never
  valued differently.
- One key at a time: memory holds one key's arrays and their JSON, never the
  document. A column of plain floats or plain ints is serialized from its
  numpy array by orjson; a column holding anything else goes through a list
  (and ``json.dumps`` for what orjson refuses, like an int beyond 64 bits).
- The step and ts lists of keys logged in the same records are serialized once.
- Never reads files; never formats a value for display.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import IO, Any

import numpy as np
import orjson

from miles_tui.core.json_out import clean
from miles_tui.core.telemetry.metric_values import Values
from miles_tui.core.telemetry.metrics import MetricStore

_NUMPY = orjson.OPT_SERIALIZE_NUMPY


def values_json(values: Values) -> bytes:
    """A column as a JSON array: raw values, JSON types kept, non-finite floats as null."""
    if not values.raw:
        if values.ints is None:
            return orjson.dumps(values.num, option=_NUMPY)
        if bool(values.ints.all()):
            return orjson.dumps(values.num.astype(np.int64), option=_NUMPY)
    items = values.python()
    try:
        encoded = orjson.dumps(items)
    except (TypeError, orjson.JSONEncodeError):  # an int beyond 64 bits, a lone surrogate: the stdlib writes them
        return json.dumps(clean(items), allow_nan=False).encode()
    return encoded if _plain(encoded) else json.dumps(clean(items), allow_nan=False).encode()


def _plain(encoded: bytes) -> bool:
    """Printable ASCII only: orjson leaves DEL, C1 controls and bidi overrides as they are; the stdlib
    (``ensure_ascii``) escapes every non-ASCII character, so nothing from the run acts on a terminal."""
    return encoded.isascii() and b"\x7f" not in encoded


def _string_json(value: str | None) -> bytes:
    return json.dumps(value).encode()


class _Shared:
    """The JSON of the step and ts lists of the last few record selections."""

    def __init__(self, size: int = 4) -> None:
        self.size = size
        self.entries: list[tuple[np.ndarray[Any, Any], bytes, bytes]] = []

    def get(self, store: MetricStore, records: np.ndarray[Any, Any]) -> tuple[bytes, bytes]:
        for known, step_json, ts_json in self.entries:
            if len(known) == len(records) and np.array_equal(known, records):
                return step_json, ts_json
        steps, ts = store.steps_and_ts(records)
        found = (records, values_json(steps), values_json(ts))
        self.entries = [found, *self.entries[: self.size - 1]]
        return found[1], found[2]


def write_metrics(store: MetricStore, keys: Sequence[str] | None, x_key: str | None, out: IO[bytes]) -> None:
    """Write ``{"metrics": {KEY: {x_key, step, value, ts}}}`` and a newline; see the module docstring."""
    names = list(dict.fromkeys(keys)) if keys else list(store.keys())
    shared = _Shared()
    out.write(b'{"metrics":{')
    for index, name in enumerate(names):
        x = x_key if x_key is not None else store.default_x_key(name)
        selected = store.selection(name, x) if x is not None else None
        out.write(b"," if index else b"")
        out.write(_string_json(name) + b':{"x_key":' + _string_json(x))
        if selected is None:
            out.write(b',"step":[],"value":[],"ts":[]}')
            continue
        records, values = selected
        step_json, ts_json = shared.get(store, records)
        for part in (b',"step":', step_json, b',"value":', values_json(values), b',"ts":', ts_json, b"}"):
            out.write(part)
    out.write(b"}}\n")
