"""Flat telemetry lines of a learned shape read by the compiled scanner: the bulk of a long run, at C speed.

Contract:

- :class:`Templates` learns, per stream, the exact bytes a record of one
  shape is written with (:meth:`Templates.learn`): every number (or null) that
  is a member's value a number slot, every name and every nested value (a GPU
  list, a label set) literal, checked as :mod:`.decode` checks it (so a host,
  a phase, an engine's metric and labels are part of a shape: a run has
  hundreds, and the scanner finds a line's by a hash of its skeleton, at a
  cost that does not grow with them). A template is kept only when the
  scanner, given the line it was learned from, reads back exactly the numbers
  and JSON types ``json.loads`` gives. At most :data:`MAX_TEMPLATES` per
  stream, and :data:`MAX_ATTEMPTS` lines tried; the lines of a block no
  template matches are learned from one per skeleton.
- :func:`scan_columns` reads the lines of a block that match a template
  straight into columns (no object per line; the scan releases the GIL),
  checks them as :mod:`.decode` does (a time is a finite number, a GPU index a
  bounded int: else the line is malformed, with its offset), and returns the
  runs of lines no template matches, for the general decoder. Both paths give
  the same values for the same line.
- :data:`AVAILABLE` is False when the scanner is not built or
  ``MILES_TUI_NO_SCANNER`` is set: then nothing here is used.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from miles_tui.core.telemetry.hours.columns import SPECS, CodeArray, Columns, Interner, StreamSpec, not_times
from miles_tui.core.telemetry.metrics.line_templates import AVAILABLE as SCANNER_BUILT
from miles_tui.core.telemetry.record_table import TAG_FLOAT, TAG_INT, TAG_NONE
from miles_tui.core.telemetry.stream_records import MAX_INDEX, MAX_TEXT, TIME_REASON

_scan: Callable[..., tuple[int, int, int]] | None
_skeletons: Callable[..., None] | None
try:
    from miles_tui.core.telemetry.metrics._line_scan import scan as _scan
    from miles_tui.core.telemetry.metrics._line_scan import skeletons as _skeletons
except ImportError:
    _scan = _skeletons = None

SCANNED_STREAMS: Final = frozenset(SPECS)
"""Streams read by the scanner."""

AVAILABLE: Final = SCANNER_BUILT and _scan is not None and _skeletons is not None

MAX_TEMPLATES: Final = 8192
"""Shapes kept per stream (a phase per rank, a metric per engine and DP rank: 128 GPUs make about a thousand)."""
MAX_ATTEMPTS: Final = 4 * MAX_TEMPLATES
LEARN_PER_BLOCK: Final = 2048
"""Lines of distinct skeletons no template matched, learned from before the block is scanned again ..."""
LEARN_ROUNDS: Final = 2
"""... at most this many times, while some line teaches a new template."""

_SENTINEL: Final = "\x00slot\x00"
_STYLES: Final = tuple((item, key, ascii_) for item in (",", ", ") for key in (":", ": ") for ascii_ in (True, False))
"""json.dumps' compact and default separators, raw or escaped."""


@dataclass(frozen=True)
class Template:
    """The bytes of one record shape around its numbers."""

    segments: tuple[bytes, ...]
    slots: tuple[str | None, ...]
    """Per number: the field it is (None: a field the stream does not use)."""
    constants: tuple[tuple[str, Any], ...]
    """(field, value) of each name written literally (the same on every line of this shape)."""
    keys: tuple[tuple[str, Any], ...] = ()
    """(field, :meth:`Interner.key_of` its value) per constant, worked out once."""

    def slot_of(self, name: str) -> int:
        return self.slots.index(name) if name in self.slots else -1

    def key_of(self, name: str) -> tuple[Any, Any]:
        """(interner key, value) of the constant ``name`` ((None, None) when the shape lacks it)."""
        return self.by_name.get(name, (None, None))

    @cached_property
    def by_name(self) -> dict[str, tuple[Any, Any]]:
        """Field -> (interner key, value) of each constant (a block asks each template for each field)."""
        return {field: (key, value) for (field, key), (_, value) in zip(self.keys, self.constants, strict=True)}


