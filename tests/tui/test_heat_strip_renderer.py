"""The heat-strip renderer: exact width, a character per level (readable without colour), gaps blank; phase
bands a character per category; time axes counted back from the window end or from now."""

from __future__ import annotations

import numpy as np
import pytest
from rich.style import Style

from miles_tui.tui.renderers.heat_strip import (
    HEAT,
    RAMP,
    band_strip,
    heat_strip,
    levels,
    stretch,
    time_axis,
)


def test_levels_span_the_ramp_and_zero_is_not_a_gap() -> None:
    values = np.array([0.0, 12.4, 12.5, 50.0, 99.9, 100.0, 250.0, -5.0, np.nan])
    assert levels(values).tolist() == [1, 1, 2, 5, 8, 8, 8, 1, 0]


def test_strip_reads_without_colour_and_is_exactly_width_cells() -> None:
    values = np.array([0.0, np.nan, 50.0, 100.0])
    strip = heat_strip(values, 8)
    assert strip.cell_length == 8
    assert strip.text == "▁▁  ▅▅██"
    assert RAMP[0] in strip.text and " " in strip.text


def test_each_level_takes_its_colour_and_a_single_style_colours_every_level() -> None:
    segments = list(heat_strip(np.array([0.0, 100.0]), 2))
    assert [s.style.color.name if s.style and s.style.color else None for s in segments] == [HEAT[0], HEAT[-1]]
    one = Style(color="red")
    assert {s.style for s in heat_strip(np.array([0.1, 0.9]), 2, scale=1.0, styles=(one,))} == {one}


def test_stretch_widens_few_values_and_averages_many() -> None:
    np.testing.assert_array_equal(stretch(np.array([1.0, 2.0]), 5), [1, 1, 1, 2, 2])
    np.testing.assert_array_equal(stretch(np.array([1.0, 3.0, np.nan, np.nan]), 2), [2, np.nan])
    assert len(stretch(np.array([]), 3)) == 3 and heat_strip(np.array([]), 3).text == "   "


def test_time_axis_labels_count_back_from_the_end() -> None:
    axis = time_axis(0, 900, 90)
    assert len(axis) == 90 and axis.endswith("now╵")
    assert "╵-2m" in axis and "╵-14m" in axis
    position = axis.index("╵-4m")
    assert abs(position - round(660 / 900 * 89)) <= 1, "the tick sits under the cell that draws that time"
    assert time_axis(0, 60, 10, "end").endswith("end╵")


def test_band_strip_draws_each_category_with_its_own_character_and_style() -> None:
    red, grey = Style(color="red"), Style(color="grey50")
    strip = band_strip(np.array([0, 1, -1, 1]), 8, ("█", "·"), (red, grey))
    assert strip.cell_length == 8 and strip.text == "██··  ··"
    assert [s.style for s in strip if s.text.strip()] == [red, grey, grey]
    assert band_strip(np.array([0, 7, 1]), 3, ("a", "b"), (red, grey)).text == "a b", "unknown id: blank"
    assert band_strip(np.array([0, 1, 0, 1, 0, 1]), 3, ("a", "b"), (red, grey)).text == "aaa"
    assert band_strip(np.array([], dtype=np.int64), 2, ("a",), (red,)).text == "  "


def test_a_panned_axis_counts_back_from_now() -> None:
    axis = time_axis(0, 900, 90, "-15m", ref=1800)
    assert axis.endswith("-15m╵") and "╵-20m" in axis and "╵-28m" in axis and "-14m" not in axis
    assert time_axis(0, 900, 90, ref=900) == time_axis(0, 900, 90)


@pytest.mark.parametrize("span", [120.0, 225.0, 600.0, 900.0, 3600.0])
def test_time_axis_labels_are_distinct_at_every_zoom(span: float) -> None:
    """Ticks 30 s apart were rounded to the minute: a 3m45s window read ``-4m -3m -2m -2m -2m -1m``."""
    labels = [part for part in time_axis(0.0, span, 100).split() if part.startswith("╵-")]
    assert len(labels) >= 3 and len(set(labels)) == len(labels), labels
