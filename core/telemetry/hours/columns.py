"""Complete lines of a partitioned telemetry stream decoded straight into columns, checked for what they become.

Contract:

- :func:`decode` takes a block of complete lines (no final newline) of one of
  :data:`SPECS`'s streams (``gpu_util``, ``phases``, ``engine_series``) and
  returns :class:`Columns` (one float64 array and one type tag per numeric
  field, one code per shared field into a value table) and the malformed lines
  (file and byte offset), in file order. No object is built per record: the
  block is decoded in one msgspec call; a block that call refuses (a NaN
  literal, a blank or broken line) is decoded line by line with the tail's own
  rules (:func:`miles_tui.core.tail.parse_line`), so both give one result.
- A number keeps its JSON type in its tag (:data:`~.record_table.TAG_FLOAT`,
  ``TAG_INT`` for an int a float64 holds exactly, ``TAG_NONE``, ``TAG_OTHER``
  for anything else, kept in ``other``), as
  :class:`~miles_tui.core.telemetry.record_table.RecordTable` does.
- Every record is checked for what its fields are used as, not only parsed:
  a time (``ts``, ``t0``, ``t1``) is a finite number; a name used as a key
  (phase, host, role, engine address, metric, label) is a string of at most
  :data:`MAX_TEXT` characters (or null where the stream may omit it); a GPU
  index, a rank is a bounded int (no attacker-chosen key that hashes alike);
  a GPU list and a label set are bounded. A record that fails is a malformed
  line naming the field; the rest of the block is kept.
- Shared values are keyed by their canonical JSON (``[0, 1]`` and ``[0,1]`` are
  one code); the value table holds each as parsed (a list, a dict, a string).
- :func:`concat` joins columns of one stream into one code space. Pure: bytes
  in, arrays out; never reads a file or a clock.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import attrgetter
from pathlib import Path
from typing import Any, Final

import msgspec
import numpy as np
import numpy.typing as npt

from miles_tui.core.tail import (
    DECODE_ERRORS,
    EXCERPT_BYTES,
    MalformedLineError,
    malformed_reason,
    needs_checked_parse,
    parse_line,
)
from miles_tui.core.telemetry.record_table import TAG_FLOAT, TAG_INT, TAG_NONE, TAG_OTHER, TableArrays

FloatArray = npt.NDArray[np.float64]
TagArray = npt.NDArray[np.uint8]
CodeArray = npt.NDArray[np.int32]

MAX_TEXT: Final = 256
"""Longest name (phase, host, role, address, metric, label) a record may carry."""
MAX_INDEX: Final = 1 << 20
"""A GPU index or rank is an int in (-MAX_INDEX, MAX_INDEX): a key no one can make hash alike."""
MAX_GPUS: Final = 64
"""Most GPUs one phase record may name."""
MAX_LABELS: Final = 32
"""Most labels one engine sample may carry."""
EXACT_INT: Final = 2**53
"""An int below this magnitude is exact in a float64 (``TAG_INT``); a larger one is kept as it was."""


class _Phase(msgspec.Struct):
    name: Any
    t0: Any
    t1: Any
    node: Any = None
    gpus: msgspec.Raw = msgspec.Raw(b"null")
    rank: Any = None
    role: Any = None


class _Gpu(msgspec.Struct):
    ts: Any
    node: Any
    gpu: Any
    util: Any = None
    mem_mb: Any = None
    power_w: Any = None


class _Engine(msgspec.Struct):
    ts: Any
    metric: Any
    addr: Any = None
    labels: msgspec.Raw = msgspec.Raw(b"null")
    value: Any = None


@dataclass(frozen=True)
class StreamSpec:
    """How one stream's records become columns."""

    record: type[msgspec.Struct]
    """The msgspec shape of a line (required fields have no default)."""
    times: tuple[str, ...]
    """Numeric fields that must be finite numbers."""
    numbers: tuple[str, ...]
    """Every numeric field (times first)."""
    names: Mapping[str, bool]
    """Shared string fields -> whether null is allowed."""
    indices: tuple[str, ...]
    """Shared fields that are bounded ints (a GPU index; a rank may also be null)."""
    raw: Mapping[str, Callable[[Any], Any]]
    """Shared fields decoded from their JSON text -> a check that returns the value or raises ValueError."""
    time: str
    """The field a record's time is (for spans and windows); a phase's is its end, its start while open."""

    @property
    def shared(self) -> tuple[str, ...]:
        return (*self.names, *self.indices, *self.raw)

    @property
    def fields(self) -> tuple[str, ...]:
        return (*self.numbers, *self.shared)


