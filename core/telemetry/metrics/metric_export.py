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
- ``helper=True`` (a long headless export, on Linux, with a second CPU and an
  output with a file descriptor): the keys alternate between this process and a
  forked helper process, each serializing its next key while the other writes
  its own; both write straight to the output's file descriptor, in key order,
  handing the turn over through pipes. The document is the same, byte for byte.
  A helper that stops before writing a key leaves that key and the rest to this
  process; one that stops while writing a key raises
  :class:`~miles_tui.core.base.errors.MilesTuiError` (the output is incomplete).
  An output closed by its reader raises ``BrokenPipeError`` from either process's
  write, as without a helper.
  The helper never returns into the caller's code: it ends with ``os._exit``.
- Never reads files; never formats a value for display.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import warnings
from collections.abc import Sequence
from typing import IO, Any

import numpy as np
import orjson

from miles_tui.core.base.errors import MilesTuiError
from miles_tui.core.base.json_out import clean
from miles_tui.core.telemetry.metrics.metric_store import MetricStore
from miles_tui.core.telemetry.metrics.metric_values import Values

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


class _Document:
    """The JSON of each key's entry in the document, made on demand."""

    def __init__(self, store: MetricStore, names: Sequence[str], x_key: str | None) -> None:
        self.store, self.names, self.x_key = store, names, x_key
        self.shared = _Shared()

    def key(self, index: int) -> list[bytes]:
        """``,"KEY":{...}`` (no comma before the first key)."""
        name = self.names[index]
        x = self.x_key if self.x_key is not None else self.store.default_x_key(name)
        selected = self.store.selection(name, x) if x is not None else None
        head = (b"," if index else b"") + _string_json(name) + b':{"x_key":' + _string_json(x)
        if selected is None:
            return [head, b',"step":[],"value":[],"ts":[]}']
        records, values = selected
        step_json, ts_json = self.shared.get(self.store, records)
        return [head, b',"step":', step_json, b',"value":', values_json(values), b',"ts":', ts_json, b"}"]


def write_metrics(
    store: MetricStore, keys: Sequence[str] | None, x_key: str | None, out: IO[bytes], *, helper: bool = False
) -> None:
    """Write ``{"metrics": {KEY: {x_key, step, value, ts}}}`` and a newline; see the module docstring."""
    document = _Document(store, list(dict.fromkeys(keys)) if keys else list(store.keys()), x_key)
    out.write(b'{"metrics":{')
    fd = _fileno(out) if helper and len(document.names) > 1 and sys.platform == "linux" else None
    if fd is not None:
        out.flush()
        _write_with_helper(document, fd)
    else:
        for index in range(len(document.names)):
            for part in document.key(index):
                out.write(part)
    out.write(b"}}\n")


def _fileno(out: IO[bytes]) -> int | None:
    try:
        return out.fileno()
    except (AttributeError, OSError, ValueError):  # BytesIO and the like
        return None


def _write_with_helper(document: _Document, fd: int) -> None:
    """Even keys here, odd keys in a forked helper; see the module docstring."""
    turns_r, turns_w = os.pipe()
    reports_r, reports_w = os.pipe()
    with warnings.catch_warnings():  # Python 3.12+ warns of fork beside threads: the helper starts none
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the helper: whatever happens, it ends here
        code = 1
        try:
            os.close(turns_w)
            os.close(reports_r)
            _helper(document, fd, turns_r, reports_w)
            code = 0
        finally:
            os._exit(code)
    os.close(turns_r)
    os.close(reports_w)
    try:
        _lead(document, fd, turns_w, reports_r)
    except BaseException:
        os.kill(pid, signal.SIGKILL)
        raise
    finally:
        os.close(turns_w)
        os.close(reports_r)
        os.waitpid(pid, 0)


def _helper(document: _Document, fd: int, turns: int, reports: int) -> None:
    for index in range(1, len(document.names), 2):
        parts = document.key(index)  # while the lead writes the key before it
        if os.read(turns, 1) != b"t":  # the lead stopped
            return
        os.write(reports, b"w")
        try:
            _write_all(fd, parts)
        except BrokenPipeError:  # the reader went away (``| head``): the lead says so as it would itself
            os.write(reports, b"p")
            return
        os.write(reports, b"d")


def _lead(document: _Document, fd: int, turns: int, reports: int) -> None:
    helping = True
    waiting: int | None = None  # the helper's key being written
    for index in range(len(document.names)):
        if index % 2 and helping:
            try:
                os.write(turns, b"t")
                waiting = index
                continue
            except BrokenPipeError:
                helping = False
        parts = document.key(index)  # while the helper writes the key before it
        if waiting is not None:
            helping = _helper_wrote(document, fd, reports, waiting)
            waiting = None
        _write_all(fd, parts)
    if waiting is not None:
        _helper_wrote(document, fd, reports, waiting)


def _helper_wrote(document: _Document, fd: int, reports: int, index: int) -> bool:
    """Wait until the helper has written key ``index``; write it here if it stopped first. False: it stopped."""
    if os.read(reports, 1) != b"w":
        _write_all(fd, document.key(index))
        return False
    done = os.read(reports, 1)
    if done == b"p":
        raise BrokenPipeError(f"the output was closed while the helper wrote {document.names[index]!r}")
    if done != b"d":
        name = document.names[index]
        raise MilesTuiError(f"the export's helper process stopped while writing {name!r}: the output is incomplete; "
                            "export again")  # fmt: skip
    return True


def _write_all(fd: int, parts: list[bytes]) -> None:
    for part in parts:
        view = memoryview(part)
        while view:
            view = view[os.write(fd, view) :]
