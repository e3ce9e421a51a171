"""A cache of step summaries under the user's cache directory (never in RUN_DIR), in a compact binary form.

A cache dir inside the run (``RUN_DIR=$HOME``, or any ancestor of the cache
dir) is never used for that run: nothing is written under RUN_DIR, and
nothing its writers could have planted there is served as a summary.
:func:`cache_refusal` says so in one line, for the caller to show.

Contract: a summary is stored as one file keyed by the run's absolute path,
the step id, and the name, size and mtime of every file of the step; any
change on disk is a miss. The file is :func:`encode_summary`'s bytes, deflated: a
magic tag, a small JSON header (the aggregate, problems, signature, alignment
reasons, all exact: JSON floats round-trip) and the rows and groups as
:class:`~miles_tui.core.dump.column_rows.ColumnRows` columns. Nothing is pickled, and a file
that does not decode is a miss. Reading one back costs well under a
millisecond and keeps only the column bytes in memory. Writes are atomic
(temp file + rename) and best effort: a read-only or full cache dir only costs
speed. Incomplete summaries (a file still being written) are never stored.
Location: ``$MILES_TUI_CACHE_DIR``, else ``$XDG_CACHE_HOME/miles-tui``, else
``~/.cache/miles-tui``.

Housekeeping (a size cap, least-recently-used eviction, ``--no-cache``) is
:mod:`miles_tui.core.base.cache_dir`'s, through :func:`_stored` and :func:`_used`.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import tempfile
import zlib
from functools import lru_cache
from pathlib import Path
from typing import Any

from miles_tui.core.base import cache_dir as caches
from miles_tui.core.dump.column_rows import ColumnRows
from miles_tui.core.dump.run_dir import Signature, StepFiles
from miles_tui.core.dump.step_summary import GroupRow, ProblemKind, SampleRow, StepAggregate, StepProblem, StepSummary

CACHE_VERSION = 6
"""Bump when a derived value's definition or the file layout changes, so stale summaries are not served."""

MAGIC = b"MTS\x04"
"""Opens :func:`encode_summary`'s bytes."""
FILE_MAGIC = b"MTZ\x04"
"""Opens a cache file: these four bytes, then :func:`encode_summary`'s bytes deflated (small steps are
mostly JSON header; big ones mostly numbers: both shrink by a third to a half)."""
MAX_ENCODED = 1 << 28
"""A cache file never inflates past this (a damaged or foreign file is a miss, not a memory spike)."""
_LENGTH = struct.Struct("<I")
SUFFIX = ".sum"


def cache_dir() -> Path:
    """Where summaries are cached for this user."""
    return caches.cache_root()


@lru_cache(maxsize=16)
def _inside(run: str, cache: str) -> bool:
    run_real, cache_real = os.path.realpath(run), os.path.realpath(cache)
    return cache_real == run_real or cache_real.startswith(run_real.rstrip(os.sep) + os.sep)


def cache_refusal(run_path: Path) -> str | None:
    """None when the cache may serve this run; else why not, in one line (the cache dir is inside the run)."""
    folder = cache_dir()
    if not _inside(str(run_path), str(folder)):
        return None
    return (
        f"the summary cache {folder} is inside the run directory, which miles-tui never writes to:"
        " summaries are not cached (set MILES_TUI_CACHE_DIR to a folder outside the run)"
    )


def _key(run_path: Path, files: StepFiles) -> str:
    material = json.dumps([CACHE_VERSION, str(run_path), files.rollout_id, files.evaluation, files.signature]).encode()
    return hashlib.sha256(material).hexdigest()


def summary_path(run_path: Path, files: StepFiles) -> Path:
    """The cache file of exactly these files of the run."""
    return cache_dir() / "summaries" / f"{_key(run_path, files)}{SUFFIX}"


