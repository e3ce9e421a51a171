"""metrics.jsonl lines of a learned template read straight into numbers by the compiled scanner, without the GIL.

Contract:

- :class:`Templates` learns, from lines the general decoder read, the exact
  bytes a record of that shape is written with: the line with its numbers cut
  out (:meth:`Templates.learn`). A template is kept only when the scanner,
  given that line and that template, reads back exactly the numbers and the
  JSON types ``json.loads`` gives. Records with anything but numbers as ``ts``,
  ``step`` and metric values, with other fields, or with integers of more than
  15 digits are never learned. Learning is bounded (:data:`MAX_TEMPLATES`,
  :data:`MAX_SLOTS`, :data:`MAX_ATTEMPTS`).
- :func:`scan_decode` decodes a block like :func:`~.metric_batch.decode_block`,
  with the same result (every value as ``json.loads`` gives it, bad lines the
  same): lines that match a template are read by the scanner (a line matches
  only when it is exactly the template with JSON numbers, or NaN/Infinity
  literals, in its slots); every other run of lines is decoded by
  ``decode_block``, and the scanner learns from it. ``scans`` runs the scanner
  over parts of the block (threads, when the caller has them: the scanner
  releases the GIL).
- :data:`AVAILABLE` is False when the compiled scanner is not built (no C
  compiler at install time) or ``MILES_TUI_NO_SCANNER`` is set: callers then use
  the general decoder only (slower, the same result).
"""

from __future__ import annotations

import json
import math
import os
import struct
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from miles_tui.core.telemetry.metrics.metric_batch import BadLine, KeyPoints, MetricBatch, cut_lines, decode_block
from miles_tui.core.telemetry.metrics.metric_values import Values

_scan: Callable[..., tuple[int, int, int]] | None
try:
    from miles_tui.core.telemetry.metrics._line_scan import scan as _scan
except ImportError:  # not built: the general decoder does all the work
    _scan = None

AVAILABLE: Final = _scan is not None and not os.environ.get("MILES_TUI_NO_SCANNER")

MAX_TEMPLATES: Final = 64
MAX_SLOTS: Final = 258
"""Numbers per template: ts, step and 256 metrics."""
MAX_ATTEMPTS: Final = 4096
"""Lines a registry tries to learn from before it stops trying (a file of unlearnable lines stops paying)."""
LEARN_PER_RUN: Final = 4
LEARN_RUNS: Final = 8
"""Runs of unmatched lines in a scanned part, and lines of each, that are tried to learn from."""
LEARN_ROUNDS: Final = 4
"""Times a part is scanned again because its unmatched lines taught a new template."""
MAX_INT: Final = 10**15
"""Integers the scanner reads (at most 15 digits), so every one is exact in a float64."""

_INT: Final = 1
_NULL: Final = 2
"""The scanner's flags: an integer, a null (else a float)."""
_STYLES: Final = tuple(
    (item, key, ascii_) for item in (b",", b", ") for key in (b":", b": ") for ascii_ in (True, False)
)
"""The separators and escaping a template is tried with: json.dumps' compact and default ones, raw or escaped."""


@dataclass(frozen=True)
class Template:
    """The bytes of one record shape around its numbers, and what each number is."""

    segments: tuple[bytes, ...]
    step_key: str
    slots: tuple[str | None, ...]
    """Per number: its metric's name, or None for ``ts`` and ``step``."""
    ts: int
    """The slot of ``ts``."""
    step: int
    """The slot of ``step``."""


