"""The scatter model: points, placement on the dot grid, and a cursor that reaches every point."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from miles_tui.core.analysis import Scatter, dot_of, step_cursor, step_scatter
from miles_tui.core.analysis.scatter import ScatterPoint
from miles_tui.core.dump import Run
from tests.conftest import EPOCH


def test_points_of_a_step_skip_samples_without_a_reward(demo_run: Path) -> None:
    summary = Run(demo_run).summary(2, False, EPOCH)
    rows = list(summary.rows)
    rows[0] = replace(rows[0], reward=None)
    scatter = step_scatter(replace(summary, rows=tuple(rows)))
    assert scatter.without_reward == 1
    assert len(scatter.points) == len(rows) - 1
    assert [p.length for p in scatter.points] == sorted(p.length for p in scatter.points)
    assert {p.sample_index for p in scatter.points} == {r.sample_index for r in rows[1:]}
    assert any(p.truncated for p in scatter.points) == any(r.truncated for r in rows[1:])


def test_extremes_land_on_the_grid_corners() -> None:
    low = ScatterPoint(1, 10, -1.0, False)
    high = ScatterPoint(2, 90, 3.0, True)
    scatter = Scatter((low, high), 0, (10, 90), (-1.0, 3.0))
    assert dot_of(scatter, low, 20, 5) == (0, 19)  # left, bottom
    assert dot_of(scatter, high, 20, 5) == (39, 0)  # right, top


points = st.lists(
    st.tuples(st.integers(0, 500), st.floats(-5, 5, allow_nan=False)), min_size=1, max_size=30, unique=True
)


@given(points)
def test_the_cursor_reaches_every_point_and_up_goes_up(raw: list[tuple[int, float]]) -> None:
    pts = sorted(
        (ScatterPoint(i, length, reward, False) for i, (length, reward) in enumerate(raw)),
        key=lambda p: (p.length, p.reward, p.sample_index),
    )
    lengths, rewards = [p.length for p in pts], [p.reward for p in pts]
    scatter = Scatter(tuple(pts), 0, (min(lengths), max(lengths)), (min(rewards), max(rewards)))
    seen, index = {0}, 0
    for _ in pts:
        index = step_cursor(scatter, index, "right")
        seen.add(index)
    assert seen == set(range(len(pts)))
    for start in range(len(pts)):
        up = step_cursor(scatter, start, "up")
        assert up == start or pts[up].reward > pts[start].reward
        if any(p.reward > pts[start].reward for p in pts):
            assert up != start
        down = step_cursor(scatter, start, "down")
        assert down == start or pts[down].reward < pts[start].reward
