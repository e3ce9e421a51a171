"""metrics.jsonl lines -> columns: the block decoder, and the columnar batch it returns.

Contract:

- :func:`decode_block` takes complete metrics.jsonl lines (bytes without the
  final newline) and the byte offset they start at, and returns a
  :class:`MetricBatch` of the valid records in file order, plus a
  :class:`BadLine` (offset, reason, first bytes) per malformed line. It reads
  no file and keeps no state, so a worker process can run it.
- Each line is decoded by msgspec against the record's shape. A line holding
  the ``NaN``/``Infinity``/``-Infinity`` literals miles writes with
  ``json.dumps`` (msgspec refuses them) is decoded by msgspec with each literal
  read as ``null`` and then set back, when that is provably what ``json.loads``
  gives (:func:`~miles_tui.core.telemetry.metrics.metric_line.nonfinite_line`). Any other line msgspec refuses (a lone
  surrogate, a BOM, a literal inside a string ...) is decoded with
  ``json.loads``, whose verdict stands: the result is always what
  ``json.loads`` gives.
- A record is what :func:`decode_metric_record` accepts, and two rules more:
  every integer in it fits a float64 (an integer of 309 digits does not), and
  no value nests deeper than :data:`MAX_DEPTH`. A line breaking either is
  malformed: never an error later, when the value is plotted or exported. A
  line with more than :data:`MAX_LINE_KEYS` metrics is malformed too: each key
  becomes a series (a 17 MB line of a million keys took 5.2 GB).
- Every value is kept with its JSON type (:class:`Values`): a float as a float,
  an integer as an integer, anything else (null, a bool, a string, a list, an
  object, an integer beyond 2**53) exactly as parsed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter, itemgetter
from typing import Any, Final, NamedTuple, overload

import msgspec
import numpy as np
import numpy.typing as npt
from msgspec.structs import astuple

from miles_tui.core.base.tail import _reason, is_utf8
from miles_tui.core.telemetry.metrics.metric_line import decode_line, nonfinite_line
from miles_tui.core.telemetry.metrics.metric_shapes import SHAPES, Shaped, Unshaped, names_of
from miles_tui.core.telemetry.metrics.metric_values import EMPTY_VALUES, EXACT, BoolArray, Values, int_flags, values_of

IndexArray = npt.NDArray[np.uint32]

MAX_DEPTH: Final = 64
"""Deepest nesting of lists and objects a value may have."""

MAX_LINE_KEYS: Final = 10_000
"""Most metrics one record may hold (miles logs a few hundred per line)."""

EXCERPT_BYTES: Final = 160

_metrics_of = attrgetter("metrics")

MetricRow = tuple[float, str, Any, Mapping[str, Any]]
"""One metrics.jsonl record as decoded: (ts, step_key, step, metrics)."""


class BadLine(NamedTuple):
    """A malformed line: where it starts, what is wrong, its first bytes."""

    offset: int
    reason: str
    excerpt: bytes


def decode_metric_record(value: Any) -> MetricRow:
    """Check one parsed metrics.jsonl line and return it as a row; raise ValueError/KeyError if it is not one."""
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object, got {type(value).__name__}")
    ts, step_key, metrics = value["ts"], value["step_key"], value["metrics"]
    if type(ts) not in (int, float):
        raise ValueError(f"field 'ts' is not a number: {ts!r}")
    if not isinstance(step_key, str):
        raise ValueError(f"field 'step_key' is not a string: {step_key!r}")
    if not isinstance(metrics, dict):
        raise ValueError("field 'metrics' is not an object")
    if len(metrics) > MAX_LINE_KEYS:
        raise ValueError(_too_many_keys(len(metrics)))
    return ts, step_key, value["step"], metrics


def _too_many_keys(count: int) -> str:
    return f"{count} metrics in one record, more than {MAX_LINE_KEYS}: each would become a series"


def check_value(value: Any) -> None:
    """Raise ValueError when ``value`` holds an integer float64 cannot hold or nests deeper than MAX_DEPTH."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        kind = type(item)
        if kind is int:
            if not -EXACT <= item <= EXACT:
                try:
                    float(item)
                except OverflowError:
                    raise ValueError(f"integer of {len(str(abs(item)))} digits: too big for a float64") from None
        elif kind is list or kind is dict:
            if depth >= MAX_DEPTH:
                raise ValueError(f"nested deeper than {MAX_DEPTH} levels")
            stack.extend((child, depth + 1) for child in (item.values() if kind is dict else item))


