"""Flat telemetry lines of a learned shape read by the compiled scanner: the bulk of a long run, at C speed.

Contract:

- :class:`Templates` learns, per stream, the exact bytes a flat record of
  one shape is written with (:meth:`Templates.learn`): every numeric field of
  :data:`~.columns.SPECS` (and a GPU index) a number slot, every name a
  literal string (so a host is part of its shape: a run has a few), any other
  field a number slot or a literal. A template is kept only when the scanner,
  given the line it was learned from, reads back exactly the numbers and JSON
  types ``json.loads`` gives. At most :data:`MAX_TEMPLATES` per stream, and
  :data:`MAX_ATTEMPTS` lines tried.
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
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from miles_tui.core.telemetry.hours.columns import SPECS, CodeArray, Columns, Interner
from miles_tui.core.telemetry.line_templates import AVAILABLE as SCANNER_BUILT
from miles_tui.core.telemetry.record_table import TAG_FLOAT, TAG_INT, TAG_NONE
from miles_tui.core.telemetry.stream_records import MAX_INDEX, MAX_TEXT

_scan: Callable[..., tuple[int, int, int]] | None
try:
    from miles_tui.core.telemetry._line_scan import scan as _scan
except ImportError:
    _scan = None

SCANNED_STREAMS: Final = frozenset({"gpu_util"})
"""Streams read by the scanner (their names are few: a template per host); the others by msgspec."""

AVAILABLE: Final = SCANNER_BUILT and _scan is not None

MAX_TEMPLATES: Final = 256
MAX_ATTEMPTS: Final = 4096
LEARN_PER_BLOCK: Final = 64
"""Unmatched lines of a block (spread over it) tried as new templates before the block is scanned again ..."""
LEARN_ROUNDS: Final = 4
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


class Templates:
    """The templates learned for one stream; see the module docstring."""

    def __init__(self, stream: str) -> None:
        self.stream = stream
        self.known: tuple[Template, ...] = ()
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
        for style in _STYLES:
            template = _render(record, slots, constants, *style)
            if template is not None and _reads_back(line, template, numbers):
                with self._lock:
                    if template not in self.known and len(self.known) < MAX_TEMPLATES:
                        self.known = (*self.known, template)
                return template
        return None


_registry: dict[str, Templates] = {}
_registry_lock = threading.Lock()


def templates_for(stream: str) -> Templates:
    """The process's templates of ``stream``."""
    with _registry_lock:
        return _registry.setdefault(stream, Templates(stream))


def _number(value: Any) -> bool:
    return value is None or (type(value) in (int, float) and not (type(value) is int and abs(value) >= 10**15))


def _shape(stream: str, record: Any) -> tuple[dict[str, int], dict[str, Any], list[Any]] | None:
    """(field -> slot, field -> literal name, the slot values in order) of a record the scanner can read."""
    if not isinstance(record, dict):
        return None
    spec = SPECS[stream]
    numeric = {*spec.numbers, *spec.indices}
    slots: dict[str, int] = {}
    constants: dict[str, Any] = {}
    numbers: list[Any] = []
    for key, value in record.items():
        if key in numeric:
            if not _number(value) or (key in spec.indices and type(value) is not int):
                return None
            slots[key] = len(numbers)
            numbers.append(value)
        elif key in spec.names:
            if type(value) is not str or len(value) > MAX_TEXT:
                return None
            constants[key] = value
        elif type(value) in (int, float) and _number(value):
            slots[key] = len(numbers)
            numbers.append(value)
    if any(f not in slots for f in spec.times) or any(f not in constants for f, null in spec.names.items() if not null):
        return None
    if spec.raw:  # nested values (GPU lists, labels) are not read here
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
    order = sorted(slots, key=slots.__getitem__)
    spec_fields = set(SPECS_FIELDS)
    return Template(
        tuple(p.encode() for p in pieces),
        tuple(f if f in spec_fields else None for f in order),
        tuple(sorted(constants.items())),
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
    assert _scan is not None
    learned = templates_for(stream)
    kinds, starts, values, flags = _scan_all(data, learned.known)
    for _ in range(LEARN_ROUNDS):
        missed = np.flatnonzero(kinds < 0)
        if not len(missed):
            break
        before = len(learned.known)
        for index in missed[:: max(1, len(missed) // LEARN_PER_BLOCK)][:LEARN_PER_BLOCK].tolist():
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
    count = np.array([len(t.segments) - 1 for t in known] or [0], np.int64)
    first = np.concatenate([[0], np.cumsum(count[kind])[:-1]]) if len(kind) else np.zeros(0, np.int64)
    rows = len(kind)

    def field(name: str) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.uint8]]:
        slot = np.array([t.slots.index(name) if name in t.slots else -1 for t in known] or [-1], np.int64)[kind]
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
            bad = ~((tag <= TAG_INT) & np.isfinite(got)) & keep
            reasons.update((int(r), f"field {name!r} is not a finite number (a time)") for r in np.flatnonzero(bad))
            keep &= ~bad
    interner = Interner()
    codes: dict[str, CodeArray] = {}
    for name in spec.names:
        table = np.array([interner.code_of(dict(t.constants).get(name)) for t in known] or [0], np.int32)
        codes[name] = table[kind] if rows else np.zeros(0, np.int32)
    for name in spec.indices:
        got, flag = field(name)
        ok = (flag == 1) & (np.abs(got) < MAX_INDEX)
        bad = ~ok & keep
        reasons.update((int(r), f"field {name!r} is not an index (an int of magnitude under {MAX_INDEX}) or null")
                       for r in np.flatnonzero(bad))  # fmt: skip
        keep &= ~bad
        ints = np.where(ok, got, 0).astype(np.int64)
        distinct, inverse = np.unique(ints, return_inverse=True)
        table = np.array([interner.code_of(int(v)) for v in distinct.tolist()] or [0], np.int32)
        codes[name] = table[inverse.ravel()] if rows else np.zeros(0, np.int32)
    columns = Columns(stream, rows, numbers, tags, {k: {} for k in spec.numbers}, codes, tuple(interner.values))
    offsets = starts[matched].astype(np.int64) + base
    refused = [(int(offsets[r]), reason) for r, reason in sorted(reasons.items())]
    if not keep.all():
        columns, offsets = columns.take(keep), offsets[keep]
    return Scanned(columns, offsets, refused, unmatched)


def _runs(mask: npt.NDArray[np.bool_], starts: npt.NDArray[np.int64], size: int) -> list[tuple[int, int]]:
    """(start, stop) in the block of each run of lines where ``mask`` holds (stop: the run's last newline)."""
    if not mask.any():
        return []
    edges = np.flatnonzero(np.diff(np.concatenate([[False], mask, [False]]).astype(np.int8)))
    ends = np.concatenate([starts[1:] - 1, [size]])
    return [(int(starts[a]), int(ends[b - 1])) for a, b in zip(edges[::2], edges[1::2], strict=True)]
