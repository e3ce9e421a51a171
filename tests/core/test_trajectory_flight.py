"""Samples in flight per bin: exact time-weighted counts per state, against a brute-force sum."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from miles_tui.core.analysis.trajectory_flight import in_flight, mean_count
from miles_tui.core.telemetry import TimeBins
from miles_tui.core.telemetry.stream_records import TrajectoryEvent


def test_a_span_over_half_a_bin_counts_half() -> None:
    bins = TimeBins(0.0, 10.0, 2)
    assert list(mean_count([(0.0, 2.5)], bins)) == [0.5, 0.0]
    assert list(mean_count([(0.0, 10.0), (5.0, 10.0), (-5.0, 20.0)], bins)) == [2.0, 3.0]
    assert list(mean_count([], bins)) == [0.0, 0.0]
    assert list(mean_count([(20.0, 30.0)], bins)) == [0.0, 0.0]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.floats(-20, 120), st.floats(0.001, 80)), max_size=30),
    st.integers(1, 40),
)
def test_mean_counts_equal_the_overlap_summed_span_by_span(raw: list[tuple[float, float]], count: int) -> None:
    bins = TimeBins(0.0, 100.0, count)
    spans = [(start, start + length) for start, length in raw]
    edges = bins.edges()
    expected = np.zeros(count)
    for a, b in spans:
        for i in range(count):
            expected[i] += max(0.0, min(b, edges[i + 1]) - max(a, edges[i])) / bins.width
    assert np.allclose(mean_count(spans, bins), expected, atol=1e-6)


def test_states_of_a_multi_turn_sample_and_an_open_attempt() -> None:
    events = [
        TrajectoryEvent(0.0, "attempt_start", 1, 0, -1, "", ""),
        TrajectoryEvent(2.0, "gen_start", 1, 0, 1, "1", ""),
        TrajectoryEvent(4.0, "gen_end", 1, 0, 1, "1", ""),
        TrajectoryEvent(4.0, "tool_start", 1, 0, 1, "", ""),
        TrajectoryEvent(6.0, "tool_end", 1, 0, 1, "", ""),
        TrajectoryEvent(6.0, "gen_start", 1, 0, 2, "1", ""),
        TrajectoryEvent(8.0, "attempt_end", 1, 0, -1, "1", "completed"),
        TrajectoryEvent(5.0, "attempt_start", 2, 0, -1, "", ""),  # still queued at now = 10
    ]
    flight = in_flight(events, TimeBins(0.0, 10.0, 5), now=10.0)
    assert list(flight.generating) == [0.0, 1.0, 0.0, 1.0, 0.0]
    assert list(flight.tools) == [0.0, 0.0, 1.0, 0.0, 0.0]
    assert list(flight.queued) == [1.0, 0.0, 0.5, 1.0, 1.0]
    assert flight.samples == 2 and flight.peak == 1.0
