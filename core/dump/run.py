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
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from miles_tui.core.base.errors import MilesTuiError, StepNotFoundError, StillWritingError
from miles_tui.core.dump.parsed_files import ParsedFiles
from miles_tui.core.dump.run_dir import MIN_AGE_SECONDS, FileStat, RunDir, StepFiles, StepIds, StepKey, TrainFile
from miles_tui.core.dump.step_summary import ProblemKind, StepSummary
from miles_tui.core.dump.summary_cache import cache_refusal, load_summary, store_summary
from miles_tui.core.dump.tokenizer import Detokenizer

if TYPE_CHECKING:
    from miles_tui.core.dump.step import OpenStep
    from miles_tui.core.dump.trajectory import Sidecar


SHARD_CACHE_FILES = 64
"""Parsed train shards kept for reuse, at most (rollout files: one per open step)..."""

SHARD_CACHE_BYTES = 512 << 20
"""... and at most this many bytes of them: a shard's tensors are copies of its file's records, so 64 big
shards could otherwise hold gigabytes. Twice the largest benchmark step's shards (228 MB), so parsing the
newest step ahead never evicts the shards it parsed before."""


def _reusable(summary: StepSummary) -> bool:
    """Whether an open step answers for the same files: yes unless some file failed young (retry it).

    A summary that is only settling (files too fresh to call final) is reused as is;
    ``Run._settled`` makes it final once the settling time has passed.
    """
    return summary.complete or not any(p.kind is ProblemKind.STILL_WRITING for p in summary.problems)


@dataclass(frozen=True)
class SampleContext:
    """What the sample view needs of one sample, read in one go (so no view reads on its own)."""

    step: OpenStep
    """The open step (rows and per-token data)."""
    sample_index: int
    """The sample, present in ``step``."""
    sidecar: Sidecar | None
    """The step's recorded conversations, None when the run recorded none."""
    detokenizer: Detokenizer
    """The run's tokenizer (loading tokenizer.json can take a second: never on the UI thread)."""
    cursor: int | None
    """The token position to start at, when the caller asked for one."""


class Run:
    """Read access to one run directory."""

    def __init__(
        self, path: Path | str, *, use_cache: bool = True, max_open: int = 4, shard_bytes: int = SHARD_CACHE_BYTES
    ) -> None:
        self.dir = RunDir(path)
        self.cache_notice = cache_refusal(self.dir.path) if use_cache else None
        """Why the summary cache is off for this run although asked for (it lies inside the run), else None."""
        self.use_cache = use_cache and self.cache_notice is None
        self.max_open = max_open
        self._open: OrderedDict[StepKey, OpenStep] = OrderedDict()
        self._payloads: OrderedDict[tuple[str, int, float], Any] = OrderedDict()
        self._shards = ParsedFiles(SHARD_CACHE_FILES, shard_bytes)
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
            message = f"the run has no {kind} {rollout_id} (visible: {listed})"
            if rollout_id in (ids.train if evaluation else ids.evaluation):
                # both commands that name a step (the monitor and export) take --eval
                message += (
                    f"; step {rollout_id} exists as a train step: drop --eval"
                    if evaluation
                    else f"; step {rollout_id} exists as an eval step: add --eval"
                )
            raise StepNotFoundError(message, self.dir.rollout_dir)
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
        opened = self._settled(files.key, files, now)
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
        key = files.key
        opened = self._settled(key, files, now)
        if opened is not None and opened.summary.signature == files.signature and _reusable(opened.summary):
            self._open.move_to_end(key)
            return opened
        from miles_tui.core.dump.step import (
            open_step,  # numpy and the dump reader: not needed to serve a cached summary
        )

        opened = open_step(files, now, self._load)
        self._open[key] = opened
        self._open.move_to_end(key)
        while len(self._open) > self.max_open:
            self._open.popitem(last=False)
        if self.use_cache:
            store_summary(self.path, files, opened.summary)
        return opened

    def _settled(self, key: StepKey, files: StepFiles, now: float) -> OpenStep | None:
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
        if isinstance(file, TrainFile):  # tensors: weighed, and bounded by bytes as well as by count
            shard = self._shards.get(key)
            if shard is None:
                shard = RunDir.load(file, now)
                self._shards.put(key, shard)
            return shard
        # A rollout file is Python objects (too many to weigh cheaply): one per open step.
        payload = self._payloads.get(key)
        if payload is None:
            payload = RunDir.load(file, now)
            self._payloads[key] = payload
            while len(self._payloads) > self.max_open:
                self._payloads.popitem(last=False)
        self._payloads.move_to_end(key)
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

        Returns how many files were parsed; a file that fails to load is left for the real open. Shards
        past the shard cache's byte budget are left for the open too (parsed now, they would only push
        out the ones parsed before them).
        """
        parsed = 0
        ahead = 0
        for file in self.unprepared(files, now, settled_for):
            if isinstance(file, TrainFile):
                ahead += file.size
                if ahead > self._shards.max_bytes:
                    continue
            try:
                self._load(file, now)
            except MilesTuiError:
                continue
            parsed += 1
        return parsed

    def sample_context(
        self,
        rollout_id: int,
        evaluation: bool,
        sample_index: int,
        now: float,
        cursor: int | Callable[[OpenStep], int | None] | None = None,
    ) -> SampleContext:
        """One sample with all a sample view shows; ``cursor`` may be computed from the open step."""
        step = self.open(rollout_id, evaluation, now)
        step.position_of(sample_index)  # a clear error for a sample the step does not have
        from miles_tui.core.dump.trajectory import read_sidecar  # numpy: not on the warm export path

        position = cursor(step) if callable(cursor) else cursor
        sidecar = read_sidecar(self.path, rollout_id, evaluation)
        return SampleContext(step, sample_index, sidecar, self.detokenizer, position)

    def locate(self, rollout_id: int, evaluation: bool, sample_index: int | None, now: float) -> None:
        """Check that a step (and a sample of it) exists, with an error that says what does.

        For deep links (``miles-tui RUN --step N --sample I``): reads only the step's summary.
        """
        summary = self.summary(rollout_id, evaluation, now)
        if sample_index is None or any(row.sample_index == sample_index for row in summary.rows):
            return
        ids = [row.sample_index for row in summary.rows]
        span = f"{min(ids)}–{max(ids)}" if ids else "none"
        kind = "eval step" if evaluation else "step"
        message = f"{kind} {rollout_id} has no sample {sample_index} (its {len(ids)} samples: {span})"
        raise StepNotFoundError(message, self.dir.rollout_dir)

    def cached_open(self, rollout_id: int, evaluation: bool) -> OpenStep | None:
        """An already open step, without touching the disk."""
        return self._open.get(StepKey(rollout_id, evaluation))
