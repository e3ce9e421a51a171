"""A run, read: visible steps, cached step summaries, and a small LRU of open steps.

Contract: the one entry point the CLI and the app use to read steps. A
summary is served from the user cache when the step's files are unchanged,
otherwise the step is opened and the (complete) summary cached. Open steps
(with per-token arrays) are kept in an LRU bounded by ``max_open`` so memory
does not grow with the steps a user visits. Not thread-safe by itself: the
app serializes access. Never writes into the run directory. Serving a cached
summary imports neither numpy nor the dump reader (a warm ``export`` is
interpreter start-up plus a little JSON).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.errors import MilesTuiError, StepNotFoundError, StillWritingError
from core.run_dir import MIN_AGE_SECONDS, FileStat, RunDir, StepFiles, StepIds, TrainFile
from core.step_summary import ProblemKind, StepSummary
from core.summary_cache import load_summary, store_summary
from core.tokenizer import Detokenizer

if TYPE_CHECKING:
    from core.step import OpenStep


SHARD_CACHE_FILES = 64
"""Parsed train shards kept for reuse (memory-mapped views: cheap); rollout files: one per open step."""


def _reusable(summary: StepSummary) -> bool:
    """Whether an open step answers for the same files: yes unless some file failed young (retry it).

    A summary that is only settling (files too fresh to call final) is reused as is;
    ``Run._settled`` makes it final once the settling time has passed.
    """
    return summary.complete or not any(p.kind is ProblemKind.STILL_WRITING for p in summary.problems)


class Run:
    """Read access to one run directory."""

    def __init__(self, path: Path | str, *, use_cache: bool = True, max_open: int = 4) -> None:
        self.dir = RunDir(path)
        self.use_cache = use_cache
        self.max_open = max_open
        self._open: OrderedDict[tuple[int, bool], OpenStep] = OrderedDict()
        self._payloads: OrderedDict[tuple[str, int, float], Any] = OrderedDict()
        self._shards: OrderedDict[tuple[str, int, float], Any] = OrderedDict()
        self._detokenizer: Detokenizer | None = None

    @property
    def path(self) -> Path:
        return self.dir.path

    @property
    def detokenizer(self) -> Detokenizer:
        if self._detokenizer is None:
            self._detokenizer = Detokenizer(self.dir.tokenizer_dir)
        return self._detokenizer

    def step_ids(self, now: float) -> StepIds:
        """Visible step ids at ``now``."""
        return self.dir.step_ids(now)

    def files(self, rollout_id: int, evaluation: bool, now: float) -> StepFiles:
        """The files of a visible step; a clear error for a missing or not-yet-visible one."""
        files = self.dir.step_files(rollout_id, evaluation)
        kind = "eval step" if evaluation else "step"
        if files is None:
            ids = self.dir.step_ids(now)
            known = ids.evaluation if evaluation else ids.train
            listed = ", ".join(str(i) for i in known[-8:]) or "none yet"
            raise StepNotFoundError(f"the run has no {kind} {rollout_id} (visible: {listed})", self.dir.rollout_dir)
        if not RunDir.is_visible(files, now):
            wait = MIN_AGE_SECONDS - (now - files.rollout.mtime)
            raise StillWritingError(
                f"{kind} {rollout_id} is still being written; it becomes readable in about {max(wait, 1):.0f}s",
                files.rollout.path,
            )
        return files

    def summary(self, rollout_id: int, evaluation: bool, now: float) -> StepSummary:
        """The step's summary, from the cache when its files are unchanged."""
        return self.summary_of(self.files(rollout_id, evaluation, now), now)

    def cached_summary(self, files: StepFiles, now: float) -> StepSummary | None:
        """The summary of files already listed, when it is known without reading them (open, or cached)."""
        opened = self._settled((files.rollout_id, files.evaluation), files, now)
        if opened is not None and opened.summary.signature == files.signature and _reusable(opened.summary):
            return opened.summary
        return load_summary(self.path, files) if self.use_cache else None

    def summary_of(self, files: StepFiles, now: float) -> StepSummary:
        """:meth:`summary` for files already listed (a poll of a long run lists every step once, not per step)."""
        known = self.cached_summary(files, now)
        return known if known is not None else self._open_files(files, now).summary

    def open_files(self, files: StepFiles, now: float) -> OpenStep:
        """:meth:`open` for files already listed."""
        return self._open_files(files, now)

    def open(self, rollout_id: int, evaluation: bool, now: float) -> OpenStep:
        """The step with its per-token data (reopened when its files changed)."""
        return self._open_files(self.files(rollout_id, evaluation, now), now)

    def _open_files(self, files: StepFiles, now: float) -> OpenStep:
        """``open`` for files already listed (one directory scan per call, not two)."""
        key = (files.rollout_id, files.evaluation)
        opened = self._settled(key, files, now)
        if opened is not None and opened.summary.signature == files.signature and _reusable(opened.summary):
            self._open.move_to_end(key)
            return opened
        from core.step import open_step  # numpy and the dump reader: not needed to serve a cached summary

        opened = open_step(files, now, self._load)
        self._open[key] = opened
        self._open.move_to_end(key)
        while len(self._open) > self.max_open:
            self._open.popitem(last=False)
        if self.use_cache:
            store_summary(self.path, files, opened.summary)
        return opened

    def _settled(self, key: tuple[int, bool], files: StepFiles, now: float) -> OpenStep | None:
        """The open step; one that was only settling and whose files did not change since becomes complete."""
        opened = self._open.get(key)
        if opened is None or opened.summary.complete or opened.summary.signature != files.signature:
            return opened
        summary = opened.summary
        still_writing = any(p.kind is ProblemKind.STILL_WRITING for p in summary.problems)
        if still_writing or summary.settling_until is None or now < summary.settling_until:
            return opened
        opened = replace(opened, summary=replace(summary, complete=True, settling_until=None))
        self._open[key] = opened
        if self.use_cache:
            store_summary(self.path, files, opened.summary)
        return opened

    def _load(self, file: FileStat, now: float) -> Any:
        """Load a dump file, reusing the last parse of the same (path, size, mtime).

        While a live step's train shards land one by one, the step is reopened as
        they arrive; files already parsed (the rollout file above all, whose
        unpickle takes seconds) are not parsed again. Bounded: a few steps' worth.
        """
        key = (str(file.path), file.size, file.mtime)
        # Rollout files are Python objects (big); train shards are memory-mapped views (cheap).
        cache, limit = (
            (self._shards, SHARD_CACHE_FILES) if isinstance(file, TrainFile) else (self._payloads, self.max_open)
        )
        payload = cache.get(key)
        if payload is None:
            payload = RunDir.load(file, now)
            cache[key] = payload
            while len(cache) > limit:
                cache.popitem(last=False)
        cache.move_to_end(key)
        return payload

    def unprepared(self, files: StepFiles, now: float, settled_for: float) -> list[FileStat]:
        """The step's files, unchanged for ``settled_for`` seconds, that are not parsed yet."""
        return [
            file
            for file in (files.rollout, *files.train)
            if (str(file.path), file.size, file.mtime)
            not in (self._shards if isinstance(file, TrainFile) else self._payloads)
            and now - file.mtime >= settled_for
        ]

    def prepare(self, files: StepFiles, now: float, settled_for: float) -> int:
        """Parse the step's files that have not changed for ``settled_for`` seconds, ahead of opening it.

        Returns how many files were parsed; a file that fails to load is left for the real open.
        """
        parsed = 0
        for file in self.unprepared(files, now, settled_for):
            try:
                self._load(file, now)
            except MilesTuiError:
                continue
            parsed += 1
        return parsed

    def cached_open(self, rollout_id: int, evaluation: bool) -> OpenStep | None:
        """An already open step, without touching the disk."""
        return self._open.get((rollout_id, evaluation))
