"""The sparkline renderer: gaps never look like values, buckets keep spikes and gaps, cursor and bands."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from rich.style import Style

from miles_tui.tui.renderers.sparkline import (
    BARS,
    Band,
    SparkPicture,
    SparkStyles,
    bucket_bands,
    bucket_values,
    levels,
    render_sparkline,
    ruler,
    spark_frame,
)

NAN = np.nan
STYLES = SparkStyles(
    bar=Style(color="blue"), masked=Style(bgcolor="yellow"), prompt=Style(bgcolor="grey30"), cursor=Style(bgcolor="red")
)


def texts(values: list[float], width: int, height: int = 1, **kwargs: object) -> list[str]:
    strips = render_sparkline(np.array(values, dtype=np.float64), width, height, **kwargs)  # type: ignore[arg-type]
    return [strip.text for strip in strips]


def cell_styles(values: list[float], width: int, **kwargs: object) -> list[Style]:
    """The style of every cell of a one-row sparkline."""
    (strip,) = render_sparkline(np.array(values, dtype=np.float64), width, 1, styles=STYLES, **kwargs)  # type: ignore[arg-type]
    out: list[Style] = []
    for segment in strip:
        out += [segment.style or Style()] * len(segment.text)
    return out


def test_nan_draws_nothing_and_zero_draws_a_bar() -> None:
    (row,) = texts([0.0, NAN, 1.0], 3)
    assert row[1] == " "
    assert row[0] == BARS[0]  # zero is the minimum here: the lowest bar, not blank
    assert row[2] == BARS[-1]


def test_zero_between_negative_and_positive_sits_at_its_level() -> None:
    (row,) = texts([-1.0, 0.0, 1.0, NAN], 4)
    assert row[0] == BARS[0] and row[2] == BARS[-1] and row[3] == " "
    assert row[1] in BARS[3:5]  # middle of the range


def test_every_finite_value_is_visible_and_every_gap_is_blank() -> None:
    rng = np.random.default_rng(1)
    values = rng.normal(size=200)
    values[rng.random(200) < 0.3] = NAN
    for height in (1, 2, 4):
        frame = spark_frame(values, None, 200)
        level = levels(frame, height)
        assert ((level == 0) == np.isnan(values)).all()
        rows = SparkPicture.draw(frame, height).rows
        bottom = rows[-1]
        for value, char in zip(values, bottom, strict=True):
            assert (char == " ") == bool(np.isnan(value))


def test_multi_row_bars_fill_from_the_bottom() -> None:
    top, bottom = texts([0.0, 0.5, 1.0], 3, height=2)
    assert top[2] == BARS[-1] and bottom[2] == BARS[-1]
    assert top[0] == " " and bottom[0] == BARS[0]
    assert bottom[1] == BARS[-1] or top[1] == " "


def test_constant_series_draws_at_half_height() -> None:
    (row,) = texts([0.0, 0.0, 0.0], 3)
    assert row == BARS[3] * 3
    top, bottom = texts([-2.5] * 4, 4, height=2)
    assert top == "    " and bottom == BARS[-1] * 4


def test_all_nan_series_is_blank_and_has_no_range() -> None:
    values = np.full(10, NAN)
    frame = spark_frame(values, None, 5)
    assert frame.lo is None and frame.hi is None
    assert texts([NAN] * 10, 5, height=2) == [" " * 5, " " * 5]


def test_infinities_clamp_and_do_not_break_the_scale() -> None:
    (row,) = texts([-np.inf, 0.0, 1.0, np.inf], 4)
    assert row == BARS[0] + BARS[0] + BARS[-1] + BARS[-1]


def test_bucketing_keeps_the_largest_magnitude_with_its_sign() -> None:
    values = np.array([0.1, -3.0, 0.2, 1.0, NAN, 2.0])
    assert bucket_values(values, 3).tolist() == [-3.0, 2.0]
    assert bucket_values(values, 3, "mean") == pytest.approx([(0.1 - 3.0 + 0.2) / 3, 1.5])


def test_all_nan_bucket_stays_a_gap() -> None:
    values = np.array([1.0, 2.0, NAN, NAN, 3.0, NAN])
    assert np.isnan(bucket_values(values, 2)).tolist() == [False, True, False]
    assert np.isnan(bucket_values(values, 2, "mean")).tolist() == [False, True, False]
    (row,) = texts(values.tolist(), 3)
    assert row[1] == " " and row[0] != " " and row[2] != " "


def test_more_tokens_than_columns_buckets_uniformly() -> None:
    frame = spark_frame(np.arange(1000.0), None, 80)
    assert frame.tokens_per_column == 13 and frame.columns == 77
    assert frame.columns_of(0) == (0, 1) and frame.columns_of(999) == (76, 77)
    assert frame.position_at(1) == 13
    assert len(render_sparkline(np.arange(1000.0), 80, 3)[0].text) == 80


def test_fewer_tokens_than_columns_widens_each_token() -> None:
    frame = spark_frame(np.array([1.0, 2.0, 3.0]), None, 10)
    assert frame.columns_per_token == 3 and frame.columns == 9
    assert frame.columns_of(1) == (3, 6) and frame.position_at(8) == 2
    (row,) = texts([1.0, 2.0, 3.0], 10)
    assert row[:3] == BARS[0] * 3 and row[-1] == " "


def test_width_one_summarizes_everything_in_one_column() -> None:
    # absmax picks -2.0, the bottom of the window's range (the scale is the tokens', not the buckets')
    assert texts([0.5, -2.0, 1.0], 1) == [BARS[0]]
    assert texts([NAN, NAN], 1) == [" "]
    assert texts([1.0], 1, height=3) == [" ", BARS[3], BARS[-1]]  # one value is constant: half height


def test_window_cuts_the_series() -> None:
    values = np.arange(100.0)
    frame = spark_frame(values, None, 50, start=10, stop=20)
    assert (frame.start, frame.stop, frame.columns_per_token) == (10, 20, 5)
    assert frame.lo == 10.0 and frame.hi == 19.0
    assert frame.columns_of(9) is None and frame.columns_of(20) is None


def test_bands_color_the_background_and_bucket_to_the_most_data() -> None:
    bands = np.array([Band.PROMPT, Band.PROMPT, Band.TRAINED, Band.MASKED], dtype=np.int8)
    styles = cell_styles([NAN, NAN, 1.0, NAN], 4, bands=bands)
    assert styles[0].bgcolor == Style(bgcolor="grey30").bgcolor
    assert styles[2].bgcolor is None
    assert styles[3].bgcolor == Style(bgcolor="yellow").bgcolor
    assert bucket_bands(bands, 2).tolist() == [Band.PROMPT, Band.TRAINED]
    assert bucket_bands(np.array([Band.MASKED, Band.PROMPT], dtype=np.int8), 2).tolist() == [Band.MASKED]


def test_cursor_highlights_exactly_its_columns() -> None:
    styles = cell_styles([1.0, 2.0, 3.0, 4.0], 8, cursor=2)
    marked = [i for i, style in enumerate(styles) if style.bgcolor == Style(bgcolor="red").bgcolor]
    assert marked == [4, 5]
    assert all(style.color == Style(color="blue").color for style in styles[:8])
    bucketed = cell_styles(list(np.arange(100.0)), 10, cursor=55)
    assert [i for i, s in enumerate(bucketed) if s.bgcolor is not None] == [5]


def test_cursor_on_a_gap_is_still_visible() -> None:
    styles = cell_styles([1.0, NAN, 3.0], 3, cursor=1)
    assert styles[1].bgcolor == Style(bgcolor="red").bgcolor


def test_strips_are_exactly_the_width_asked() -> None:
    for width in (1, 7, 33, 200):
        for strip in render_sparkline(np.linspace(-1, 1, 50), width, 2):
            assert strip.cell_length == width


def test_empty_series_and_zero_width() -> None:
    assert texts([], 4) == ["    "]
    assert spark_frame(np.arange(3.0), None, 0).columns == 0


def test_ruler_labels_do_not_overlap_and_sit_on_their_columns() -> None:
    frame = spark_frame(np.arange(1000.0), None, 100)
    line = ruler(frame, 100)
    assert len(line) == 100
    assert line.startswith("╵0 ")
    ticks = [i for i, char in enumerate(line) if char == "╵"]
    labels = [int(line[i + 1 :].split()[0]) for i in ticks]
    for column, position in zip(ticks, labels, strict=True):
        span = frame.columns_of(position)
        assert span is not None and span[0] == column
    assert all(b - a > len(str(labels[-1])) for a, b in itertools.pairwise(ticks))