@dataclass(frozen=True)
class KeyPoints:
    """One metric's points in a batch."""

    records: IndexArray
    """Batch-local index of each point's record, ascending."""
    values: Values
    """Each point's value."""

    @staticmethod
    def merged(found: Sequence[tuple[npt.NDArray[np.integer[Any]], Values]]) -> KeyPoints:
        """One metric's points gathered from parts (record indices and values each), ordered by record."""
        if len(found) == 1:
            records, values = found[0]
        else:
            records = np.concatenate([r for r, _ in found])
            order = np.argsort(records, kind="stable")
            records, values = records[order], Values.concat([v for _, v in found]).take(order)
        return KeyPoints(records.astype(np.uint32, copy=False), values)


@dataclass(frozen=True)
class MetricBatch(Sequence[MetricRow]):
    """Consecutive metrics.jsonl records as columns (a sequence of rows for generic consumers)."""

    ts: Values
    """Each record's ts."""
    step: Values
    """Each record's step."""
    step_key: IndexArray
    """Each record's step key, an index into ``step_keys``."""
    step_keys: tuple[str, ...]
    """The step keys the records name."""
    keys: Mapping[str, KeyPoints]
    """Metric name -> its points, names in order of first appearance."""

    def __len__(self) -> int:
        return len(self.step_key)

    @overload
    def __getitem__(self, index: int) -> MetricRow: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[MetricRow]: ...
    def __getitem__(self, index: int | slice) -> MetricRow | Sequence[MetricRow]:
        if isinstance(index, slice):
            return tuple(self[i] for i in range(len(self))[index])
        if not -len(self) <= index < len(self):
            raise IndexError(index)
        index %= len(self)
        metrics: dict[str, Any] = {}
        for name, points in self.keys.items():
            at = int(np.searchsorted(points.records, index))
            if at < len(points.records) and points.records[at] == index:
                metrics[name] = points.values.value(at)
        return self.ts.value(index), self.step_keys[self.step_key[index]], self.step.value(index), metrics

    def __iter__(self) -> Iterator[MetricRow]:
        return (self[i] for i in range(len(self)))

    @staticmethod
    def concat(batches: Sequence[MetricBatch]) -> MetricBatch:
        """The records of ``batches`` one after the other."""
        batches = [b for b in batches if len(b)]
        if len(batches) == 1:
            return batches[0]
        names: dict[str, int] = {}
        step_key_parts = []
        for b in batches:
            remap = np.array([names.setdefault(name, len(names)) for name in b.step_keys], dtype=np.uint32)
            step_key_parts.append(remap[b.step_key] if len(remap) else b.step_key)
        parts: dict[str, list[tuple[IndexArray, Values]]] = {}
        base = 0
        for b in batches:
            for name, points in b.keys.items():
                parts.setdefault(name, []).append((points.records + np.uint32(base), points.values))
            base += len(b)
        return MetricBatch(
            ts=Values.concat([b.ts for b in batches]),
            step=Values.concat([b.step for b in batches]),
            step_key=np.concatenate(step_key_parts) if step_key_parts else np.zeros(0, np.uint32),
            step_keys=tuple(names),
            keys={
                name: KeyPoints(np.concatenate([r for r, _ in p]), Values.concat([v for _, v in p]))
                for name, p in parts.items()
            },
        )


EMPTY_BATCH: Final = MetricBatch(EMPTY_VALUES, EMPTY_VALUES, np.zeros(0, np.uint32), (), {})


def cut_lines(block: bytes, end: int, piece: int) -> list[tuple[int, int]]:
    """``block[:end]`` cut at line ends into (start, stop) pieces of about ``piece`` bytes: no newline inside a
    piece, each stop a newline or ``end`` (a trailing empty line, which holds no record, is left out)."""
    cuts: list[tuple[int, int]] = []
    start = 0
    while start < end:
        stop = block.find(b"\n", start + piece, end) if start + piece < end else -1
        stop = end if stop < 0 else stop
        cuts.append((start, stop))
        start = stop + 1
    return cuts


CHUNK_LINES: Final = 4096
"""Lines decoded and converted together: few enough that their objects stay in the CPU cache."""


