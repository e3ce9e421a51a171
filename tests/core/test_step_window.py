"""The metrics charts' step window (zoom and keeping the cursor in view)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from miles_tui.core.analysis.step_window import MIN_SPAN_STEPS, window_holding, zoom_steps


def test_zoom_in_keeps_the_newest_step_without_a_cursor_and_out_returns_to_the_whole_run() -> None:
    window = zoom_steps(None, (0, 1000), -1)
    assert window == (500, 1000)
    assert zoom_steps(window, (0, 1000), -1) == (750, 1000)
    assert zoom_steps((750, 1000), (0, 1000), 1) == (500, 1000)
    assert zoom_steps((500, 1000), (0, 1000), 1) is None, "a window as wide as the run is the whole run"


def test_zoom_around_the_cursor_keeps_it_where_it_is_on_screen() -> None:
    assert zoom_steps(None, (0, 1000), -1, center=100) == (50, 550)
    assert zoom_steps((0, 400), (0, 1000), -1, center=200) == (100, 300)


def test_zoom_stops_at_the_narrowest_window_and_at_the_run_s_ends() -> None:
    window = None
    for _ in range(20):
        window = zoom_steps(window, (0, 1000), -1, center=2)
    assert window is not None and window[1] - window[0] == MIN_SPAN_STEPS and window[0] <= 2 <= window[1]
    assert zoom_steps(None, (5, 5), -1) is None and zoom_steps(None, None, -1) is None


@given(
    st.floats(0, 1e6), st.floats(1, 1e6), st.lists(st.sampled_from([-1, 1]), max_size=30),
    st.none() | st.floats(0, 2e6),
)  # fmt: skip
def test_a_window_is_always_inside_the_run_and_never_narrower_than_the_minimum(
    first: float, length: float, moves: list[int], center: float | None
) -> None:
    extent = (first, first + length)
    window = None
    for direction in moves:
        window = zoom_steps(window, extent, direction, center)
        if window is not None:
            lo, hi = window
            assert extent[0] - 1e-6 <= lo < hi <= extent[1] + 1e-6
            assert hi - lo >= min(MIN_SPAN_STEPS, length) - 1e-6


def test_a_cursor_outside_the_window_slides_it_just_enough() -> None:
    assert window_holding((100, 200), 150) == (100, 200)
    assert window_holding((100, 200), 250) == (150, 250)
    assert window_holding((100, 200), 40) == (40, 140)
    assert window_holding(None, 40) is None