class Templates:
    """The templates learned for one stream; see the module docstring."""

    def __init__(self, stream: str) -> None:
        self.stream = stream
        self.known: tuple[Template, ...] = ()
        self._shapes: set[tuple[tuple[bytes, ...], tuple[str | None, ...]]] = set()
        """(segments, slots) of each template known: a membership test that does not grow with them."""
        self.attempts = 0
        self._lock = threading.Lock()

    def learn(self, line: bytes) -> Template | None:
        """The template of ``line`` (learned and kept when it reads back exactly); None when it has none."""
        with self._lock:
            if len(self.known) >= MAX_TEMPLATES or self.attempts >= MAX_ATTEMPTS:
                return None
            self.attempts += 1
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            return None
        shape = _shape(self.stream, record)
        if shape is None:
            return None
        slots, constants, numbers = shape
        for style in _styles_of(line):
            template = _render(record, slots, constants, *style)
            if template is not None and _reads_back(line, template, numbers):
                learned = (template.segments, template.slots)
                with self._lock:
                    if learned not in self._shapes and len(self.known) < MAX_TEMPLATES:
                        self._shapes.add(learned)
                        self.known = (*self.known, template)
                return template
        return None


def _styles_of(line: bytes) -> tuple[tuple[str, str, bool], ...]:
    """:data:`_STYLES`, the one the line's own bytes suggest first (a line of a new shape costs one rendering,
    not eight: a flood of distinct names is learned at the cost of a decode)."""
    item = ", " if b', "' in line else ","
    key = ": " if b'": ' in line else ":"
    likely = (item, key, line.isascii())
    return (likely, *(style for style in _STYLES if style != likely))


_registry: dict[str, Templates] = {}
_registry_lock = threading.Lock()


def templates_for(stream: str) -> Templates:
    """The process's templates of ``stream``."""
    with _registry_lock:
        return _registry.setdefault(stream, Templates(stream))


def _number(value: Any) -> bool:
    return value is None or (type(value) in (int, float) and not (type(value) is int and abs(value) >= 10**15))


def _required(spec: StreamSpec) -> frozenset[str]:
    """The fields a line must have (no default in the stream's msgspec shape)."""
    fields = spec.record.__struct_fields__
    return frozenset(fields[: len(fields) - len(spec.record.__struct_defaults__)])


def _shape(stream: str, record: Any) -> tuple[dict[str, int], dict[str, Any], list[Any]] | None:
    """(field -> slot, field -> literal value, the slot values in order) of a record the scanner can read: one
    whose every shared value passes its check here (a line that fails one is left to the general decoder, which
    says why)."""
    if not isinstance(record, dict):
        return None
    spec = SPECS[stream]
    numeric = {*spec.numbers, *spec.indices}
    slots: dict[str, int] = {}
    constants: dict[str, Any] = {}
    numbers: list[Any] = []
    for key, value in record.items():
        if key in numeric:
            if not _number(value) or (key in spec.indices and value is not None and type(value) is not int):
                return None
            slots[key] = len(numbers)
            numbers.append(value)
        elif key in spec.names:
            if type(value) is not str or len(value) > MAX_TEXT:
                return None
            constants[key] = value
        elif key in spec.raw:
            try:
                constants[key] = spec.raw[key](value)
            except ValueError:
                return None
        elif _number(value):  # every other number (or null) a member holds is a slot, as the skeleton has it
            slots[key] = len(numbers)
            numbers.append(value)
    if any(f not in slots for f in spec.times) or any(f not in constants for f, null in spec.names.items() if not null):
        return None
    if not _required(spec) <= record.keys():
        return None
    return slots, constants, numbers


def _render(
    record: dict[str, Any], slots: dict[str, int], constants: dict[str, Any], item: str, key: str, ascii_: bool
) -> Template | None:
    parts = []
    for name, value in record.items():
        text = _SENTINEL if name in slots else json.dumps(value, separators=(item, key), ensure_ascii=ascii_)
        parts.append(json.dumps(name, ensure_ascii=ascii_) + key + text)
    pieces = ("{" + item.join(parts) + "}").split(_SENTINEL)
    if len(pieces) < 2 or any(not p for p in pieces[1:-1]) or not pieces[0]:
        return None
    try:
        segments = tuple(p.encode() for p in pieces)
    except UnicodeEncodeError:  # a lone surrogate (a "\\ud800" escape) kept raw: this style cannot spell the line
        return None
    order = sorted(slots, key=slots.__getitem__)
    spec_fields = set(SPECS_FIELDS)
    fixed = tuple(sorted(constants.items()))
    return Template(
        segments,
        tuple(f if f in spec_fields else None for f in order),
        fixed,
        tuple((f, Interner.key_of(v)) for f, v in fixed),
    )


SPECS_FIELDS: Final = frozenset(f for spec in SPECS.values() for f in spec.fields)