def _gpu_list(value: Any) -> Any:
    if value is None:
        return None
    if not isinstance(value, list) or len(value) > MAX_GPUS:
        raise ValueError(f"field 'gpus' is not a list of at most {MAX_GPUS} GPU indices")
    if not all(type(g) is int and -MAX_INDEX < g < MAX_INDEX for g in value):
        raise ValueError("field 'gpus' holds something other than GPU indices")
    return value


def _labels(value: Any) -> Any:
    if value is None:
        return None
    if not isinstance(value, dict) or len(value) > MAX_LABELS:
        raise ValueError(f"field 'labels' is not an object of at most {MAX_LABELS} labels")
    for key, item in value.items():
        if len(key) > MAX_TEXT:
            raise ValueError("field 'labels' has a label name too long to be one")
        if isinstance(item, (list, dict)) or (type(item) is str and len(item) > MAX_TEXT):
            raise ValueError(f"label {key[:40]!r} is not a short scalar")
    return value


SPECS: Final[Mapping[str, StreamSpec]] = {
    "gpu_util": StreamSpec(
        _Gpu, ("ts",), ("ts", "util", "mem_mb", "power_w"), {"node": False}, ("gpu",), {}, "ts"
    ),
    "phases": StreamSpec(
        _Phase, ("t0", "t1"), ("t0", "t1"), {"name": False, "node": True, "role": True}, ("rank",),
        {"gpus": _gpu_list}, "t1",
    ),
    "engine_series": StreamSpec(
        _Engine, ("ts",), ("ts", "value"), {"metric": False, "addr": True}, (), {"labels": _labels}, "ts"
    ),
}  # fmt: skip
"""The streams held as columns, and how."""


