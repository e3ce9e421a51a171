"""The compare and outlier views' rows, checked without driving the app: what each cell says in text."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from miles_tui.core.analysis import (
    Delta,
    OutlierKind,
    SampleOutlier,
    compare_steps,
    group_across_steps,
    sample_outliers,
)
from miles_tui.core.dump import Run, StepSummary
from miles_tui.tui.formatting import MISSING, UNREAD, cadence, duration
from miles_tui.tui.views.compare_rows import GROUP_COLUMNS, TRACE_COLUMNS, delta_text, group_cells, headline, trace_rows
from miles_tui.tui.views.outlier_rows import SAMPLE_COLUMNS, sample_cells
from tests.conftest import EPOCH


def _summaries(run_dir: Path) -> tuple[StepSummary, StepSummary]:
    run = Run(run_dir)
    return run.summary(2, False, EPOCH), run.summary(3, False, EPOCH)


def test_a_delta_reads_without_colour() -> None:
    assert delta_text(Delta("reward_mean", 0.5, 0.75, 0.25)).plain == "↑0.250"
    assert delta_text(Delta("truncated_frac", 0.5, 0.25, -0.25)).plain == "↓25pt"
    assert delta_text(Delta("reward_mean", 0.5, 0.5, 0.0)).plain == "="
    assert delta_text(Delta("reward_mean", None, 0.5, None)).plain == "–"
    # colour is only a hint: more reward is good, more truncation bad
    assert delta_text(Delta("reward_mean", 0.5, 0.75, 0.25)).spans[0].style == "green"
    assert delta_text(Delta("truncated_frac", 0.25, 0.5, 0.25)).spans[0].style == "red"


def test_group_cells_match_the_columns_and_unreadable_rewards_read_unread(demo_run: Path) -> None:
    comparison = compare_steps(*_summaries(demo_run))
    group = comparison.groups[0]
    cells = group_cells(group)
    assert len(cells) == len(GROUP_COLUMNS)
    assert cells[0].plain == str(group.group_index)
    assert cells[2].plain == f"{group.delta('reward_mean').a:.3f}"
    unread = [c.plain for c in group_cells(group, unread_a=True)]
    assert unread[2] == UNREAD and unread[4] == UNREAD  # reward A and its delta
    assert unread[3] != UNREAD  # reward B is readable


def test_the_headline_wraps_between_figures(demo_run: Path) -> None:
    comparison = compare_steps(*_summaries(demo_run))
    wide = headline(comparison, 400).plain
    assert "\n" not in wide and wide.startswith("reward ") and " │ samples " in wide
    narrow = headline(comparison, 40).plain.split("\n")
    assert len(narrow) > 3 and all(" │ " not in line or len(line) <= 40 for line in narrow)


def test_a_traced_group_is_a_step_line_then_its_samples(demo_run: Path) -> None:
    a, b = _summaries(demo_run)
    trace = group_across_steps([a, b], 0)
    rows = trace_rows(trace, a.rollout_id, b.rollout_id, evaluation=False)
    assert all(len(row.cells) == len(TRACE_COLUMNS) for row in rows)
    assert rows[0].cells[0].plain == "2 A" and rows[0].style == "bold"
    b_line = next(row for row in rows if row.key == ("step", 3))
    assert b_line.cells[0].plain == "3 B"
    samples = [row for row in rows if row.key[0] == "sample"]
    assert len(samples) == sum(len(found.rows) for found in trace)


def test_sample_outlier_cells_say_unread_for_unreadable_figures(demo_run: Path) -> None:
    a, b = _summaries(demo_run)
    [top] = sample_outliers([a, b], OutlierKind.LP_DIFF, limit=1)
    cells = sample_cells(1, top)
    assert len(cells) == len(SAMPLE_COLUMNS)
    assert [c.plain for c in cells[:3]] == ["1", str(top.rollout_id), str(top.sample_index)]
    broken = dataclasses.replace(top, row=dataclasses.replace(top.row, alignment_failed=True, mean_entropy=None))
    assert UNREAD in [c.plain for c in sample_cells(1, broken)]


def test_an_outlier_of_a_removed_sample_says_removed(demo_run: Path) -> None:
    a, b = _summaries(demo_run)
    [top] = sample_outliers([a, b], OutlierKind.LP_DIFF, limit=1)
    removed = dataclasses.replace(top, row=dataclasses.replace(top.row, remove_sample=True))
    assert cells_of(removed)[-1].endswith("✗ removed") and not cells_of(top)[-1].endswith("removed")


def cells_of(outlier: SampleOutlier) -> list[str]:
    return [cell.plain for cell in sample_cells(1, outlier)]


@pytest.mark.parametrize(
    ("value", "width", "shown"),
    [
        (0.018, 7, "0.018"),
        (0.018, 4, "0.02"),  # rounded, never the prefix 0.01
        (-0.866, 4, "-0.9"),  # never -0.8
        (-0.866, 2, "-1"),
        (12345.678, 7, "12345.7"),
        (-123456.5, 6, "-1.2e5"),
        (-123456.5, 5, "-1e5"),
        (0.0004, 6, "4.0e-4"),  # not 0.00: a value that is not zero does not read as zero
        (123456789, 5, "1.2e8"),
        (-123456789, 3, "…"),
        (None, 1, "–"),
    ],
)
def test_a_number_that_does_not_fit_takes_a_shorter_exact_form(value: float | None, width: int, shown: str) -> None:
    from miles_tui.tui.formatting import number_within

    assert number_within(value, width) == shown


@pytest.mark.parametrize(
    ("seconds", "padded", "minutes", "shown"),
    [
        (4.4, True, False, "4s"),
        (192, True, False, "3m12s"),
        (600.9, True, False, "10m00s"),
        (900, True, False, "15m00s"),
        (7500, True, False, "2h05m"),
        (273600, True, False, "3d04h"),
        (900, False, False, "15m"),
        (450, False, False, "7m30s"),
        (6720, False, False, "1h52m"),
        (172800, False, False, "2d"),
        (30, False, True, "30s"),
        (300, False, True, "5m"),
        (5400, False, True, "1h30m"),
        (7200, False, True, "2h"),
        (200000, False, True, "2d07h"),
        (89, False, True, "1m"),
        (-3, True, False, "0s"),
        (float("nan"), True, False, MISSING),
        (None, False, False, MISSING),
    ],
)
def test_one_duration_formatter_for_ages_windows_and_ticks(
    seconds: float | None, padded: bool, minutes: bool, shown: str
) -> None:
    """Ages pad the smaller unit (columns hold still), window lengths are exact, tick labels round to minutes."""
    assert duration(seconds, padded=padded, minutes=minutes) == shown


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(0.9998, "1s"), (1.0004, "1s"), (0.5, "0.5s"), (14.7, "15s"), (59.6, "1m"), (600.2, "10m"), (0, MISSING),
     (None, MISSING), (float("inf"), MISSING)],
)  # fmt: skip
def test_a_sampling_cadence_is_rounded_never_floored_to_every_0s(seconds: float | None, shown: str) -> None:
    """The GPU view's title said ``every 0s`` for a 1 s sampler whose median gap was 0.9998 s."""
    assert cadence(seconds) == shown
