"""A partition file's decoded columns (and its summaries), kept in the user's cache: a settled hour is parsed once.

Contract:

- An hour has two entries under :func:`miles_tui.core.base.cache_dir.cache_root`
  (never in the run), each a folder with a ``manifest.json``: ``partitions/KEY/``
  its columns and ``partition-summaries/KEY/`` its summaries, each one packed
  file of arrays (:func:`_packed`): the cap trims the columns of hours no window
  reads and keeps the summaries a whole-run view reads. KEY hashes the file's
  identity (absolute path, ``st_dev``, ``st_ino``) and the format. A caller
  that reads summaries only (``report``) may save the summaries' entry alone;
  the columns are then read from the file by the first view that asks.
- An entry covers the bytes ``[0, end)`` of its file (``end`` just after a
  newline): their records as :class:`~.columns.Columns`, the malformed lines
  among them (at most :data:`KEPT_MALFORMED`, and their count), and any extra
  arrays the caller adds (a GPU stream's bucket summaries). Before use, the
  first and last :data:`~miles_tui.core.telemetry.metrics.metric_workers.WINDOW` bytes
  of ``[0, end)`` are hashed and compared: a file that shrank below ``end`` or
  whose covered bytes changed drops the entry.
- Arrays are stored in the narrowest exact type (an int column as int8..int32,
  a float column that float32 holds exactly as float32) and widened back to
  float64 on load, so a loaded entry equals the decode it was saved from.
- Loading never runs code: ``np.load(allow_pickle=False)`` and JSON, every
  array's type, shape and codes are checked; an entry that fails any check is
  dropped, never trusted. Writes are atomic (a temporary folder renamed into
  place), best effort, count against the cache's cap, and nothing is read or
  written when caching is off.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from miles_tui.core.base import cache_dir
from miles_tui.core.telemetry.hours.columns import SPECS, Columns
from miles_tui.core.telemetry.metrics.metric_workers import WINDOW, Fingerprint
from miles_tui.core.telemetry.record_table import TAG_OTHER

FORMAT: Final = 8
"""Bump when the layout or a decoding rule changes: entries of another format are misses."""

SUMMARY_KIND: Final = "partition-summaries"
"""The cache's folder for an hour's summaries (GPU buckets, phase digest and covers, engine digest): an entry of
its own, so the cap's least-recently-used trimming drops the columns of hours no window reads first."""

KIND: Final = "partitions"
"""The cache's folder under the root."""

KEPT_MALFORMED: Final = 100
"""Malformed lines of a partition remembered with their offsets (all are counted)."""


@dataclass(frozen=True, eq=False)
class Entry:
    """What an entry holds."""

    columns: Columns | None
    """The records of ``[0, end)`` (None when loaded without them)."""
    size: int
    """Records."""
    span: tuple[float, float] | None
    """Earliest and latest time the records mention."""
    end: int
    """Bytes covered."""
    ino: int
    """The file's inode when saved."""
    malformed: tuple[tuple[int, str], ...]
    """(offset, reason) of the first malformed lines."""
    malformed_count: int
    """Malformed lines in ``[0, end)``."""
    extra: Mapping[str, npt.NDArray[Any]]
    """The caller's other arrays."""
    extra_meta: Mapping[str, Any]
    """The caller's JSON."""


def enabled() -> bool:
    """Whether entries may be read and written (not under ``--no-cache``)."""
    return cache_dir.enabled()


def _key(path: Path, st: os.stat_result, kind: str = KIND) -> Path:
    identity = json.dumps([FORMAT, str(path.absolute()), st.st_dev, st.st_ino]).encode()
    return cache_dir.cache_root() / kind / hashlib.sha256(identity).hexdigest()[:40]


def fingerprint(path: Path, end: int) -> Fingerprint:
    """The fingerprint of ``path``'s bytes ``[0, end)``, read now."""
    with open(path, "rb") as handle:
        head = handle.read(min(WINDOW, end))
        handle.seek(max(0, end - WINDOW))
        tail = handle.read(end - max(0, end - WINDOW))
    return Fingerprint.of(head, tail, end)


def load(path: Path, stream: str, *, with_columns: bool = True) -> Entry | None:
    """The cached entry of ``path`` when it still covers the file's bytes; None otherwise (or caching off).
    Without ``with_columns`` only the hour's summaries are read (their own, small entry)."""
    summary = _load(path, stream, SUMMARY_KIND, with_columns=False)
    if summary is None or not with_columns:
        return summary
    raw = _load(path, stream, KIND, with_columns=True)
    if raw is None or raw.end != summary.end:
        return None
    return Entry(raw.columns, raw.size, raw.span, raw.end, raw.ino, summary.malformed, summary.malformed_count,
                 summary.extra, summary.extra_meta)  # fmt: skip