def _reads_back(line: bytes, template: Template, numbers: list[Any]) -> bool:
    assert _scan is not None
    n = len(numbers)
    kinds, starts = np.empty(1, np.int32), np.empty(1, np.int64)
    values, flags = np.empty(max(n, 1)), np.empty(max(n, 1), np.uint8)
    _, written, _ = _scan(line, 0, len(line), (template.segments,), kinds, starts, values, flags)
    if kinds[0] != 0 or written != n:
        return False
    for value, got, flag in zip(numbers, values.tolist(), flags.tolist(), strict=True):
        if value is None:
            if flag != 2:
                return False
        elif (type(value) is int) != (flag == 1) or not (got == value or (math.isnan(got) and math.isnan(value))):
            return False
    return True


@dataclass(frozen=True)
class Scanned:
    """What :func:`scan_columns` read of a block."""

    columns: Columns
    """The matched lines that passed the checks, in file order."""
    offsets: npt.NDArray[np.int64]
    """Their byte offsets."""
    refused: list[tuple[int, str]]
    """(offset, reason) of matched lines that failed a check."""
    unmatched: list[tuple[int, int]]
    """(start, stop) within the block of each run of lines no template matched."""


def scan_columns(stream: str, data: bytes, base: int) -> Scanned:
    """See the module docstring (``data``: complete lines without the final newline, at byte ``base``)."""
    assert _scan is not None and _skeletons is not None
    learned = templates_for(stream)
    kinds, starts, values, flags = _scan_all(data, learned.known)
    for _ in range(LEARN_ROUNDS):
        missed = np.flatnonzero(kinds < 0)
        if not len(missed):
            break
        before = len(learned.known)
        hashes = np.empty(len(missed), np.uint64)
        _skeletons(data, len(data), np.ascontiguousarray(starts[missed]), hashes)
        first = np.unique(hashes, return_index=True)[1]  # one line of each skeleton, in file order
        for index in missed[np.sort(first)][:LEARN_PER_BLOCK].tolist():
            start = int(starts[index])
            stop = data.find(b"\n", start)
            learned.learn(data[start : stop if stop >= 0 else len(data)])
        if len(learned.known) == before:
            break
        kinds, starts, values, flags = _scan_all(data, learned.known)
    return _assemble(stream, data, base, learned.known, kinds, starts, values, flags)


MIN_LINE_BYTES: Final = 16
"""A guess of the shortest line, to size one scan's buffers (a block of shorter lines takes more scans)."""


def _scan_all(
    data: bytes, known: tuple[Template, ...]
) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int64], npt.NDArray[np.float64], npt.NDArray[np.uint8]]:
    """Every line of ``data`` scanned: (template or -1, start, the matched lines' numbers, their flags)."""
    assert _scan is not None
    widest = max((len(t.segments) - 1 for t in known), default=1)
    segments = tuple(t.segments for t in known) or ((b"\x00never\x00",),)
    parts: list[tuple[npt.NDArray[Any], ...]] = []
    position = 0
    while position <= len(data):
        lines = (len(data) - position) // MIN_LINE_BYTES + 2
        kinds, starts = np.empty(lines, np.int32), np.empty(lines, np.int64)
        values, flags = np.empty(lines * widest), np.empty(lines * widest, np.uint8)
        scanned, written, position = _scan(data, position, len(data), segments, kinds, starts, values, flags)
        parts.append((kinds[:scanned], starts[:scanned], values[:written], flags[:written]))
        if not scanned:
            break
    if len(parts) == 1:  # the usual case: the buffers' filled parts, no copy
        return parts[0][0], parts[0][1], parts[0][2], parts[0][3]
    kinds, starts, values, flags = (np.concatenate([p[i] for p in parts]) for i in range(4))
    return kinds, starts, values, flags