@dataclass(frozen=True, eq=False)
class Columns:
    """Records of one stream as columns; see the module docstring."""

    stream: str
    """The stream."""
    size: int
    """Records."""
    numbers: Mapping[str, FloatArray]
    """Numeric field -> float64 values (0 where the tag is not a number)."""
    tags: Mapping[str, TagArray]
    """Numeric field -> each value's JSON type."""
    other: Mapping[str, Mapping[int, Any]]
    """Numeric field -> row -> the value of each row tagged ``TAG_OTHER``."""
    codes: Mapping[str, CodeArray]
    """Shared field -> each row's code into :attr:`values`."""
    values: tuple[Any, ...]
    """Code -> value (a string, None, an int, a list, a dict)."""

    def value_of(self, field: str, row: int) -> Any:
        """One field of one row, as parsed."""
        if field in self.codes:
            return self.values[int(self.codes[field][row])]
        tag = int(self.tags[field][row])
        if tag == TAG_OTHER:
            return self.other[field][row]
        value = float(self.numbers[field][row])
        return None if tag == TAG_NONE else int(value) if tag == TAG_INT else value

    def column(self, field: str) -> list[Any]:
        """One field over every row, as parsed."""
        return [self.value_of(field, row) for row in range(self.size)]

    def time(self) -> FloatArray:
        """Each record's time (a phase: its end, its start while open)."""
        if self.stream == "phases":
            t0, t1 = self.numbers["t0"], self.numbers["t1"]
            return np.where(t1 == -1, t0, t1)
        return self.numbers[SPECS[self.stream].time]

    def span(self) -> tuple[float, float] | None:
        """Earliest and latest time any record mentions (a closed phase: t0 to t1)."""
        if not self.size:
            return None
        if self.stream == "phases":
            t0, t1 = self.numbers["t0"], self.numbers["t1"]
            closed = t1 != -1
            lo = min(float(t0.min()), float(t1[closed].min()) if closed.any() else math.inf)
            return lo, max(float(t0.max()), float(t1.max()))
        ts = self.time()
        return float(ts.min()), float(ts.max())

    def take(self, rows: npt.NDArray[Any]) -> Columns:
        """The rows selected (a boolean mask or indices), in order."""
        index = np.flatnonzero(rows) if rows.dtype == np.bool_ else rows.astype(np.int64)
        where = {int(old): new for new, old in enumerate(index.tolist())} if any(self.other.values()) else {}
        return Columns(
            self.stream,
            len(index),
            {k: v[index] for k, v in self.numbers.items()},
            {k: v[index] for k, v in self.tags.items()},
            {k: {where[r]: v for r, v in rows_.items() if r in where} for k, rows_ in self.other.items()},
            {k: v[index] for k, v in self.codes.items()},
            self.values,
        )

    def table_arrays(self, numeric: Sequence[str], shared: Sequence[str]) -> TableArrays:
        """The fields as :class:`~miles_tui.core.telemetry.record_table.TableArrays` (what the stall rule reads)."""
        return TableArrays(
            self.size,
            {k: self._numeric(k) for k in numeric},
            {k: self.codes[k].astype(np.int64) for k in shared},
            list(self.values),
        )

    def _numeric(self, field: str) -> tuple[FloatArray, TagArray, dict[int, Any]]:
        """A field as (float64s, tags, other values); a shared field (a rank) through its value table."""
        if field in self.numbers:
            return self.numbers[field], self.tags[field], dict(self.other[field])
        table = self.values
        kinds = [_TAG_OF.get(type(v), TAG_OTHER) for v in table]
        floats = np.array([float(v) if k <= TAG_INT else 0.0 for v, k in zip(table, kinds, strict=True)])
        codes = self.codes[field]
        tags = np.array(kinds, np.uint8)[codes] if table else np.zeros(0, np.uint8)
        other = {int(row): table[int(codes[row])] for row in np.flatnonzero(tags == TAG_OTHER).tolist()}
        return (floats[codes] if table else np.zeros(0)), tags, other


def empty(stream: str) -> Columns:
    """No records of ``stream``."""
    spec = SPECS[stream]
    return Columns(
        stream,
        0,
        {k: np.zeros(0) for k in spec.numbers},
        {k: np.zeros(0, np.uint8) for k in spec.numbers},
        {k: {} for k in spec.numbers},
        {k: np.zeros(0, np.int32) for k in spec.shared},
        (),
    )


_TAG_OF: Final[Mapping[type, int]] = {float: TAG_FLOAT, int: TAG_INT, type(None): TAG_NONE}
_DECODERS: dict[str, msgspec.json.Decoder[Any]] = {}
_ONE: dict[str, msgspec.json.Decoder[Any]] = {}


def _numbers(values: list[Any]) -> tuple[FloatArray, TagArray, dict[int, Any]]:
    """(float64s, tags, row -> value of each row tagged other) of one numeric field."""
    n = len(values)
    tags = np.fromiter(map(_TAG_OF.get, map(type, values), repeat(TAG_OTHER)), np.uint8, n)
    other: dict[int, Any] = {}
    out: FloatArray | None = None
    if not n or int(tags.max()) <= TAG_INT:
        try:
            out = np.array(values, np.float64) if n else np.zeros(0)
        except OverflowError:  # an int beyond any float
            out = None
    if out is None:
        out = np.zeros(n)
        for row in np.flatnonzero(tags != TAG_NONE).tolist():
            value = values[row]
            if tags[row] == TAG_FLOAT or (tags[row] == TAG_INT and -EXACT_INT < value < EXACT_INT):
                out[row] = value
            else:
                tags[row], other[row] = TAG_OTHER, value
        return out, tags, other
    big = (tags == TAG_INT) & ~(np.abs(out) < EXACT_INT)
    for row in np.flatnonzero(big).tolist():
        tags[row], other[row], out[row] = TAG_OTHER, values[row], 0.0
    out[tags == TAG_NONE] = 0.0
    return out, tags, other


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=True)


