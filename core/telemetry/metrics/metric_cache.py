"""The parsed columns of a run's ``metrics.jsonl``, kept in the user's cache: a re-open reads only what is new.

Contract:

- An entry is the folder ``metrics/KEY/`` under :func:`miles_tui.core.base.cache_dir.cache_root`
  (never in the run): ``manifest.json`` and one ``.npy`` per array. KEY hashes
  the file's identity: its absolute path, ``st_dev`` and ``st_ino``. Keys logged
  in the same records share one file of record indices (a run's keys mostly
  come in a few such groups: a third of the entry, written once per group).
- An entry covers the bytes ``[0, end)`` of the file (``end`` just after a
  newline) and holds their records. Its :class:`~miles_tui.core.telemetry.metrics.metric_workers.Fingerprint`
  (the first and the last 4 KB of those bytes, hashed) is checked against the
  file before the entry is used: a file that shrank below ``end`` or whose
  covered bytes changed (rewritten, replaced) drops the entry.
- Loading never runs code: ``np.load(allow_pickle=False)`` and JSON, and every
  array's type, length and range is checked; an entry that fails any check is
  dropped, never trusted.
- Writes are atomic (a temporary folder, renamed into place) and best effort;
  nothing is read or written when :func:`miles_tui.core.base.cache_dir.enabled` is False;
  writes count against the cache's size cap (:func:`miles_tui.core.base.cache_dir.note_write`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from miles_tui.core.base import cache_dir
from miles_tui.core.telemetry.metrics.metric_store import MetricStore, StoreColumns
from miles_tui.core.telemetry.metrics.metric_values import Values
from miles_tui.core.telemetry.metrics.metric_workers import WINDOW, Fingerprint

FORMAT: Final = 3
"""Bump when the layout changes: entries of another format are misses."""

KIND: Final = "metrics"
"""The cache's folder under the root."""


@dataclass(frozen=True)
class Restored:
    """A cache entry that matched the file."""

    store: MetricStore
    """The records of the covered bytes."""
    end: int
    """Where the covered bytes end: the tail resumes here."""
    ino: int
    """The file's inode."""
    head: bytes
    """The covered bytes' first WINDOW bytes, as read from the file."""
    tail: bytes
    """The WINDOW bytes before ``end``, as read from the file."""


def _entry(path: Path, st: os.stat_result) -> Path:
    identity = json.dumps([FORMAT, str(path.absolute()), st.st_dev, st.st_ino]).encode()
    return cache_dir.cache_root() / KIND / hashlib.sha256(identity).hexdigest()[:40]


def _windows(path: Path, end: int) -> tuple[bytes, bytes]:
    with open(path, "rb") as handle:
        head = handle.read(min(WINDOW, end))
        handle.seek(max(0, end - WINDOW))
        tail = handle.read(end - max(0, end - WINDOW))
    return head, tail


def drop(entry: Path) -> None:
    """Delete an entry (best effort)."""
    shutil.rmtree(entry, ignore_errors=True)