class Templates:
    """See the module docstring."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.known: tuple[Template, ...] = ()
        self.attempts = 0

    def learn(self, line: bytes) -> Template | None:
        """Learn the template of ``line`` (a line the general decoder read as a record); None if it has none."""
        with self._lock:
            if len(self.known) >= MAX_TEMPLATES or self.attempts >= MAX_ATTEMPTS:
                return None
            self.attempts += 1
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            return None
        numbers = _numbers(record)
        if numbers is None:
            return None
        for style in _STYLES:
            template = _render(record, *style)
            if template is not None and _reads_back(line, template, numbers):
                with self._lock:
                    if template not in self.known and len(self.known) < MAX_TEMPLATES:
                        self.known = (*self.known, template)
                return template
        return None

    def matches(self, line: bytes) -> bool:
        """Some known template matches ``line``."""
        known = self.known
        return bool(known) and _scan_all(line, 0, len(line), known, Buffers(1, MAX_SLOTS)).kinds[0] >= 0


TEMPLATES: Final = Templates()


def _numbers(record: Any) -> list[int | float | None] | None:
    """The values a template of ``record`` reads, in order; None when it is not a record of numbers (and nulls,
    but for ``ts``) only."""
    if type(record) is not dict or set(record) != {"ts", "step_key", "step", "metrics"}:
        return None
    metrics = record["metrics"]
    if type(record["step_key"]) is not str or type(metrics) is not dict or len(metrics) > MAX_SLOTS - 2:
        return None
    if record["ts"] is None:
        return None
    numbers: list[int | float | None] = []
    for key, value in record.items():
        if key == "metrics":
            numbers += metrics.values()
        elif key != "step_key":
            numbers.append(value)
    for value in numbers:
        kind = type(value)
        if value is not None and kind is not float and (kind is not int or not -MAX_INT < value < MAX_INT):
            return None
    return numbers


def _render(record: dict[str, Any], item: bytes, key: bytes, ascii_: bool) -> Template | None:
    segments: list[bytes] = []
    slots: list[str | None] = []
    current = [b"{"]
    places: dict[str, int] = {}

    def text(value: str) -> bytes:
        return json.dumps(value, ensure_ascii=ascii_).encode("utf-8", "surrogatepass")

    def slot(name: str | None) -> None:
        segments.append(b"".join(current))
        current.clear()
        slots.append(name)

    for i, (name, value) in enumerate(record.items()):
        current.append((item if i else b"") + text(name) + key)
        if name == "metrics":
            current.append(b"{")
            for j, metric in enumerate(value):
                current.append((item if j else b"") + text(metric) + key)
                slot(metric)
            current.append(b"}")
        elif name == "step_key":
            current.append(text(value))
        else:
            places[name] = len(slots)
            slot(None)
    current.append(b"}")
    segments.append(b"".join(current))
    if any(not s for s in segments[1:-1]):
        return None
    return Template(tuple(segments), record["step_key"], tuple(slots), places["ts"], places["step"])


def _reads_back(line: bytes, template: Template, numbers: list[int | float | None]) -> bool:
    """The scanner reads ``line`` with ``template`` alone, and gets ``numbers`` with their JSON types."""
    found = _scan_all(line, 0, len(line), (template,), Buffers(1, MAX_SLOTS))
    if found.kinds[0] != 0:
        return False
    values, flags = found.values.tolist(), found.flags.tolist()
    return len(values) == len(numbers) and all(map(_same, values, flags, numbers))


def _same(value: float, flag: int, number: int | float | None) -> bool:
    if number is None:
        return flag == _NULL
    if flag != (type(number) is int):
        return False
    if math.isnan(value):
        return math.isnan(number)
    return struct.pack("<d", value) == struct.pack("<d", float(number))


@dataclass(frozen=True)
class _Scanned:
    kinds: npt.NDArray[np.int32]
    starts: npt.NDArray[np.int64]
    values: npt.NDArray[np.float64]
    flags: npt.NDArray[np.uint8]


class Buffers:
    """The scanner's output arrays, kept from one block to the next: memory written once is cheap to write again
    (a fresh array's first write faults every page in). One scan at a time uses a set; :class:`BufferPool` hands
    them out."""

    def __init__(self, lines: int = 1024, numbers: int = 32768) -> None:
        self.kinds = np.empty(lines, np.int32)
        self.starts = np.empty(lines, np.int64)
        self.values = np.empty(numbers, np.float64)
        self.flags = np.empty(numbers, np.uint8)

    def grow(self, lines: int, numbers: int) -> None:
        """Room for more lines or numbers than now (what was written is kept)."""
        if lines > len(self.kinds):
            self.kinds = np.concatenate([self.kinds, np.empty(lines - len(self.kinds), np.int32)])
            self.starts = np.concatenate([self.starts, np.empty(lines - len(self.starts), np.int64)])
        if numbers > len(self.values):
            self.values = np.concatenate([self.values, np.empty(numbers - len(self.values), np.float64)])
            self.flags = np.concatenate([self.flags, np.empty(numbers - len(self.flags), np.uint8)])


class BufferPool:
    """Buffer sets for concurrent scans, reused until the pool is dropped."""

    def __init__(self) -> None:
        self._free: list[Buffers] = []
        self._lock = threading.Lock()

    def take(self) -> Buffers:
        with self._lock:
            return self._free.pop() if self._free else Buffers()

    def give(self, buffers: Buffers) -> None:
        with self._lock:
            self._free.append(buffers)


def _scan_all(block: bytes, lo: int, hi: int, templates: tuple[Template, ...], buffers: Buffers) -> _Scanned:
    """Every line of ``block[lo:hi]`` scanned into ``buffers`` (grown as needed); views of them."""
    assert _scan is not None
    segments = tuple(t.segments for t in templates)
    lines = numbers = 0
    at = lo
    b = buffers
    while True:
        scanned, written, at = _scan(
            block, at, hi, segments, b.kinds[lines:], b.starts[lines:], b.values[numbers:], b.flags[numbers:]
        )
        lines += scanned
        numbers += written
        if at > hi:
            return _Scanned(b.kinds[:lines], b.starts[:lines], b.values[:numbers], b.flags[:numbers])
        full = lines == len(b.kinds)  # else the next line's numbers did not fit
        b.grow(2 * len(b.kinds) if full else 0, 0 if full else 2 * len(b.values) + MAX_SLOTS)


Scans = Callable[[Callable[[tuple[int, int]], Any], Sequence[tuple[int, int]]], Iterable[Any]]
"""Runs a function over parts of a block: ``map``, or a thread pool's ``map``."""


def scan_decode(
    block: bytes,
    base: int,
    *,
    parts: int = 1,
    scans: Scans = map,
    templates: Templates = TEMPLATES,
    buffers: BufferPool | None = None,
    end: int | None = None,
) -> tuple[MetricBatch, list[BadLine]]:
    """Decode complete lines starting at byte ``base``, as :func:`decode_block` does; see the module docstring.
    ``buffers``: where the scanner's output arrays are kept between calls (default: made for this call).
    ``end``: the lines are ``block[:end]`` (default: all of it), read without copying them out."""
    known = templates.known
    pool = BufferPool() if buffers is None else buffers

    def one(cut: tuple[int, int]) -> tuple[int, int, _Scanned, Buffers]:
        lo, hi = cut
        taken = pool.take()
        return lo, hi, _scan_all(block, lo, hi, known, taken), taken

    batches: list[MetricBatch] = []
    bad: list[BadLine] = []
    stop = len(block) if end is None else end
    for _, hi, scanned, taken in scans(one, cut_lines(block, stop, max(1, -(-stop // parts)))):
        try:
            batch, lines = _assemble(block, base, hi, known, scanned, templates, taken)
        finally:
            pool.give(taken)
        batches.append(batch)
        bad += lines
    return MetricBatch.concat(batches), bad


def _assemble(
    block: bytes,
    base: int,
    hi: int,
    known: tuple[Template, ...],
    scanned: _Scanned,
    templates: Templates,
    buffers: Buffers,
) -> tuple[MetricBatch, list[BadLine]]:
    """The batch of one scanned part: matched lines from the scanner's numbers, other runs by ``decode_block``."""
    kinds, starts = scanned.kinds, scanned.starts
    runs = _runs(kinds)
    for _ in range(LEARN_ROUNDS):  # new shapes (learned here, or by another part): the part is scanned again
        if not runs:
            break
        _learn_from(block, starts, hi, runs, templates)
        if templates.known == known:
            break
        known = templates.known
        scanned = _scan_all(block, int(starts[0]), hi, known, buffers)
        kinds, starts = scanned.kinds, scanned.starts
        runs = _runs(kinds)
    offsets = _offsets(kinds, known)
    if (scanned.flags == _NULL).any():  # a null ts makes a line malformed: the general decoder says why
        kinds = _without_null_ts(kinds, offsets, known, scanned.flags)
        runs = _runs(kinds)
    matched = kinds >= 0
    contributes = matched.astype(np.int64)
    decoded: list[tuple[int, MetricBatch]] = []
    bad: list[BadLine] = []
    for first, stop in runs:
        lo, end = int(starts[first]), _end(starts, stop, hi)
        batch, wrong = decode_block(block[lo:end], base + lo)
        bad += wrong
        contributes[first] = len(batch)
        decoded.append((first, batch))
    before = np.cumsum(contributes) - contributes
    pieces: list[tuple[npt.NDArray[np.int64], MetricBatch]] = [
        (before[first] + np.arange(len(batch)), batch) for first, batch in decoded if len(batch)
    ]
    if matched.any():
        for kind in np.unique(kinds[matched]).tolist():
            rows = np.flatnonzero(kinds == kind)
            pieces.append((before[rows], _template_batch(known[kind], offsets[rows], scanned)))
    return _interleave(pieces, int(contributes.sum())), bad


def _offsets(kinds: npt.NDArray[np.int32], known: tuple[Template, ...]) -> npt.NDArray[np.int64]:
    """Where each matched line's numbers start in the scanner's output."""
    widths = np.array([len(t.slots) for t in known] + [0], np.int64)[kinds]  # kind -1: the 0 at the end
    return np.cumsum(widths) - widths


def _without_null_ts(
    kinds: npt.NDArray[np.int32],
    offsets: npt.NDArray[np.int64],
    known: tuple[Template, ...],
    flags: npt.NDArray[np.uint8],
) -> npt.NDArray[np.int32]:
    kinds = kinds.copy()
    for kind, template in enumerate(known):
        rows = np.flatnonzero(kinds == kind)
        kinds[rows[flags[offsets[rows] + template.ts] == _NULL]] = -1
    return kinds


def _runs(kinds: npt.NDArray[np.int32]) -> list[tuple[int, int]]:
    """The (first, stop) line indices of each run of lines no template matched."""
    unmatched = (kinds < 0).view(np.int8)
    if not unmatched.any():
        return []
    edges = np.flatnonzero(np.diff(np.concatenate(([0], unmatched, [0]))))
    return list(zip(edges[::2].tolist(), edges[1::2].tolist(), strict=True))


def _end(starts: npt.NDArray[np.int64], stop: int, hi: int) -> int:
    """Where the line before line ``stop`` ends (``hi`` after the last line)."""
    return int(starts[stop]) - 1 if stop < len(starts) else hi


_NOT_NUMBERS: Final = (b"true", b"false")
"""Words of lines that are (almost always) not records of numbers only: not tried, and not counted as tries."""


def _learn_from(
    block: bytes, starts: npt.NDArray[np.int64], hi: int, runs: list[tuple[int, int]], templates: Templates
) -> None:
    """Learn from the first lines of the first runs (a line a template learned now matches is skipped)."""
    for first, stop in runs[:LEARN_RUNS]:
        for line in block[int(starts[first]) : _end(starts, stop, hi)].split(b"\n", LEARN_PER_RUN)[:LEARN_PER_RUN]:
            if line.strip() and not any(word in line for word in _NOT_NUMBERS) and not templates.matches(line):
                templates.learn(line)


def _template_batch(template: Template, offsets: npt.NDArray[np.int64], scanned: _Scanned) -> MetricBatch:
    """The records of the lines of one template, their numbers at ``offsets`` in the scanner's output."""
    at = offsets[:, None] + np.arange(len(template.slots))
    matrix = scanned.values[at].T
    flags = scanned.flags[at].T
    rows = np.arange(len(offsets), dtype=np.uint32)
    columns = [_column(matrix[j], flags[j]) for j in range(len(matrix))]
    keys = {
        name: KeyPoints(rows, column) for name, column in zip(template.slots, columns, strict=True) if name is not None
    }
    return MetricBatch(
        columns[template.ts], columns[template.step], np.zeros(len(offsets), np.uint32), (template.step_key,), keys
    )


def _column(num: npt.NDArray[np.float64], flags: npt.NDArray[np.uint8]) -> Values:
    ints = flags == _INT
    raw: dict[int, Any] = {}
    if flags.max(initial=0) >= _NULL:
        raw = dict.fromkeys(np.flatnonzero(flags == _NULL).tolist())
    return Values(num.copy(), ints if ints.any() else None, raw)


def _interleave(pieces: list[tuple[npt.NDArray[np.int64], MetricBatch]], total: int) -> MetricBatch:
    """One batch of ``total`` records: each piece's records placed at its positions (which cover 0..total-1)."""
    if len(pieces) == 1 and len(pieces[0][1]) == total:
        return pieces[0][1]
    names: dict[str, int] = {}
    step_key = np.zeros(total, np.uint32)
    parts: dict[str, list[tuple[npt.NDArray[np.int64], Values]]] = {}
    for positions, batch in pieces:
        remap = np.array([names.setdefault(name, len(names)) for name in batch.step_keys], np.uint32)
        if len(remap):
            step_key[positions] = remap[batch.step_key]
        for name, points in batch.keys.items():
            parts.setdefault(name, []).append((positions[points.records], points.values))
    keys = {
        name: KeyPoints.merged(found)
        for name, found in sorted(parts.items(), key=lambda item: min(int(r[0]) for r, _ in item[1]))
    }
    return MetricBatch(
        Values.scatter([(p, b.ts) for p, b in pieces], total),
        Values.scatter([(p, b.step) for p, b in pieces], total),
        step_key,
        tuple(names),
        keys,
    )
