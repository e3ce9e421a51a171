"""Zoom and pan of a time view: live windows follow now, panned ones stay inside the run, whole-run limits."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from miles_tui.core.telemetry import WINDOWS, Frame, TimeWindow, again, frame, go_live, go_start, pan, preset, zoom
from miles_tui.core.telemetry.time_window import MIN_SPAN

T0 = 1_787_223_000.0
RUN = 4 * 3600.0
NOW = T0 + RUN + 5  # a live run: the newest sample 5 s ago


def _frame(window: TimeWindow, now: float = NOW, first: float | None = T0, newest: float | None = T0 + RUN) -> Frame:
    return frame(window, now, first, newest)


def test_a_live_window_ends_now_and_the_presets_are_live() -> None:
    shown = _frame(preset(0))
    assert shown.live and (shown.since, shown.until) == (NOW - 900, NOW)
    assert [preset(i) for i in range(4)] == [TimeWindow(span, None) for span in WINDOWS]
    assert preset(9) == TimeWindow(None, None), "clamped to the list"
    whole = _frame(preset(3))
    assert (whole.since, whole.until) == (T0, NOW)


def test_panning_left_moves_half_a_window_and_right_comes_back_to_live() -> None:
    live = _frame(preset(0))
    earlier = pan(live, -0.5)
    assert earlier == TimeWindow(900.0, NOW - 450)
    shown = _frame(earlier)
    assert not shown.live and (shown.since, shown.until) == (NOW - 1350, NOW - 450)
    assert pan(_frame(pan(shown, -0.5)), 0.5) == earlier
    assert pan(shown, 0.5) == TimeWindow(900.0, None), "reaching the live end is live again"
    assert pan(live, 0.5) == live.window, "later than now: still live"


def test_a_panned_window_stops_at_the_start_of_the_run() -> None:
    window = go_start(_frame(preset(1)))
    assert window == TimeWindow(3600.0, T0 + 3600)
    shown = _frame(window)
    assert (shown.since, shown.until) == (T0, T0 + 3600)
    assert pan(shown, -0.5) == window, "nothing before the run"
    assert _frame(TimeWindow(3600.0, T0 - 9999)).since == T0, "a stale end is clamped too"


def test_zoom_keeps_a_live_window_live_and_a_panned_one_centred() -> None:
    live = _frame(preset(1))
    assert zoom(live, 0.5) == TimeWindow(1800.0, None)
    assert zoom(live, 2.0) == TimeWindow(7200.0, None)
    panned = _frame(TimeWindow(3600.0, T0 + 7200))
    inner = _frame(zoom(panned, 0.5))
    assert (inner.since, inner.until) == (T0 + 3600 + 900, T0 + 7200 - 900)
    outer = _frame(zoom(panned, 2.0))
    assert (outer.since, outer.until) == (T0 + 5400 - 3600, T0 + 5400 + 3600)


def test_zooming_out_past_the_run_is_the_whole_run_and_in_stops_at_a_minute() -> None:
    assert zoom(_frame(preset(2)), 2.0) == TimeWindow(None, None)
    near_start = _frame(TimeWindow(1800.0, T0 + 1800))
    assert _frame(zoom(near_start, 2.0)).since == T0, "zooming out at the start stays in the run"
    window = preset(0)
    for _ in range(10):
        window = zoom(_frame(window), 0.5)
    assert window == TimeWindow(MIN_SPAN, None)
    whole = _frame(TimeWindow(None, None))
    assert zoom(whole, 0.5) == TimeWindow((NOW - T0) / 2, None), "in from the whole run: its newer half"
    assert pan(whole, -0.5) == whole.window, "the whole run does not pan"
    assert go_start(whole) == whole.window


def test_live_again_keeps_the_length() -> None:
    assert go_live(_frame(TimeWindow(1800.0, T0 + 3600))) == TimeWindow(1800.0, None)


def test_a_stopped_run_pans_back_from_its_last_sample() -> None:
    now = T0 + RUN + 7200  # stopped two hours ago
    live = _frame(preset(0), now=now)
    assert live.live and live.anchored_to_data and live.until == T0 + RUN
    earlier = _frame(pan(live, -0.5), now=now)
    assert (earlier.since, earlier.until) == (T0 + RUN - 1350, T0 + RUN - 450)
    assert pan(earlier, 0.5) == TimeWindow(900.0, None)


def test_a_run_shorter_than_the_window_or_without_data_has_nowhere_to_pan() -> None:
    short = _frame(TimeWindow(3600.0, T0 + 100), first=T0, newest=T0 + 600, now=T0 + 600)
    assert short.live
    empty = _frame(TimeWindow(900.0, T0), first=None, newest=None)
    assert empty.live and (empty.since, empty.until) == (NOW - 900, NOW)
    assert pan(empty, -0.5) == TimeWindow(900.0, NOW - 450)
    assert _frame(pan(empty, -0.5), first=None, newest=None).live, "no data: nothing to pan over"


def test_again_resolves_a_new_window_over_the_same_clock() -> None:
    live = _frame(preset(0))
    moved = again(live, TimeWindow(900.0, T0 + 3600))
    assert moved.now == NOW and (moved.since, moved.until) == (T0 + 2700, T0 + 3600)


def _press(key: str, shown: Frame) -> TimeWindow:
    """The window after the compute screen's key ``key``."""
    if key in "+-":
        return zoom(shown, 0.5 if key == "+" else 2.0)
    if key in "<>":
        return pan(shown, -0.5 if key == "<" else 0.5)
    if key == "0":
        return go_live(shown)
    if key == "home":
        return go_start(shown)
    return preset(int(key) - 1)


@settings(max_examples=300, deadline=None)
@given(
    run=st.floats(60.0, 30 * 86400.0),
    stopped=st.floats(0.0, 86400.0),
    span=st.one_of(st.none(), st.floats(MIN_SPAN, 40 * 86400.0)),
    keys=st.lists(st.sampled_from(["+", "-", "<", ">", "0", "home", "1", "4"]), max_size=25),
)
def test_any_key_sequence_stays_inside_the_run(run: float, stopped: float, span: float | None, keys: list[str]) -> None:
    first, newest = T0, T0 + run
    now = newest + stopped
    window = TimeWindow(span, None)
    for key in keys:
        window = _press(key, frame(window, now, first, newest))
        assert window.span is None or window.span >= MIN_SPAN
    shown = frame(window, now, first, newest)
    assert shown.until <= shown.last and shown.length > 0
    if not shown.live:
        assert shown.since >= first and shown.until < shown.last
        assert shown.length == pytest.approx(window.span)
    else:
        assert shown.until == pytest.approx(max(now, newest) if not shown.anchored_to_data else newest)