def decode_block(block: bytes, base: int) -> tuple[MetricBatch, list[BadLine]]:
    """Decode complete lines starting at byte ``base``; see the module docstring."""
    lines = block.split(b"\n")
    parts: list[MetricBatch] = []
    bad: list[BadLine] = []
    position = base
    utf8 = is_utf8(block)  # else msgspec would take a line json.loads refuses: every line the slow way
    for start in range(0, len(lines), CHUNK_LINES):
        chunk = lines[start : start + CHUNK_LINES]
        try:
            parts.append(_decode_chunk(chunk, position, bad, fast=utf8))
        except _Overflow:  # an integer too big for a float64 in a metric: check every line of this chunk
            del bad[len(bad) - sum(b.offset >= position for b in bad) :]
            parts.append(_decode_chunk(chunk, position, bad, fast=False))
        position += sum(map(len, chunk)) + len(chunk)
    return MetricBatch.concat(parts) if parts else EMPTY_BATCH, bad


def _decode_chunk(lines: list[bytes], position: int, bad: list[BadLine], *, fast: bool) -> MetricBatch:
    chunk = _Chunk()
    decode = decode_line
    shapes = SHAPES
    decode_shaped = shapes.decode
    ts_list, step_list, key_list, groups, shaped = chunk.ts, chunk.steps, chunk.step_keys, chunk.groups, chunk.shaped
    index = 0
    for line in lines:
        if fast:  # a line of a learned shape: straight to numbers (ts and step within 2**53, else the general way)
            try:
                known = decode_shaped(line)
            except (msgspec.DecodeError, RecursionError):  # msgspec recurses into what a line nests
                known = None
            if known is not None:
                kind = type(known)
                ts, step = known.ts, known.step
                if kind is not Unshaped and -EXACT <= step <= EXACT and (type(ts) is float or -EXACT <= ts <= EXACT):
                    entry = shaped.get(kind)
                    if entry is None:
                        entry = shaped[kind] = ([], [])
                    entry[0].append(index)
                    entry[1].append(known)
                    ts_list.append(ts)
                    step_list.append(step)
                    key_list.append(kind.step_key)
                    index += 1
                    position += len(line) + 1
                    continue
        try:
            if not fast:
                raise ValueError("checked")
            try:
                record = decode(line)
            except (msgspec.DecodeError, RecursionError):
                substituted = nonfinite_line(line)
                if substituted is None:
                    raise
                record = substituted
            ts, step = record.ts, record.step
            if (
                (type(ts) is int and not -EXACT <= ts <= EXACT)
                or (type(step) is int and not -EXACT <= step <= EXACT)  # an int no float holds: malformed
                or type(step) not in (int, float)
            ):
                check_value(ts)
                check_value(step)
            metrics = record.metrics
            if len(metrics) > MAX_LINE_KEYS:
                raise ValueError(_too_many_keys(len(metrics)))  # the slow path names it
            layout = tuple(metrics)
            group = groups.get(layout)
            if group is None:
                group = groups[layout] = ([], [])
            group[0].append(index)
            group[1].extend(metrics.values())
            ts_list.append(ts)
            step_list.append(step)
            key_list.append(record.step_key)
            index += 1
        except (msgspec.DecodeError, ValueError, RecursionError):
            row = _slow_line(line, position, bad)
            if row is not None:
                chunk.add(row)
                index += 1
        else:  # lines like this one are read the fast way from now on
            names = names_of(metrics)
            if names is not None:
                shapes.learn(record.step_key, names)
                decode_shaped = shapes.decode
        position += len(line) + 1
    return chunk.batch()


def _slow_line(line: bytes, position: int, bad: list[BadLine]) -> MetricRow | None:
    """A line msgspec refused: decoded as json.loads does (the tail's rule), then checked."""
    try:
        row = decode_metric_record(json.loads(line.decode("utf-8")))
        check_value(row[0])
        check_value(row[2])
        check_value(row[3])
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as err:
        if line.decode("utf-8", "replace").strip():
            bad.append(BadLine(position, _reason(err), line[:EXCERPT_BYTES]))
        return None
    return row


class _Overflow(Exception):
    """A metric value is an integer too big for a float64."""


_CHECKED: Final = None
"""First item of the layout of rows whose values may be of any type (not decoded by msgspec)."""


