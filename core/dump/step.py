"""One step opened: its rollout file joined with its resolved train rows.

Contract: :func:`open_step` loads the step's rollout file and every train
file, resolves each sample's train row (:mod:`miles_tui.core.dump.resolve`) and derives the
ROW, GROUP and aggregate values (:mod:`miles_tui.core.dump.summary`). A train file that
fails to load does not fail the step: it becomes a :class:`StepProblem`
naming the file, and samples that no readable file holds are flagged as
unreadable (never shown as absent). Each rollout sample is checked against
the spec's field types (:mod:`miles_tui.core.dump.record_schema`) as it enters: a sample
with a mistyped field keeps its row, flagged unreadable with a reason naming
the file and the field, and the mistyped fields are left out of everything
derived from it (a sample without a usable index cannot be placed and is left
out); the rollout file gets one :class:`StepProblem` naming those samples and
fields, and every other sample reads as usual. A file still being written makes the
step ``complete = False``: it fills in on a later open. The rollout file
itself failing to load raises (there is nothing to show). Nothing is written.
The summary's classes live in :mod:`miles_tui.core.dump.step_summary` and are re-exported here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from miles_tui.core.base.errors import (
    CorruptFileError,
    DumpLoadError,
    StepNotFoundError,
    StillWritingError,
    UnsafePickleError,
)
from miles_tui.core.dump.column_rows import ColumnRows
from miles_tui.core.dump.record_schema import FieldProblem, sample_problems
from miles_tui.core.dump.resolve import FieldState, Shard, TrainRow, raw_reward_at, resolve_rows
from miles_tui.core.dump.run_dir import MIN_AGE_SECONDS, FileStat, RunDir, StepFiles, train_key
from miles_tui.core.dump.step_summary import GroupRow, ProblemKind, SampleRow, StepProblem, StepSummary
from miles_tui.core.dump.summary import group_rows, sample_row, step_aggregate

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
    rollout_path: Path | None = None
    """The rollout file the samples come from (for messages naming it)."""
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


@dataclass(frozen=True)
class _RolloutSamples:
    """The rollout file's samples as core may read them, with the ones that are not."""

    readable: list[tuple[int, Mapping[str, Any]]]
    """(rollout position, sample) of every sample with a usable index, mistyped fields removed."""
    bad_fields: dict[int, tuple[FieldProblem, ...]]
    """Sample index -> the fields that do not have the spec's type (the sample shows unreadable)."""
    unplaced: list[tuple[int, tuple[FieldProblem, ...]]]
    """(rollout position, problems) of samples without a usable index: they cannot be shown."""


def _rollout_samples(files: StepFiles, now: float, load: Loader) -> _RolloutSamples:
    payload = load(files.rollout, now)
    if not isinstance(payload, dict) or not isinstance(payload.get("samples"), list):
        raise CorruptFileError("not a rollout file: expected a dict with a 'samples' list", files.rollout.path)
    out = _RolloutSamples([], {}, [])
    for position, sample in enumerate(payload["samples"]):
        problems = sample_problems(sample)
        if not problems:
            out.readable.append((position, sample))
        elif any(p.field in ("(sample)", "index") for p in problems):
            out.unplaced.append((position, problems))
        else:
            bad = {p.field for p in problems}
            out.readable.append((position, {k: v for k, v in sample.items() if k not in bad}))
            out.bad_fields[int(sample["index"])] = problems
    return out


def _sample_problem(files: StepFiles, samples: _RolloutSamples) -> StepProblem | None:
    """One line for the rollout file naming its mistyped samples and fields (None: every sample is readable)."""
    notes = [f"sample {i}: {', '.join(p.describe() for p in problems)}" for i, problems in samples.bad_fields.items()]
    notes += [f"position {pos}: {', '.join(p.describe() for p in problems)}" for pos, problems in samples.unplaced]
    if not notes:
        return None
    count = len(notes)
    shown = "; ".join(notes[:3]) + (f"; and {count - 3} more" if count > 3 else "")
    message = (
        f"{count} sample{'s' if count > 1 else ''} with fields of the wrong type or size, shown unreadable"
        f"{' (without an index: left out)' if samples.unplaced else ''}: {shown}"
    )
    return StepProblem(files.rollout.path, ProblemKind.CORRUPT, str(CorruptFileError(message, files.rollout.path)))


def _ignored_problems(files: StepFiles) -> list[StepProblem]:
    """One problem per file whose name claims the step but is not the one miles writes (never read)."""
    out = []
    for file in files.ignored:
        shard = train_key(file.name)
        canonical = files.rollout.name if shard is None else f"{shard[0]}_{shard[1]}.pt"
        message = (
            f"also claims step {files.rollout_id} ({'train shard ' + canonical if shard else canonical}), but miles "
            f"writes and reads only {canonical}: ignored, {canonical} is read (remove or rename this file)"
        )
        out.append(StepProblem(file.path, ProblemKind.IGNORED, str(CorruptFileError(message, file.path))))
    return out


def open_step(files: StepFiles, now: float, load: Loader = RunDir.load) -> OpenStep:
    """Load, resolve and summarize one step at time ``now``.

    ``load`` lets a caller reuse files it already parsed (unchanged path, size
    and mtime), e.g. a rollout file read while the train shards were landing.
    """
    rollout = _rollout_samples(files, now, load)
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
    known = {int(s["index"]) for _, s in rollout.readable}
    train_rows = {}
    if not files.evaluation:
        # A sample left out (no usable index) is still in some shard: do not call that shard foreign.
        resolved = resolve_rows(shards, None if rollout.unplaced else known)
        train_rows = {index: row for index, row in resolved.items() if index in known}
    failed_files = [p for p in problems if p.kind is not ProblemKind.STILL_WRITING]
    unreadable = frozenset(known - set(train_rows)) if failed_files and not files.evaluation else frozenset()

    failed_names = ", ".join(p.path.name for p in failed_files)
    reasons: list[tuple[int, str]] = []
    rows = []
    for position, sample in rollout.readable:
        index = int(sample["index"])
        train = train_rows.get(index)
        raw = raw_reward_at(shards, position) if train is not None else None
        row = sample_row(files.rollout_id, sample, train, raw)
        if index in rollout.bad_fields:
            row = replace(row, alignment_failed=True)
            described = ", ".join(p.describe() for p in rollout.bad_fields[index])
            reasons.append((index, f"its rollout record is unreadable ({files.rollout.path.name}: {described})"))
        elif index in unreadable:
            row = replace(row, alignment_failed=True)
            reasons.append((index, f"its train data is in a file that failed to load: {failed_names}"))
        elif train is not None and train.alignment_failed:
            reasons.append((index, train.alignment_reason or "per-token data could not be placed"))
        rows.append(row)
    sample_problem = _sample_problem(files, rollout)
    if sample_problem is not None:
        problems.append(sample_problem)
    problems += _ignored_problems(files)
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
    samples = tuple(sample for _, sample in rollout.readable)
    return OpenStep(summary, samples, train_rows, unreadable, files.rollout.path)