def _load(path: Path, stream: str, kind: str, *, with_columns: bool) -> Entry | None:
    if not cache_dir.enabled():
        return None
    try:
        st = os.stat(path)
        folder = _key(path, st, kind)
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    try:
        entry = _read(folder, manifest, stream, st, with_columns)
        if fingerprint(path, entry.end) != Fingerprint(entry.end, manifest["head"], manifest["tail"]):
            raise ValueError("the covered bytes changed")
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        shutil.rmtree(folder, ignore_errors=True)
        return None
    cache_dir.touch(folder)
    return entry


def _read(folder: Path, manifest: dict[str, Any], stream: str, st: os.stat_result, with_columns: bool) -> Entry:
    if manifest["format"] != FORMAT or manifest["stream"] != stream:
        raise ValueError("another format")
    end, size = int(manifest["end"]), int(manifest["size"])
    if not 0 < end <= st.st_size or size < 0:
        raise ValueError("stale")
    span = manifest["span"]
    span = None if span is None else (float(span[0]), float(span[1]))
    extra = _read_packed(folder / "extra.bin", manifest["extra"])
    malformed = tuple((int(o), str(r)) for o, r in manifest["malformed"])
    count = int(manifest["malformed_count"])
    if not with_columns:
        return Entry(None, size, span, end, st.st_ino, malformed, count, extra, manifest["extra_meta"])
    spec = SPECS[stream]
    values = tuple(manifest["values"])
    arrays = _read_packed(folder / "columns.bin", manifest["columns"])
    numbers, tags, other, codes = {}, {}, {}, {}
    for name in spec.numbers:
        column = arrays[f"n.{name}"]
        tag = manifest["tags"][name]
        tag_array = np.full(size, int(tag), np.uint8) if isinstance(tag, int) else arrays[f"t.{name}"].copy()
        if column.shape != (size,) or tag_array.shape != (size,) or tag_array.dtype != np.uint8:
            raise ValueError(f"{name}: wrong shape")
        numbers[name], tags[name] = column.astype(np.float64), tag_array
        other[name] = {int(row): value for row, value in manifest["other"][name]}
        if any(not 0 <= r < size or tag_array[r] != TAG_OTHER for r in other[name]):
            raise ValueError(f"{name}: stray value")
    for name in spec.shared:
        code = arrays[f"c.{name}"]
        if (
            code.shape != (size,)
            or code.dtype.kind not in "iu"
            or (size and not 0 <= code.min() <= code.max() < len(values))
        ):
            raise ValueError(f"{name}: bad codes")
        codes[name] = code.astype(np.int32)
    columns = Columns(stream, size, numbers, tags, other, codes, values)
    return Entry(columns, size, span, end, st.st_ino, malformed, count, extra, manifest["extra_meta"])


PACKED_TYPES: Final = frozenset({"<f8", "<f4", "<i8", "<i4", "<i2", "|i1", "<u2", "<u1", "|u1", "|b1"})
"""The array types an entry's packed file may hold (a column narrowed by :func:`_narrow`, a code, a summary)."""


def _packed(arrays: Mapping[str, npt.NDArray[Any]]) -> tuple[dict[str, list[Any]], bytes]:
    """The arrays as one blob (each 8-byte aligned) and their index: name -> [type, offset, length]. One file
    to read for an hour's summaries, not one per array (a month of hours was thousands of opens)."""
    index: dict[str, list[Any]] = {}
    parts: list[bytes] = []
    offset = 0
    for name, array in sorted(arrays.items()):
        data = np.ascontiguousarray(array)
        if data.dtype.byteorder == ">" or data.ndim != 1:
            raise ValueError(f"{name}: cannot pack")
        raw = data.tobytes()
        index[name] = [data.dtype.str, offset, len(data)]
        pad = (-len(raw)) % 8
        parts.append(raw + bytes(pad))
        offset += len(raw) + pad
    return index, b"".join(parts)


def _read_packed(path: Path, index: Mapping[str, Any]) -> dict[str, npt.NDArray[Any]]:
    """Arrays of a packed file, each checked against the file's size and the allowed types."""
    if not index:
        return {}
    blob = path.read_bytes()
    out: dict[str, npt.NDArray[Any]] = {}
    for name, (kind, offset, length) in index.items():
        if kind not in PACKED_TYPES or type(offset) is not int or type(length) is not int or offset < 0 or length < 0:
            raise ValueError(f"{name}: bad index")
        dtype = np.dtype(kind)
        if offset + length * dtype.itemsize > len(blob):
            raise ValueError(f"{name}: past the end of the file")
        out[name] = np.frombuffer(blob, dtype, length, offset)
    return out