class _Interner:
    """Shared values -> codes, keyed by value (strings) or canonical JSON (anything else)."""

    def __init__(self) -> None:
        self.values: list[Any] = []
        self._codes: dict[Any, int] = {}

    def code(self, key: Any, value: Any) -> int:
        code = self._codes.get(key)
        if code is None:
            code = self._codes[key] = len(self.values)
            self.values.append(value)
        return code

    def code_of(self, value: Any) -> int:
        """The code of a value as parsed (a string, None, an int, a list, a dict)."""
        if value is None or type(value) is str:
            return self.code(value, value)
        if type(value) is int:
            return self.code(("i", value), value)
        return self.code(("j", _canonical(value)), value)


class _Rows:
    """Per-field value lists of the lines decoded so far, with each line's offset."""

    def __init__(self, spec: StreamSpec) -> None:
        self.spec = spec
        self.fields: dict[str, list[Any]] = {name: [] for name in spec.fields}
        self.offsets: list[npt.NDArray[np.int64]] = []

    def add_structs(self, records: Sequence[msgspec.Struct], offsets: npt.NDArray[np.int64]) -> None:
        for name, known in self.fields.items():
            got = list(map(attrgetter(name), records))
            known.extend([bytes(v) for v in got] if name in self.spec.raw else got)
        self.offsets.append(offsets)

    def add_line(self, record: Mapping[str, Any], offset: int) -> None:
        """A record :func:`_line_record` checked (every required field present)."""
        for name in self.spec.fields:
            value = record.get(name)
            self.fields[name].append(_canonical(value).encode() if name in self.spec.raw else value)
        self.offsets.append(np.array([offset], np.int64))


def _defaults(kind: type[msgspec.Struct]) -> frozenset[str]:
    fields = kind.__struct_fields__
    return frozenset(fields[len(fields) - len(kind.__struct_defaults__) :])


_HAS_DEFAULT: dict[type[msgspec.Struct], frozenset[str]] = {}


def _line_record(spec: StreamSpec, line: bytes, checked: bool) -> dict[str, Any]:
    value = parse_line(line, checked=checked)
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object, got {type(value).__name__}")
    defaults = _HAS_DEFAULT.setdefault(spec.record, _defaults(spec.record))
    for name in spec.record.__struct_fields__:
        if name not in value and name not in defaults:
            raise KeyError(name)
    return value


def decode(
    stream: str, block: bytes | memoryview, base: int, path: Path | str
) -> tuple[Columns, list[MalformedLineError]]:
    """Decode the complete lines ``block`` (starting at byte ``base`` of ``path``); see the module docstring."""
    spec = SPECS[stream]
    data = bytes(block)
    rows = _Rows(spec)
    bad: list[MalformedLineError] = []
    if data:
        _decode_part(spec, stream, data, 0, len(data), base, path, rows, bad)
    columns, refused = _columns(stream, spec, rows)
    for offset, reason in refused:
        bad.append(_malformed(path, data, base, offset, reason))
    bad.sort(key=lambda err: err.offset or 0)
    return columns, bad


BISECT_BYTES: Final = 64 << 10
"""A part the one-call decode refuses is cut in two down to this size, then read line by line: one bad line
costs about twice its block's decode, not a line-by-line read of the whole block."""


