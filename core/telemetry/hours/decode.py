"""Complete lines of a partitioned telemetry stream decoded into :class:`~.columns.Columns`, checked as they go.

Contract: :func:`decode` takes a block of complete lines (no final newline) of
one of :data:`~.columns.SPECS`'s streams and returns its columns and the
malformed lines (file and byte offset), in file order. No object is built per
record: the block is decoded in one msgspec call; a block that call refuses (a
NaN literal, a blank or broken line) is cut in halves down to
:data:`BISECT_BYTES`, then read line by line with the tail's own rules
(:func:`miles_tui.core.base.tail.parse_line`), so every path gives one result. Each
record is checked for what its fields are used as (see :mod:`.columns`); one
that fails is a malformed line naming the field, and the rest of the block is
kept. Pure: bytes in, arrays out.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import attrgetter
from pathlib import Path
from typing import Any, Final

import msgspec
import numpy as np
import numpy.typing as npt

from miles_tui.core.base.tail import (
    DECODE_ERRORS,
    EXCERPT_BYTES,
    MalformedLineError,
    is_utf8,
    malformed_reason,
    needs_checked_parse,
    parse_line,
)
from miles_tui.core.telemetry.hours.columns import (
    SPECS,
    CodeArray,
    Columns,
    Interner,
    StreamSpec,
    canonical,
    concat,
    not_times,
    numbers_of,
)
from miles_tui.core.telemetry.hours.scan_decode import AVAILABLE as SCANNER
from miles_tui.core.telemetry.hours.scan_decode import SCANNED_STREAMS, scan_columns
from miles_tui.core.telemetry.stream_records import MAX_INDEX, MAX_TEXT, TIME_REASON

_DECODERS: dict[str, msgspec.json.Decoder[Any]] = {}


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
            self.fields[name].append(canonical(value).encode() if name in self.spec.raw else value)
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
    scanned = scan_columns(stream, data, base) if data and stream in SCANNED_STREAMS and SCANNER else None
    runs = [(0, len(data))] if scanned is None else scanned.unmatched
    for start, stop in runs:
        if start < stop:
            _decode_part(spec, stream, data, start, stop, base, path, rows, bad)
    columns, offsets, refused = _columns(stream, spec, rows)
    if scanned is not None:
        refused += scanned.refused
        if not columns.size:
            columns = scanned.columns
        elif scanned.columns.size:  # both: in file order
            order = np.argsort(np.concatenate([scanned.offsets, offsets]), kind="stable")
            columns = concat([scanned.columns, columns], stream).take(order)
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
    if not data or needs_checked_parse(data) or not is_utf8(data):
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


def _columns(
    stream: str, spec: StreamSpec, rows: _Rows
) -> tuple[Columns, npt.NDArray[np.int64], list[tuple[int, str]]]:
    """The rows as columns and their offsets; rows that fail a check are left out and returned as (offset,
    reason)."""
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
        numbers[name], tags[name], other[name] = numbers_of(rows.fields[name])
        if name in spec.times:
            refuse(not_times(name, numbers[name], tags[name]), f"field {name!r} {TIME_REASON}")
    interner = Interner()
    codes: dict[str, CodeArray] = {}
    for name, nullable in spec.names.items():
        codes[name] = _text_codes(name, nullable, rows.fields[name], interner, refuse)
    for name in spec.indices:
        codes[name] = _index_codes(name, rows.fields[name], interner, refuse)
    for name, check in spec.raw.items():
        codes[name] = _raw_codes(name, check, rows.fields[name], interner, refuse)
    columns = Columns(stream, n, numbers, tags, other, codes, tuple(interner.values))
    refused = [(int(offsets[row]), reason) for row, reason in sorted(reasons.items())]
    if not keep.all():
        columns, offsets = columns.take(keep), offsets[keep]
    return columns, offsets, refused


Refuse = Callable[[npt.NDArray[np.bool_], str], None]


_NOT_TEXT: Final = object()
"""What a shared string field's non-string values are keyed as (a list is no dict key)."""


def _text_codes(name: str, nullable: bool, values: list[Any], interner: Interner, refuse: Refuse) -> CodeArray:
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


def _index_codes(name: str, values: list[Any], interner: Interner, refuse: Refuse) -> CodeArray:
    kinds = set(map(type, values))
    if kinds <= {int, type(None)}:
        ints = [v for v in values if v is not None] if type(None) in kinds else values
        if not ints or (min(ints) > -MAX_INDEX and max(ints) < MAX_INDEX):  # small ints: safe dict keys
            return _text_like(values, interner)
    ok = np.fromiter((v is None or (type(v) is int and -MAX_INDEX < v < MAX_INDEX) for v in values), bool, len(values))
    refuse(~ok, f"field {name!r} is not an index (an int of magnitude under {MAX_INDEX}) or null")
    return _text_like([v if good else None for v, good in zip(values, ok.tolist(), strict=True)], interner)


def _text_like(values: list[Any], interner: Interner) -> CodeArray:
    local = _local_codes(values)
    table = np.array([interner.code_of(v) for v in local.keys], np.int32)
    return table[local.codes] if len(values) else np.zeros(0, np.int32)


def _raw_codes(
    name: str, check: Callable[[Any], Any], values: list[bytes], interner: Interner, refuse: Refuse
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