def _narrow(column: npt.NDArray[np.float64], tags: npt.NDArray[np.uint8]) -> npt.NDArray[Any]:
    """The narrowest type that holds every value of a float64 column exactly."""
    if not len(column):
        return column
    if np.array_equal(column, np.round(column)) and np.isfinite(column).all():
        lo, hi = column.min(), column.max()
        for kind in (np.int8, np.int16, np.int32):
            info = np.iinfo(kind)
            if info.min <= lo and hi <= info.max:
                return column.astype(kind)
    with np.errstate(over="ignore"):  # a value no float32 holds: compared below, kept as float64
        single = column.astype(np.float32)
    same = np.array_equal(single.astype(np.float64), column, equal_nan=True)
    if same and np.array_equal(np.signbit(single), np.signbit(column)):
        return single
    return column


def save(
    path: Path,
    entry: Entry,
    *,
    extra: Mapping[str, npt.NDArray[Any]] | None = None,
    extra_meta: Mapping[str, Any] | None = None,
    columns: bool = True,
) -> bool:
    """Write ``entry`` for ``path`` (whose bytes ``[0, entry.end)`` it holds); False when it could not be.
    Without ``columns`` only the summaries' entry is written (a columns entry of the file is left as it is:
    :func:`load` with columns checks both cover the same bytes)."""
    if not cache_dir.enabled():
        return False
    try:
        st = os.stat(path)
        if st.st_ino != entry.ino or st.st_size < entry.end:
            return False
        mark = fingerprint(path, entry.end)
    except OSError:
        return False
    # The hour's columns and its summaries are two entries: the cap's least-recently-used trimming drops the
    # columns of hours no window reads, and keeps the summaries every whole-run view reads.
    raw = not columns or _save(path, st, KIND, lambda temp: _write(temp, path, entry, mark, {}, {}, columns=True))
    return raw and _save(
        path,
        st,
        SUMMARY_KIND,
        lambda temp: _write(temp, path, entry, mark, extra or {}, extra_meta or {}, columns=False),
    )


def _save(path: Path, st: os.stat_result, kind: str, write: Callable[[Path], int]) -> bool:
    try:
        folder = _key(path, st, kind)
        folder.parent.mkdir(parents=True, exist_ok=True)
        temp = folder.parent / f".{folder.name}.{secrets.token_hex(4)}"
        temp.mkdir()
    except OSError:
        return False
    try:
        written = write(temp)
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(folder)
        os.rename(temp, folder)
    except (OSError, ValueError, TypeError):
        shutil.rmtree(temp, ignore_errors=True)
        return False
    cache_dir.note_write(written, folder)
    return True


def _write(
    temp: Path,
    path: Path,
    entry: Entry,
    mark: Fingerprint,
    extra: Mapping[str, npt.NDArray[Any]],
    extra_meta: Mapping[str, Any],
    *,
    columns: bool,
) -> int:
    """Write one of an hour's two entries into ``temp``: its columns (``columns``) or its summaries."""
    data = entry.columns
    if data is None:
        raise ValueError("an entry is saved with its columns")
    arrays: dict[str, npt.NDArray[Any]] = {}
    tags: dict[str, Any] = {}
    if columns:  # the summaries' entry holds none of them: nothing to narrow
        for name, column in data.numbers.items():
            tag = data.tags[name]
            arrays[f"n.{name}"] = _narrow(column, tag)
            if len(tag) and (tag == tag[0]).all():
                tags[name] = int(tag[0])
            else:
                tags[name] = None
                arrays[f"t.{name}"] = tag
        for name, code in data.codes.items():
            top = int(code.max()) if len(code) else 0
            arrays[f"c.{name}"] = code.astype(np.uint8 if top < 256 else np.uint16 if top < 65536 else np.int32)
    column_index, column_blob = _packed(arrays)
    index, blob = _packed(extra)
    written = 0
    for name, data_bytes in (("columns.bin", column_blob), ("extra.bin", blob)):
        if columns or name == "extra.bin":
            (temp / name).write_bytes(data_bytes)
            written += len(data_bytes)
    manifest = {
        "format": FORMAT,
        "stream": data.stream,
        "path": str(path),
        "end": entry.end,
        "size": data.size,
        "span": entry.span,
        "head": mark.head,
        "tail": mark.tail,
        "tags": tags,
        "values": list(data.values) if columns else [],
        "other": {name: sorted(rows.items()) for name, rows in data.other.items()} if columns else {},
        "malformed": [list(m) for m in entry.malformed[:KEPT_MALFORMED]],
        "malformed_count": entry.malformed_count,
        "columns": column_index,
        "extra": index,
        "extra_meta": dict(extra_meta),
    }
    text = json.dumps(manifest, allow_nan=True)
    (temp / "manifest.json").write_text(text, encoding="utf-8")
    return written + len(text)