def _decode_part(
    spec: StreamSpec,
    stream: str,
    data: bytes,
    start: int,
    stop: int,
    base: int,
    path: Path | str,
    rows: _Rows,
    bad: list[MalformedLineError],
) -> None:
    """Lines ``data[start:stop]``: in one call, else in halves, else line by line."""
    part = data[start:stop]
    if _decode_whole(spec, stream, part, base + start, rows):
        return
    middle = data.find(b"\n", start + (stop - start) // 2, stop) if stop - start > BISECT_BYTES else -1
    if middle < 0:
        _decode_lines(spec, part, base + start, path, rows, bad)
        return
    _decode_part(spec, stream, data, start, middle, base, path, rows, bad)
    _decode_part(spec, stream, data, middle + 1, stop, base, path, rows, bad)


def _decode_whole(spec: StreamSpec, stream: str, data: bytes, base: int, rows: _Rows) -> bool:
    """The lines as one JSON array, in one call; False when some line is not a plain record."""
    if not data or needs_checked_parse(data):
        return False
    decoder = _DECODERS.get(stream)
    if decoder is None:
        decoder = _DECODERS[stream] = msgspec.json.Decoder(list[spec.record])  # type: ignore[name-defined]
    try:
        records = decoder.decode(b"[" + data.replace(b"\n", b",") + b"]")
    except (msgspec.DecodeError, RecursionError):
        return False
    newlines = np.flatnonzero(np.frombuffer(data, np.uint8) == 10)
    offsets = np.concatenate([[0], newlines + 1]).astype(np.int64) + base
    if len(offsets) != len(records):
        return False
    rows.add_structs(records, offsets)
    return True


def _decode_lines(
    spec: StreamSpec, data: bytes, base: int, path: Path | str, rows: _Rows, bad: list[MalformedLineError]
) -> None:
    """Line by line, as the tail decodes: each bad line malformed, the others kept."""
    checked = needs_checked_parse(data)
    position = base
    for line in data.split(b"\n"):
        try:
            rows.add_line(_line_record(spec, line, checked), position)
        except DECODE_ERRORS as err:
            if line.strip():
                bad.append(MalformedLineError(path, position, malformed_reason(err), line[:EXCERPT_BYTES]))
        position += len(line) + 1


def _malformed(path: Path | str, data: bytes, base: int, offset: int, reason: str) -> MalformedLineError:
    start = offset - base
    stop = data.find(b"\n", start)
    line = data[start : stop if stop >= 0 else len(data)]
    return MalformedLineError(path, offset, reason, line[:EXCERPT_BYTES])


def _columns(stream: str, spec: StreamSpec, rows: _Rows) -> tuple[Columns, list[tuple[int, str]]]:
    """The rows as columns; rows that fail a check are left out and returned as (offset, reason)."""
    offsets = np.concatenate(rows.offsets) if rows.offsets else np.zeros(0, np.int64)
    n = len(offsets)
    keep = np.ones(n, bool)
    reasons: dict[int, str] = {}

    def refuse(mask: npt.NDArray[np.bool_], reason: str) -> None:
        for row in np.flatnonzero(mask & keep).tolist():
            reasons[row] = reason
        keep[mask] = False

    numbers, tags, other = {}, {}, {}
    for name in spec.numbers:
        numbers[name], tags[name], other[name] = _numbers(rows.fields[name])
        if name in spec.times:
            finite = (tags[name] <= TAG_INT) & np.isfinite(numbers[name])
            refuse(~finite, f"field {name!r} is not a finite number (a time)")
    interner = _Interner()
    codes: dict[str, CodeArray] = {}
    for name, nullable in spec.names.items():
        codes[name] = _text_codes(name, nullable, rows.fields[name], interner, refuse)
    for name in spec.indices:
        codes[name] = _index_codes(name, rows.fields[name], interner, refuse)
    for name, check in spec.raw.items():
        codes[name] = _raw_codes(name, check, rows.fields[name], interner, refuse)
    columns = Columns(stream, n, numbers, tags, other, codes, tuple(interner.values))
    if not keep.all():
        columns = columns.take(keep)
    return columns, [(int(offsets[row]), reason) for row, reason in sorted(reasons.items())]


Refuse = Callable[[npt.NDArray[np.bool_], str], None]


_NOT_TEXT: Final = object()
"""What a shared string field's non-string values are keyed as (a list is no dict key)."""


def _text_codes(name: str, nullable: bool, values: list[Any], interner: _Interner, refuse: Refuse) -> CodeArray:
    if not set(map(type, values)) <= {str, type(None)}:
        values = [v if v is None or type(v) is str else _NOT_TEXT for v in values]
    local = _local_codes(values)
    codes = local.codes
    table = np.zeros(len(local.keys), np.int32)
    bad = np.zeros(len(local.keys), bool)
    for code, value in enumerate(local.keys):
        ok = (type(value) is str and len(value) <= MAX_TEXT) or (value is None and nullable)
        bad[code] = not ok
        table[code] = interner.code_of(value) if ok else 0
    wanted = "a string" + (" or null" if nullable else "")
    if bad.any():
        refuse(bad[codes], f"field {name!r} is not {wanted} of at most {MAX_TEXT} characters")
    return table[codes]


@dataclass(frozen=True)
class _Local:
    keys: list[Any]
    """Distinct values, in order of first sight."""
    codes: npt.NDArray[np.int64]
    """Each value's index into ``keys``."""


def _local_codes(values: list[Any]) -> _Local:
    """Each (hashable) value numbered in order of first sight, at C speed: ``map`` calls ``len(local)`` and
    ``local.setdefault`` in step, so a new value gets the dict's size before it was added."""
    local: dict[Any, int] = {}
    n = len(values)
    codes = np.fromiter(map(local.setdefault, values, map(len, repeat(local, n))), np.int64, n)
    return _Local(list(local), codes)


def _index_codes(name: str, values: list[Any], interner: _Interner, refuse: Refuse) -> CodeArray:
    kinds = set(map(type, values))
    if kinds <= {int, type(None)}:
        ints = [v for v in values if v is not None] if type(None) in kinds else values
        if not ints or (min(ints) > -MAX_INDEX and max(ints) < MAX_INDEX):  # small ints: safe dict keys
            return _text_like(values, interner)
    ok = np.fromiter((v is None or (type(v) is int and -MAX_INDEX < v < MAX_INDEX) for v in values), bool, len(values))
    refuse(~ok, f"field {name!r} is not an index (an int of magnitude under {MAX_INDEX}) or null")
    return _text_like([v if good else None for v, good in zip(values, ok.tolist(), strict=True)], interner)


def _text_like(values: list[Any], interner: _Interner) -> CodeArray:
    local = _local_codes(values)
    table = np.array([interner.code_of(v) for v in local.keys], np.int32)
    return table[local.codes] if len(values) else np.zeros(0, np.int32)


def _raw_codes(
    name: str, check: Callable[[Any], Any], values: list[bytes], interner: _Interner, refuse: Refuse
) -> CodeArray:
    local = _local_codes(values)
    codes = local.codes
    table = np.zeros(len(local.keys), np.int32)
    for code, raw in enumerate(local.keys):
        try:
            table[code] = interner.code_of(check(json.loads(raw)))
        except (ValueError, RecursionError) as err:
            refuse(codes == code, f"{err}" if name in str(err) else f"field {name!r}: {err}")
    return table[codes] if len(values) else np.zeros(0, np.int32)


def concat(parts: Iterable[Columns], stream: str) -> Columns:
    """Columns of one stream end to end, in one code space."""
    parts = [p for p in parts if p.size]
    if not parts:
        return empty(stream)
    if len(parts) == 1:
        return parts[0]
    interner = _Interner()
    codes: dict[str, list[CodeArray]] = {k: [] for k in parts[0].codes}
    other: dict[str, dict[int, Any]] = {k: {} for k in parts[0].other}
    offset = 0
    for part in parts:
        table = np.array([interner.code_of(v) for v in part.values], np.int32)
        for k, v in part.codes.items():
            codes[k].append(table[v] if len(table) else v)
        for k, rows in part.other.items():
            other[k].update((offset + r, v) for r, v in rows.items())
        offset += part.size
    return Columns(
        stream,
        offset,
        {k: np.concatenate([p.numbers[k] for p in parts]) for k in parts[0].numbers},
        {k: np.concatenate([p.tags[k] for p in parts]) for k in parts[0].tags},
        other,
        {k: np.concatenate(v) for k, v in codes.items()},
        tuple(interner.values),
    )