def load(path: Path) -> Restored | None:
    """The cached records of ``path``'s covered bytes, or None (no entry, caching off, or the file changed)."""
    if not cache_dir.enabled():
        return None
    try:
        st = os.stat(path)
        entry = _entry(path, st)
        manifest = json.loads((entry / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    try:
        end = int(manifest["end"])
        if manifest["format"] != FORMAT or st.st_size < end or end <= 0:
            raise ValueError("stale")
        head, tail = _windows(path, end)
        if Fingerprint.of(head, tail, end) != Fingerprint(end, manifest["head"], manifest["tail"]):
            raise ValueError("the covered bytes changed")
        store = MetricStore.from_columns(_columns(entry, manifest))
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        drop(entry)
        return None
    cache_dir.touch(entry)
    return Restored(store, end, st.st_ino, head, tail)


def _array(entry: Path, name: str, dtype: type[Any], size: int | None) -> npt.NDArray[Any]:
    array: npt.NDArray[Any] = np.load(entry / f"{name}.npy", allow_pickle=False)
    if array.dtype != np.dtype(dtype) or array.ndim != 1 or (size is not None and len(array) != size):
        raise ValueError(f"{name}: unexpected array")
    return array


def _values(entry: Path, name: str, size: int | None, manifest: dict[str, Any]) -> Values:
    num = _array(entry, f"{name}.num", np.float64, size)
    ints = _array(entry, f"{name}.ints", np.bool_, len(num)) if name in manifest["ints"] else None
    raw = {int(p): v for p, v in manifest["raw"].get(name, [])}
    if any(not 0 <= p < len(num) for p in raw):
        raise ValueError(f"{name}: a raw value out of range")
    return Values(num, ints, raw)


def _columns(entry: Path, manifest: dict[str, Any]) -> StoreColumns:
    records = int(manifest["records"])
    step_keys = tuple(str(k) for k in manifest["step_keys"])
    step_key = _array(entry, "step_key", np.uint32, records)
    if records and int(step_key.max()) >= len(step_keys):
        raise ValueError("step_key: out of range")
    groups = manifest["rec"]
    if len(groups) != len(manifest["keys"]) or any(type(g) is not int or not 0 <= g <= i for i, g in enumerate(groups)):
        raise ValueError("rec: not one record file per key")
    shared: dict[int, npt.NDArray[np.uint32]] = {}  # shared by the keys of a group: appends never write into it
    keys: dict[str, tuple[npt.NDArray[np.uint32], Values]] = {}
    for i, (name, group) in enumerate(zip(manifest["keys"], groups, strict=True)):
        rec = shared.get(group)
        if rec is None:
            rec = shared[group] = _array(entry, f"r{group}", np.uint32, None)
            if len(rec) and (int(rec[-1]) >= records or not bool(np.all(rec[1:] > rec[:-1]))):
                raise ValueError(f"r{group}: records out of order")
        keys[str(name)] = (rec, _values(entry, f"k{i}", len(rec), manifest))
    counts: dict[str, dict[int, int]] = {}
    for i, name in enumerate(manifest["keys"]):
        found = {int(sk): int(n) for sk, n in manifest["counts"][i]}
        if sum(found.values()) != len(keys[str(name)][0]) or any(not 0 <= sk < len(step_keys) for sk in found):
            raise ValueError(f"k{i}: step key counts do not add up")
        counts[str(name)] = found
    return StoreColumns(
        ts=_values(entry, "ts", records, manifest),
        step=_values(entry, "step", records, manifest),
        step_key=step_key,
        step_keys=step_keys,
        keys=keys,
        counts=counts,
    )


def save(path: Path, store: MetricStore, fingerprint: Fingerprint) -> bool:
    """Remember ``store`` as the records of ``path``'s bytes ``[0, fingerprint.end)``; False when not written.

    The entry is filed under the file's identity now; were the file replaced since the records were read,
    the fingerprint (of the bytes read) would not match it, and the entry would be dropped at the next load.
    """
    return save_columns(path, store.columns(), fingerprint)


def save_columns(path: Path, columns: StoreColumns, fingerprint: Fingerprint) -> bool:
    """:func:`save` of a store's :meth:`~MetricStore.columns` taken earlier."""
    if not cache_dir.enabled():
        return False
    try:
        st = os.stat(path)
    except OSError:
        return False
    entry = _entry(path, st)
    manifest: dict[str, Any] = {
        "format": FORMAT, "path": str(path.absolute()), "end": fingerprint.end, "head": fingerprint.head,
        "tail": fingerprint.tail, "records": len(columns.step_key), "step_keys": list(columns.step_keys),
        "keys": list(columns.keys), "rec": [], "ints": [], "raw": {},
        "counts": [sorted((columns.counts or {}).get(name, {}).items()) for name in columns.keys],
    }  # fmt: skip
    temp = entry.with_name(f"{entry.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}")
    try:
        temp.mkdir(parents=True)
        size = _write_values(temp, "ts", columns.ts, manifest) + _write_values(temp, "step", columns.step, manifest)
        size += _write(temp, "step_key", columns.step_key)
        written: list[tuple[npt.NDArray[np.uint32], int]] = []  # the record files so far, newest first
        for i, (records, values) in enumerate(columns.keys.values()):
            group = _same(records, written)
            if group is None:
                group = i
                size += _write(temp, f"r{i}", records)
                written = [(records, i), *written[: SHARED_LOOKBACK - 1]]
            manifest["rec"].append(group)
            size += _write_values(temp, f"k{i}", values, manifest)
        (temp / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
        _install(temp, entry)
    except (OSError, ValueError):
        drop(temp)
        return False
    cache_dir.note_write(size, entry)
    return True


SHARED_LOOKBACK: Final = 8
"""A key's record indices are compared with this many record files written before it (the newest)."""


def _same(records: npt.NDArray[np.uint32], written: list[tuple[npt.NDArray[np.uint32], int]]) -> int | None:
    """The group of a record file already written with exactly these indices, if any."""
    for other, group in written:
        if len(other) == len(records) and (other is records or np.array_equal(other, records)):
            return group
    return None


def _write(folder: Path, name: str, array: npt.NDArray[Any]) -> int:
    np.save(folder / f"{name}.npy", np.ascontiguousarray(array), allow_pickle=False)
    return int(array.nbytes)


def _write_values(folder: Path, name: str, values: Values, manifest: dict[str, Any]) -> int:
    size = _write(folder, f"{name}.num", values.num)
    if values.ints is not None:
        size += _write(folder, f"{name}.ints", values.ints)
        manifest["ints"].append(name)
    if values.raw:
        manifest["raw"][name] = [[p, v] for p, v in values.raw.items()]
    return size


def _install(temp: Path, entry: Path) -> None:
    """Move the new entry into place (an older one is moved away first, then deleted)."""
    old = entry.with_name(f"{entry.name}.old-{secrets.token_hex(4)}")
    with contextlib.suppress(FileNotFoundError):
        os.rename(entry, old)
    os.rename(temp, entry)
    drop(old)
