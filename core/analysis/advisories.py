"""Advisories: what a person should look at, as small pure rules.

Contract: every rule is a pure function of core values (a step summary, the
run's recorded arguments, telemetry records, the clock passed as ``now``)
returning zero or more :class:`Advisory`. Each advisory has a level, a stable
code for scripts and tests, a message a person can act on, and, where it
applies, the step and sample it points at (the UI jumps there). Rules never
read files. :func:`ordered` puts alarms before tuning advice.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, NamedTuple

from miles_tui.core.dump import ProblemKind, StepSummary

ZERO_STD_ALARM_FRACTION = 0.5
"""Zero-std groups at or above this fraction of a step's groups raise a warning."""

TRUNCATED_ALARM_FRACTION = 0.25
"""Truncated samples at or above this fraction of a step raise a warning."""


class Level(enum.IntEnum):
    """How urgent an advisory is; higher is worse."""

    INFO = 0
    WARNING = 1
    CRITICAL = 2

    @property
    def label(self) -> str:
        return self.name.lower()


@dataclass(frozen=True)
class Advisory:
    """One thing worth a person's attention."""

    level: Level
    """info, warning or critical."""
    code: str
    """Stable identifier (e.g. ``zero_std_groups``) for scripts and tests."""
    message: str
    """What is wrong and what to do, in one paragraph."""
    rollout_id: int | None = None
    """The step it points at."""
    evaluation: bool = False
    """Whether that step is an eval step."""
    sample_index: int | None = None
    """The sample it points at."""
    path: Path | None = None
    """The file it is about."""

    def to_dict(self) -> dict[str, Any]:
        record = asdict(self)
        record["level"] = self.level.label
        record["path"] = None if self.path is None else str(self.path)
        return record


def zero_std_groups(summary: StepSummary) -> list[Advisory]:
    """Most groups of the step have identical rewards: no policy gradient from them."""
    groups = [g for g in summary.groups if g.reward_mean is not None]
    degenerate = [g for g in groups if g.zero_std]
    if not groups or len(degenerate) / len(groups) < ZERO_STD_ALARM_FRACTION:
        return []
    rewards = [r.raw_reward if not summary.evaluation else r.reward for r in summary.rows]
    present = [r for r in rewards if r is not None]
    counted = f"{len(degenerate)}/{len(groups)} groups"
    if len(groups) < len(summary.groups):
        counted += f" with reward data (of {len(summary.groups)})"
    message = f"{counted} in step {summary.rollout_id} have zero reward spread, so they give no policy gradient"
    code = "zero_std_groups"
    if present and all(r == 0 for r in present):
        code = "all_rewards_zero"
        message += (
            "; every reward is 0, which points at a systematic failure (reward function, timeouts, "
            "truncation) rather than hard prompts"
        )
    else:
        message += "; the prompts may be too easy or too hard for the current policy"
    first = next((r for r in summary.rows if r.group_index == degenerate[0].group_index), None)
    return [
        Advisory(
            Level.WARNING,
            code,
            message,
            summary.rollout_id,
            summary.evaluation,
            None if first is None else first.sample_index,
        )
    ]


def truncated_samples(summary: StepSummary, max_response_len: int | None) -> list[Advisory]:
    """Many samples hit the response-length cap."""
    rows = summary.rows
    truncated = [r for r in rows if r.truncated]
    if not rows or len(truncated) / len(rows) < TRUNCATED_ALARM_FRACTION:
        return []
    cap = (
        f"--rollout-max-response-len ({max_response_len})"
        if max_response_len is not None
        else "--rollout-max-response-len"
    )
    return [
        Advisory(
            Level.WARNING,
            "truncated_samples",
            f"{len(truncated) / len(rows):.0%} of samples in step {summary.rollout_id} are truncated: check {cap}; "
            "in multi-turn runs the per-turn cap, not the context length, is usually what binds",
            summary.rollout_id,
            summary.evaluation,
            truncated[0].sample_index,
        )
    ]


