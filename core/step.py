"""One step opened: its rollout file joined with its resolved train rows.

Contract: :func:`open_step` loads the step's rollout file and every train
file, resolves each sample's train row (:mod:`core.resolve`) and derives the
ROW, GROUP and aggregate values (:mod:`core.summary`). A train file that
fails to load does not fail the step: it becomes a :class:`StepProblem`
naming the file, and samples that no readable file holds are flagged as
unreadable (never shown as absent). A file still being written makes the
step ``complete = False``: it fills in on a later open. The rollout file
itself failing to load raises (there is nothing to show). Nothing is written.
The summary's classes live in :mod:`core.step_summary` and are re-exported here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from core.column_rows import ColumnRows
from core.errors import CorruptFileError, DumpLoadError, StepNotFoundError, StillWritingError, UnsafePickleError
from core.resolve import FieldState, Shard, TrainRow, raw_reward_at, resolve_rows
from core.run_dir import MIN_AGE_SECONDS, FileStat, RunDir, StepFiles
from core.step_summary import ProblemKind, StepProblem, StepSummary
from core.summary import GroupRow, SampleRow, group_rows, sample_row, step_aggregate

__all__ = ["OpenStep", "ProblemKind", "StepProblem", "StepSummary", "open_step"]


@dataclass(frozen=True)
class OpenStep:
    """A step with its samples and resolved train rows, for per-token views."""

    summary: StepSummary
    """The table values."""
    samples: tuple[Mapping[str, Any], ...]
    """The rollout file's sample dicts, in rollout order."""
    train_rows: Mapping[int, TrainRow]
    """Resolved train rows by sample index (missing: no readable file holds the sample)."""
    unreadable: frozenset[int]
    """Samples whose train data sat in a file that failed to load."""
    _positions: dict[int, int] = field(default_factory=dict, init=False, repr=False, compare=False)

    def position_of(self, sample_index: int) -> int:
        """The sample's position in the rollout file."""
        if not self._positions:
            self._positions.update((row.sample_index, i) for i, row in enumerate(self.summary.rows))
        position = self._positions.get(sample_index)
        if position is None:
            raise StepNotFoundError(f"step {self.summary.rollout_id} has no sample {sample_index}", None)
        return position

    def row(self, sample_index: int) -> SampleRow:
        """The sample's ROW."""
        return self.summary.rows[self.position_of(sample_index)]

    def sample(self, sample_index: int) -> Mapping[str, Any]:
        """The rollout sample dict."""
        return self.samples[self.position_of(sample_index)]

    def field_state(self, sample_index: int, name: str) -> FieldState:
        """Why a per-token field of a sample is present or blank."""
        if sample_index in self.unreadable:
            return FieldState.UNREADABLE
        train = self.train_rows.get(sample_index)
        if train is None:
            return FieldState.NOT_DUMPED
        return train.field_state.get(name, FieldState.NOT_DUMPED)


Loader = Callable[[FileStat, float], Any]
"""How a file is loaded: RunDir.load, or a caching wrapper around it."""


def _rollout_payload(files: StepFiles, now: float, load: Loader) -> tuple[list[Mapping[str, Any]], Any]:
    payload = load(files.rollout, now)
    if not isinstance(payload, dict) or not isinstance(payload.get("samples"), list):
        raise CorruptFileError("not a rollout file: expected a dict with a 'samples' list", files.rollout.path)
    samples = payload["samples"]
    for position, sample in enumerate(samples):
        if not isinstance(sample, dict) or "index" not in sample:
            raise CorruptFileError(f"sample at position {position} has no 'index'", files.rollout.path)
    return samples, payload.get("metadata")


def open_step(files: StepFiles, now: float, load: Loader = RunDir.load) -> OpenStep:
    """Load, resolve and summarize one step at time ``now``.

    ``load`` lets a caller reuse files it already parsed (unchanged path, size
    and mtime), e.g. a rollout file read while the train shards were landing.
    """
    samples, _metadata = _rollout_payload(files, now, load)
    problems: list[StepProblem] = []
    shards: list[Shard] = []
    for train_file in files.train:
        try:
            shards.append(Shard.from_payload(train_file.path, train_file.rank, load(train_file, now)))
        except StillWritingError as err:
            problems.append(StepProblem(train_file.path, ProblemKind.STILL_WRITING, str(err)))
        except UnsafePickleError as err:
            problems.append(StepProblem(train_file.path, ProblemKind.UNSAFE, str(err)))
        except DumpLoadError as err:
            problems.append(StepProblem(train_file.path, ProblemKind.CORRUPT, str(err)))

    newest_train = max((f.mtime for f in files.train), default=None)
    settling_until = None
    if newest_train is not None and now - newest_train < MIN_AGE_SECONDS:
        settling_until = newest_train + MIN_AGE_SECONDS
    known = {int(s["index"]) for s in samples}
    train_rows = resolve_rows(shards, known) if not files.evaluation else {}
    failed_files = [p for p in problems if p.kind is not ProblemKind.STILL_WRITING]
    unreadable = frozenset(known - set(train_rows)) if failed_files and not files.evaluation else frozenset()

    failed_names = ", ".join(p.path.name for p in failed_files)
    reasons: list[tuple[int, str]] = []
    rows = []
    for position, sample in enumerate(samples):
        index = int(sample["index"])
        train = train_rows.get(index)
        raw = raw_reward_at(shards, position) if train is not None else None
        row = sample_row(files.rollout_id, sample, train, raw)
        if index in unreadable:
            row = replace(row, alignment_failed=True)
            reasons.append((index, f"its train data is in a file that failed to load: {failed_names}"))
        elif train is not None and train.alignment_failed:
            reasons.append((index, train.alignment_reason or "per-token data could not be placed"))
        rows.append(row)
    groups = group_rows(rows, files.evaluation)
    summary = StepSummary(
        rollout_id=files.rollout_id,
        evaluation=files.evaluation,
        rows=ColumnRows.build(SampleRow, rows),
        groups=ColumnRows.build(GroupRow, groups),
        aggregate=step_aggregate(files.rollout_id, files.evaluation, rows, groups),
        problems=tuple(problems),
        complete=not any(p.kind is ProblemKind.STILL_WRITING for p in problems) and settling_until is None,
        signature=files.signature,
        alignment_reasons=tuple(reasons),
        settling_until=settling_until,
    )
    return OpenStep(summary, tuple(samples), train_rows, unreadable)