class _Chunk:
    """Rows being gathered into columns; rows whose metrics have the same keys in the same order are grouped."""

    def __init__(self) -> None:
        self.ts: list[Any] = []
        self.steps: list[Any] = []
        self.step_keys: list[str] = []
        self.groups: dict[tuple[str | None, ...], tuple[list[int], list[Any]]] = {}
        self.shaped: dict[type[Shaped], tuple[list[int], list[Shaped]]] = {}

    def add(self, row: MetricRow) -> None:
        """A checked row whose values may be of any JSON type."""
        metrics = row[3]
        layout = (_CHECKED, *metrics)
        group = self.groups.get(layout)
        if group is None:
            group = self.groups[layout] = ([], [])
        group[0].append(len(self.ts))
        group[1].extend(metrics.values())
        self.ts.append(row[0])
        self.steps.append(row[2])
        self.step_keys.append(row[1])

    def batch(self) -> MetricBatch:
        ids: dict[str, int] = {}
        step_key = np.array([ids.setdefault(k, len(ids)) for k in self.step_keys], dtype=np.uint32)
        parts: dict[str, list[tuple[IndexArray, Values]]] = {}
        for kind, (indices, known) in self.shaped.items():
            for learned, points in zip(kind.names, _shaped_columns(kind, indices, known), strict=True):
                if points is not None:
                    parts.setdefault(learned, []).append(points)
        for layout, (indices, flat) in self.groups.items():
            names = layout[1:] if layout and layout[0] is _CHECKED else layout
            if not names:
                continue
            records = np.array(indices, dtype=np.uint32)
            columns = _table_columns(flat, len(names), layout[0] is not _CHECKED)
            for name, values in zip(names, columns, strict=True):
                parts.setdefault(str(name), []).append((records, values))
        if self.shaped:  # names in order of first appearance (a shape's names in the order it learned them)
            parts = dict(sorted(parts.items(), key=lambda item: min(int(r[0]) for r, _ in item[1])))
        keys: dict[str, KeyPoints] = {}
        for name, found in parts.items():
            keys[name] = KeyPoints.merged(found)
        return MetricBatch(values_of(self.ts), values_of(self.steps), step_key, tuple(ids), keys)


def rows_to_batch(rows: Sequence[MetricRow]) -> MetricBatch:
    """Columns of rows already checked (:func:`decode_metric_record`, :func:`check_value`)."""
    chunk = _Chunk()
    for row in rows:
        chunk.add(row)
    return chunk.batch()


def _table_columns(flat: list[Any], width: int, typed: bool) -> list[Values]:
    """The columns of rows that share one layout, their values one row after the other in ``flat``.

    ``typed``: every value is an int or a float (msgspec checked it), so they convert in one go.
    """
    rows = len(flat) // width
    matrix = None
    if typed:
        try:
            matrix = np.fromiter(flat, np.float64, len(flat)).reshape(rows, width)
        except OverflowError:
            raise _Overflow from None
        except (TypeError, ValueError):
            matrix = None
    if matrix is None:
        return [values_of(flat[j::width]) for j in range(width)]
    with np.errstate(invalid="ignore"):
        integral = (matrix == np.floor(matrix)).any(axis=0)  # columns with ints, or floats such as 1.0
    columns = matrix.T.copy()
    raws: list[dict[int, Any]] = [{} for _ in range(width)]
    for c in np.flatnonzero(np.isnan(matrix)).tolist():  # numpy reads null as NaN: it stays a null
        if flat[c] is None:
            raws[c % width][c // width] = None
    all_ints: list[BoolArray | None] = [None] * width
    for j in np.flatnonzero(integral).tolist():
        all_ints[j], raw = int_flags(flat[j::width], columns[j])
        raws[j].update(raw)
    return [Values(columns[j], all_ints[j], raws[j]) for j in range(width)]


def _shaped_columns(
    kind: type[Shaped], indices: list[int], known: list[Shaped]
) -> list[tuple[IndexArray, Values] | None]:
    """Per name of ``kind``, the (records, values) of the records in ``known`` that carry it (None: none does)."""
    try:
        columns = kind.numbers(known).T.copy()
    except OverflowError:
        raise _Overflow from None
    rows = np.array(indices, dtype=np.uint32)
    present = ~np.isnan(columns)
    counts = present.sum(axis=1).tolist()
    integral = (columns == np.floor(columns)).any(axis=1).tolist()  # ints, or floats such as 1.0 (NaN: neither)
    tuples: list[tuple[Any, ...]] | None = None
    out: list[tuple[IndexArray, Values] | None] = []
    for j, count in enumerate(counts):
        if not count:
            out.append(None)
            continue
        where = None if count == len(rows) else np.flatnonzero(present[j])
        num = columns[j] if where is None else columns[j][where]
        ints: BoolArray | None = None
        raw: dict[int, Any] = {}
        if integral[j]:  # the JSON types tell
            if tuples is None:
                tuples = list(map(astuple, map(_metrics_of, known)))
            items = list(map(itemgetter(j), tuples))
            if where is not None:
                items = [items[p] for p in where.tolist()]
            ints, raw = int_flags(items, num)
        out.append((rows if where is None else rows[where], Values(num, ints, raw)))
    return out
