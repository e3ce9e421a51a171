"""A trend with more steps than cells fills its line and ends at the newest step (69 steps in 66 cells drew 35
cells and left the right half blank: "newest right" read as newest in the middle)."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from textual.app import App, ComposeResult

from miles_tui.tui.widgets.step_trends import TrendLine, binned


class TrendApp(App[None]):
    def compose(self) -> ComposeResult:
        yield TrendLine(id="line")


async def test_a_long_trend_fills_the_line_and_ends_at_the_newest_step() -> None:
    app = TrendApp()
    async with app.run_test(size=(66, 3)) as pilot:
        line = app.query_one(TrendLine)
        line.show(np.linspace(0.1, 0.9, 69), (0.0, 1.0))
        await pilot.pause()
        text = line.render_line(0).text
        assert len(text) == 66 and " " not in text, repr(text)
        assert text[-1] == "▇" and text[0] == "▂", repr(text)  # 0.9 and 0.1 on a 0-1 scale


@given(st.lists(st.one_of(st.floats(-1e6, 1e6), st.just(math.nan)), min_size=1, max_size=300), st.integers(1, 120))
def test_binned_cells_hold_the_mean_of_their_steps(values: list[float], width: int) -> None:
    array = np.array(values)
    cells = binned(array, width)
    if len(values) <= width:
        assert cells is array
        return
    assert len(cells) == width
    edges = [c * len(values) // width for c in range(width + 1)]
    for c in range(width):
        part = [v for v in values[edges[c] : edges[c + 1]] if not math.isnan(v)]
        assert (math.isnan(cells[c]) and not part) or math.isclose(cells[c], sum(part) / len(part), abs_tol=1e-6)