def unreadable_per_token(summary: StepSummary) -> list[Advisory]:
    """Per-token data that was dumped but cannot be placed: blank means unreadable, not undumped."""
    if not summary.alignment_reasons or not summary.complete:
        return []  # while a step is still being written, a missing shard is pending, not unreadable
    # Group by the reason without its per-sample detail (the part in parentheses).
    reasons = Counter(reason.split(" (", 1)[0] for _, reason in summary.alignment_reasons)
    n = len(summary.alignment_reasons)
    why = "; ".join(f"{reason} ({count})" if len(reasons) > 1 else reason for reason, count in reasons.items())
    return [
        Advisory(
            Level.INFO,
            "per_token_unreadable",
            f"per-token data of {n} sample{'s' if n != 1 else ''} in step {summary.rollout_id} is unreadable, "
            f"not undumped: {why}. Their per-token values read UNREAD rather than show misaligned tokens",
            summary.rollout_id,
            summary.evaluation,
            summary.alignment_reasons[0][0],
        )
    ]


def file_problems(summary: StepSummary) -> list[Advisory]:
    """Files of the step that are corrupt, refused, still being written, or named like it but never read."""
    out = []
    for problem in summary.problems:
        if problem.kind is ProblemKind.UNSAFE:
            level, code = Level.CRITICAL, "unsafe_pickle"
        elif problem.kind is ProblemKind.CORRUPT:
            level, code = Level.WARNING, "corrupt_file"
        elif problem.kind is ProblemKind.IGNORED:
            level, code = Level.WARNING, "duplicate_step_file"
        else:
            level, code = Level.INFO, "still_writing"
        out.append(Advisory(level, code, problem.message, summary.rollout_id, summary.evaluation, path=problem.path))
    return out


def step_advisories(
    summary: StepSummary, run_args: Mapping[str, Any] | None = None, schema: str = "schema_version unknown"
) -> list[Advisory]:
    """Every rule that reads one step (the newest, usually); ``schema``: ``format_drift.schema_label`` of the run."""
    from miles_tui.core.analysis.format_drift import unknown_formats

    cap = None
    if run_args is not None:
        value = run_args.get("rollout_max_response_len")
        cap = int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
    return [
        *file_problems(summary),
        *zero_std_groups(summary),
        *truncated_samples(summary, cap),
        *unreadable_per_token(summary),
        *unknown_formats(summary, schema),
    ]


def step_error(rollout_id: int, evaluation: bool, message: str, path: Path | None, still_writing: bool) -> Advisory:
    """A step that cannot be read at all (rollout file corrupt, shards that disagree)."""
    if still_writing:
        return Advisory(Level.INFO, "still_writing", message, rollout_id, evaluation, path=path)
    return Advisory(Level.CRITICAL, "step_unreadable", message, rollout_id, evaluation, path=path)


LISTED_STEP_ERRORS = 3
"""Up to this many unreadable (or still writing) steps get an advisory each; more get one between them."""


class UnreadableStep(NamedTuple):
    """A step whose files could not be read."""

    rollout_id: int
    evaluation: bool
    message: str
    """One line that names the file."""
    still_writing: bool
    """Young files: read again shortly (else only when its files change)."""
    path: Path | None = None
    """The file at fault, when known."""


def step_errors(failures: Iterable[UnreadableStep]) -> list[Advisory]:
    """Steps that cannot be read, in any order.

    A few get one advisory each (:func:`step_error`, in step order); many get one
    advisory that counts them and names the first and the last, so 20,000 broken
    files make one line a person can act on, not 20,000. Linear in the failures.
    """
    out: list[Advisory] = []
    failures = list(failures)
    for still in (False, True):
        chosen = sorted((f for f in failures if f.still_writing is still), key=lambda f: (f.rollout_id, f.evaluation))
        if len(chosen) <= LISTED_STEP_ERRORS:
            out += [step_error(f.rollout_id, f.evaluation, f.message, f.path, still) for f in chosen]
            continue
        first, last = chosen[0], chosen[-1]
        what = "still being written" if still else "unreadable"
        message = (
            f"{len(chosen):,} steps {what}: first step {first.rollout_id}{' eval' if first.evaluation else ''}"
            f" ({first.message}); last step {last.rollout_id}{' eval' if last.evaluation else ''} ({last.message})"
        )
        if not still:
            message += ". Each is read again only when its files change"
        level, code = (Level.INFO, "steps_still_writing") if still else (Level.CRITICAL, "steps_unreadable")
        out.append(Advisory(level, code, message, first.rollout_id, first.evaluation))
    return out


def ordered(advisories: Iterable[Advisory]) -> list[Advisory]:
    """Alarms first (critical, then warning, then info), stable within a level."""
    return sorted(advisories, key=lambda a: -a.level)


def worst_level(advisories: Iterable[Advisory]) -> Level | None:
    """The highest level present, or None."""
    levels = [a.level for a in advisories]
    return max(levels) if levels else None
