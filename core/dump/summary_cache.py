"""A cache of step summaries under the user's cache directory (never in RUN_DIR).

Contract: a summary is stored as JSON keyed by the run's absolute path, the
step id, and the name, size and mtime of every file of the step; any change
on disk is a miss. Writes are atomic (temp file + rename) and best effort: a
read-only or full cache dir only costs speed. Incomplete summaries (a file
still being written) are never stored. Location: ``$MILES_TUI_CACHE_DIR``,
else ``$XDG_CACHE_HOME/miles-tui``, else ``~/.cache/miles-tui``.

A cache dir inside the run (``RUN_DIR=$HOME``, or any ancestor of the cache
dir) is never used for that run: nothing is written under RUN_DIR, and
nothing its writers could have planted there is served as a summary.
:func:`cache_refusal` says so in one line, for the caller to show.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

from miles_tui.core import cache_dir as caches
from miles_tui.core.dump.run_dir import StepFiles
from miles_tui.core.dump.step_summary import GroupRow, ProblemKind, SampleRow, StepAggregate, StepProblem, StepSummary

CACHE_VERSION = 4
"""Bump when a derived value's definition changes, so stale summaries are not served."""


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


def _encode(summary: StepSummary) -> dict[str, Any]:
    return {
        "rollout_id": summary.rollout_id,
        "evaluation": summary.evaluation,
        "rows": [list(row.to_dict().values()) for row in summary.rows],
        "groups": [group.to_dict() for group in summary.groups],
        "aggregate": summary.aggregate.to_dict(),
        "problems": [[str(p.path), p.kind.value, p.message] for p in summary.problems],
        "signature": [list(s) for s in summary.signature],
        "alignment_reasons": [list(r) for r in summary.alignment_reasons],
    }


def _decode(data: dict[str, Any]) -> StepSummary:
    return StepSummary(
        rollout_id=int(data["rollout_id"]),
        evaluation=bool(data["evaluation"]),
        rows=tuple(SampleRow(*values) for values in data["rows"]),
        groups=tuple(GroupRow(**group) for group in data["groups"]),
        aggregate=StepAggregate(**data["aggregate"]),
        problems=tuple(StepProblem(Path(p), ProblemKind(k), m) for p, k, m in data["problems"]),
        complete=True,
        signature=tuple((str(n), int(s), float(m)) for n, s, m in data["signature"]),
        alignment_reasons=tuple((int(i), str(r)) for i, r in data.get("alignment_reasons", [])),
    )


def load_summary(run_path: Path, files: StepFiles) -> StepSummary | None:
    """The cached summary of exactly these files, or None."""
    if cache_refusal(run_path) is not None or not caches.enabled():
        return None
    path = cache_dir() / "summaries" / f"{_key(run_path, files)}.json"
    try:
        with open(path, encoding="utf-8") as handle:
            summary = _decode(json.load(handle))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    caches.touch(path)
    return summary


def store_summary(run_path: Path, files: StepFiles, summary: StepSummary) -> None:
    """Remember a complete summary; silently skips when the cache dir is unusable."""
    if (
        not summary.complete
        or summary.signature != files.signature
        or (cache_refusal(run_path) is not None or not caches.enabled())
    ):
        return
    folder = cache_dir() / "summaries"
    target = folder / f"{_key(run_path, files)}.json"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(_encode(summary), handle, separators=(",", ":"))
        os.replace(tmp, target)
        caches.note_write(target.stat().st_size, target)
    except OSError:
        return