def encode_summary(summary: StepSummary) -> bytes:
    """The summary as bytes: exact, compact, no pickle (also how a helper process hands one back)."""
    rows = summary.rows if isinstance(summary.rows, ColumnRows) else ColumnRows.build(SampleRow, summary.rows)
    groups = summary.groups if isinstance(summary.groups, ColumnRows) else ColumnRows.build(GroupRow, summary.groups)
    row_bytes, group_bytes = rows.to_bytes(), groups.to_bytes()
    header = {
        "rollout_id": summary.rollout_id,
        "evaluation": summary.evaluation,
        "aggregate": summary.aggregate.to_dict(),
        "problems": [[str(p.path), p.kind.value, p.message] for p in summary.problems],
        "complete": summary.complete,
        "signature": [list(s) for s in summary.signature],
        "alignment_reasons": [list(r) for r in summary.alignment_reasons],
        "settling_until": summary.settling_until,
        "lengths": [len(row_bytes), len(group_bytes)],
    }
    encoded = json.dumps(header, separators=(",", ":")).encode()
    return b"".join((MAGIC, _LENGTH.pack(len(encoded)), encoded, row_bytes, group_bytes))


def decode_summary(data: bytes, files: StepFiles | None = None) -> StepSummary:
    """What :func:`encode_summary` wrote; ValueError when the bytes are not such a summary.

    With ``files``, a signature equal to theirs is their tuple (:attr:`StepFiles.signature`), not a copy:
    a summary is kept for every step of a run, and so is that tuple.
    """
    if data[:4] != MAGIC:
        raise ValueError("not a miles-tui summary (or another version of one)")
    try:
        (length,) = _LENGTH.unpack_from(data, 4)
        header = json.loads(data[8 : 8 + length])
        rows_length, groups_length = header["lengths"]
        start = 8 + length
        if start + rows_length + groups_length != len(data):
            raise ValueError("summary sections do not add up to the file")
        view = memoryview(data)
        return StepSummary(
            rollout_id=int(header["rollout_id"]),
            evaluation=bool(header["evaluation"]),
            rows=ColumnRows.from_bytes(SampleRow, view[start : start + rows_length]),
            groups=ColumnRows.from_bytes(GroupRow, view[start + rows_length :]),
            aggregate=StepAggregate(**header["aggregate"]),
            problems=tuple(StepProblem(Path(p), ProblemKind(k), str(m)) for p, k, m in header["problems"]),
            complete=bool(header["complete"]),
            signature=_signature(header["signature"], files),
            alignment_reasons=tuple((int(i), str(r)) for i, r in header["alignment_reasons"]),
            settling_until=None if header["settling_until"] is None else float(header["settling_until"]),
        )
    except (struct.error, KeyError, TypeError, UnicodeDecodeError) as err:
        raise ValueError(f"malformed summary: {err}") from err


def _signature(raw: Any, files: StepFiles | None) -> Signature:
    signature = tuple((str(n), int(s), float(m)) for n, s, m in raw)
    return files.signature if files is not None and signature == files.signature else signature


def load_summary(run_path: Path, files: StepFiles) -> StepSummary | None:
    """The cached summary of exactly these files, or None."""
    if cache_refusal(run_path) is not None or not caches.enabled():
        return None
    path = summary_path(run_path, files)
    try:
        with open(path, "rb") as handle:
            data = handle.read()
        if data[:4] != FILE_MAGIC:
            return None
        inflater = zlib.decompressobj()
        raw = inflater.decompress(data[4:], MAX_ENCODED)
        if inflater.unconsumed_tail or not inflater.eof:
            return None
        summary = decode_summary(raw, files)
    except (OSError, ValueError, zlib.error):
        return None
    if not summary.complete or summary.signature != files.signature:
        return None
    _used(path)
    return summary


def store_summary(run_path: Path, files: StepFiles, summary: StepSummary) -> None:
    """Remember a complete summary; silently skips when the cache dir is unusable."""
    if (
        not summary.complete
        or summary.signature != files.signature
        or (cache_refusal(run_path) is not None or not caches.enabled())
    ):
        return
    try:
        data = FILE_MAGIC + zlib.compress(encode_summary(summary), 6)
    except (TypeError, ValueError):  # a value JSON cannot hold exactly: serve it, do not cache it
        return
    path = summary_path(run_path, files)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(tmp, path)
        except OSError:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError:
        return
    _stored(path, len(data))


def _stored(path: Path, size: int) -> None:
    """Housekeeping hook: a cache entry of ``size`` bytes was written (a size cap evicts from here)."""
    caches.note_write(size, path)


def _used(path: Path) -> None:
    """Housekeeping hook: a cache entry was served (least-recently-used order is kept from here)."""
    caches.touch(path)