def _assemble(
    stream: str,
    data: bytes,
    base: int,
    known: tuple[Template, ...],
    kinds: npt.NDArray[np.int32],
    starts: npt.NDArray[np.int64],
    values: npt.NDArray[np.float64],
    flags: npt.NDArray[np.uint8],
) -> Scanned:
    spec = SPECS[stream]
    matched = kinds >= 0
    unmatched = _runs(~matched, starts, len(data))
    kind = kinds[matched].astype(np.int64)
    rows = len(kind)
    used = np.flatnonzero(np.bincount(kind, minlength=len(known))).tolist() if rows else []

    def table(of: Callable[[Template], int]) -> npt.NDArray[np.int64]:
        """Per template used (others 0): ``of`` it."""
        out = np.zeros(max(len(known), 1), np.int64)
        for t in used:
            out[t] = of(known[t])
        return out

    shapes = {known[t].slots for t in used}
    uniform = len(shapes) == 1 and len(values) == rows * len(next(iter(shapes)))

    def field(name: str) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.uint8]]:
        if uniform:  # every line has its numbers in the same places: one strided view
            slots = next(iter(shapes))
            if name not in slots:
                return np.zeros(rows), np.full(rows, 2, np.uint8)
            width, at = len(slots), slots.index(name)
            return values.reshape(rows, width)[:, at], flags.reshape(rows, width)[:, at]
        slot = table(lambda t: t.slot_of(name))[kind]
        first = np.concatenate([[0], np.cumsum(table(lambda t: len(t.segments) - 1)[kind])[:-1]])
        where = np.where(slot >= 0, first + slot, 0)
        got = values[where] if len(values) else np.zeros(rows)
        flag = flags[where] if len(flags) else np.full(rows, 2, np.uint8)
        flag = np.where(slot >= 0, flag, 2).astype(np.uint8)  # a field the shape lacks: null
        return got, flag

    numbers, tags = {}, {}
    keep = np.ones(rows, bool)
    reasons: dict[int, str] = {}
    for name in spec.numbers:
        got, flag = field(name)
        tag = np.where(flag == 1, TAG_INT, np.where(flag == 2, TAG_NONE, TAG_FLOAT)).astype(np.uint8)
        numbers[name], tags[name] = np.where(tag == TAG_NONE, 0.0, got), tag
        if name in spec.times:
            bad = not_times(name, got, tag) & keep
            reasons.update((int(r), f"field {name!r} {TIME_REASON}") for r in np.flatnonzero(bad))
            keep &= ~bad
    interner = Interner()
    codes: dict[str, CodeArray] = {}
    for name in (*spec.names, *spec.raw):  # literal in every template: a code per template
        per_template = np.zeros(max(len(known), 1), np.int32)
        for t in used:
            per_template[t] = interner.code(*known[t].key_of(name))
        codes[name] = per_template[kind]
    for name in spec.indices:
        got, flag = field(name)
        null = flag == 2
        ok = null | ((flag == 1) & (np.abs(got) < MAX_INDEX))
        bad = ~ok & keep
        reasons.update((int(r), f"field {name!r} is not an index (an int of magnitude under {MAX_INDEX}) or null")
                       for r in np.flatnonzero(bad))  # fmt: skip
        keep &= ~bad
        codes[name] = _index_codes(np.where(ok & ~null, got, 0).astype(np.int64), null, interner)
    columns = Columns(stream, rows, numbers, tags, {k: {} for k in spec.numbers}, codes, tuple(interner.values))
    offsets = starts[matched].astype(np.int64) + base
    refused = [(int(offsets[r]), reason) for r, reason in sorted(reasons.items())]
    if not keep.all():
        columns, offsets = columns.take(keep), offsets[keep]
    return Scanned(columns, offsets, refused, unmatched)


SMALL_INDEX: Final = 1 << 16
"""Indices spanning fewer values than this are coded through a table (a GPU index, a rank, -1 for none); others
through a sort."""


def _index_codes(ints: npt.NDArray[np.int64], null: npt.NDArray[np.bool_], interner: Interner) -> CodeArray:
    """Each row's code: its int's, or None's where ``null``; codes handed out in order of value."""
    if not len(ints):
        return np.zeros(0, np.int32)
    if null.any():
        interner.code_of(None)
    low = int(ints.min())
    if int(ints.max()) - low < SMALL_INDEX:
        shifted = ints - low
        seen = np.zeros(int(shifted.max()) + 1, bool)
        seen[shifted[~null]] = True
        table = np.zeros(len(seen), np.int32)
        for value in np.flatnonzero(seen).tolist():
            table[value] = interner.code_of(value + low)
        codes = table[shifted]
    else:
        distinct, inverse = np.unique(np.where(null, 0, ints), return_inverse=True)
        table = np.array([interner.code_of(int(v)) for v in distinct.tolist()], np.int32)
        codes = table[inverse.ravel()]
    return np.where(null, interner.code_of(None), codes).astype(np.int32) if null.any() else codes


def _runs(mask: npt.NDArray[np.bool_], starts: npt.NDArray[np.int64], size: int) -> list[tuple[int, int]]:
    """(start, stop) in the block of each run of lines where ``mask`` holds (stop: the run's last newline)."""
    if not mask.any():
        return []
    edges = np.flatnonzero(np.diff(np.concatenate([[False], mask, [False]]).astype(np.int8)))
    ends = np.concatenate([starts[1:] - 1, [size]])
    return [(int(starts[a]), int(ends[b - 1])) for a, b in zip(edges[::2], edges[1::2], strict=True)]
