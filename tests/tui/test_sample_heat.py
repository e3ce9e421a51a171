"""The sample screen's token text coloured by a statistic (``h``), driven by keys on real golden dumps."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
from rich.segment import Segment
from textual.app import App
from textual.geometry import Region
from textual.widgets import Static

from miles_tui.core.analysis import MASKED, NO_VALUE, TOP, HeatStatistic
from miles_tui.core.analysis.token_heat import token_heat
from miles_tui.core.dump import SERIES, Run, read_sidecar
from miles_tui.tui.screens.sample_screen import SampleScreen
from miles_tui.tui.views.token_text_lines import HEAT_CYCLE
from miles_tui.tui.widgets.heat_lines import HeatLines
from miles_tui.tui.widgets.token_text import TokenText

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


class SampleApp(App[None]):
    def __init__(self, case: str, rollout_id: int, sample_index: int) -> None:
        super().__init__()
        run = Run(GOLDEN / case, use_cache=False)
        self.step = run.open(rollout_id, False, time.time() + 3600)
        self.detokenizer = run.detokenizer
        self.sidecar = read_sidecar(run.path, rollout_id, False)
        self.sample_index = sample_index

    def on_mount(self) -> None:
        self.push_screen(SampleScreen(self.step, self.sample_index, self.detokenizer, self.sidecar))


def screen_of(app: App[None]) -> SampleScreen:
    assert isinstance(app.screen, SampleScreen)
    return app.screen


def legend_text(app: App[None]) -> str:
    return str(app.screen.query_one("#heat-legend", Static).render())


def token_segments(app: App[None]) -> list[tuple[int, Segment]]:
    """Each token on screen with the first segment drawn for it (after the app's colour filters)."""
    lines = app.screen.query_one(HeatLines)
    text = app.screen.query_one(TokenText)
    page = text.page
    assert page is not None
    strips = lines.render_lines(Region(0, 0, lines.size.width, lines.size.height))
    drawn = []
    for line, strip in zip(page.lines, strips, strict=False):
        segments = [s for s in strip if s.text]
        labels = [s.text for s in segments]
        cursor = 0
        for position, label in line:
            while labels[cursor] != label:  # padding and separators are segments too
                cursor += 1
            drawn.append((position, segments[cursor]))
            cursor += 1
    return drawn


async def test_h_cycles_the_nine_statistics_and_off_and_shift_h_goes_back() -> None:
    app = SampleApp("tp_dup", 0, 1)
    async with app.run_test(size=(160, 48)) as pilot:
        text = app.screen.query_one(TokenText)
        assert not text.display
        shown = []
        for statistic in HEAT_CYCLE[1:]:
            await pilot.press("h")
            await pilot.pause()
            assert text.display and screen_of(app).heat is statistic
            assert legend_text(app).startswith(f"{statistic.value} "), legend_text(app)
            shown.append(statistic)
        assert len(shown) == 9 and {s.series for s in shown} == set(SERIES)  # every per-token series
        await pilot.press("h")
        assert not text.display and screen_of(app).heat is None
        await pilot.press("H")
        await pilot.pause()
        assert screen_of(app).heat is HEAT_CYCLE[-1] and legend_text(app).startswith("ref logp ")
        await pilot.press("H", "H")
        await pilot.pause()
        assert screen_of(app).heat is HEAT_CYCLE[-3]


async def test_top_decile_tokens_are_underlined_and_masked_ones_struck() -> None:
    app = SampleApp("tp_dup", 0, 1)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("h")
        await pilot.pause()
        screen = screen_of(app)
        view = screen.sample.view
        heat = token_heat(view, HeatStatistic.LP_DIFF)
        assert heat.spread and heat.top().any() and (heat.levels == MASKED).any()
        legend = legend_text(app)
        assert f"underlined: top 10% >{heat.top_cut:.4f}" in legend
        assert f"deciles of {heat.counted} trained tokens" in legend
        drawn = token_segments(app)
        assert {p for p, _ in drawn} == set(range(view.total_length))  # the whole sample fits at 160x48
        cursor = view.prompt_length  # the cursor opens on the first response token
        for position, segment in drawn:
            style = segment.style
            assert style is not None
            if position == cursor:
                assert style.reverse
                continue
            if position < view.prompt_length:
                assert style.italic and not style.underline and not style.strike
                continue
            level = int(heat.levels[position - view.prompt_length])
            assert bool(style.underline) == (level == TOP), position
            assert bool(style.strike) == (level in (MASKED, NO_VALUE)), position


async def test_without_colour_the_marks_still_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    app = SampleApp("tp_dup", 0, 1)
    async with app.run_test(size=(120, 40)) as pilot:
        assert app.no_color
        await pilot.press("h", "h")  # entropy
        await pilot.pause()
        heat = token_heat(screen_of(app).sample.view, HeatStatistic.ENTROPY)
        prompt = screen_of(app).sample.view.prompt_length
        underlined = {p for p, s in token_segments(app) if s.style is not None and s.style.underline}
        struck = {p for p, s in token_segments(app) if s.style is not None and s.style.strike}
        assert underlined == {prompt + int(r) for r in np.flatnonzero(heat.top())}
        assert struck == {prompt + int(r) for r in np.flatnonzero(heat.levels == MASKED)}
        assert "entropy" in legend_text(app)


async def test_an_unreadable_series_is_said_and_never_drawn_as_low() -> None:
    app = SampleApp("cp_legacy_ambiguous", 1, 8)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("h")
        await pilot.pause()
        legend = legend_text(app)
        assert "|lpΔ| UNREADABLE for this sample (dumped, but its slices could not be placed)" in legend
        view = screen_of(app).sample.view
        drawn = token_segments(app)
        assert len(drawn) > 1
        for position, segment in drawn:
            style = segment.style
            assert style is not None
            if position > view.prompt_length:  # the cursor, on the first response token, is reversed
                assert style.strike and not style.underline  # no value: struck, never a (low) decile


async def test_the_text_follows_the_cursor_and_the_group_neighbour_keeps_the_statistic() -> None:
    app = SampleApp("tp_dup", 0, 1)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("h", "h")
        await pilot.press("end")
        await pilot.pause()
        screen = screen_of(app)
        page = app.screen.query_one(TokenText).page
        assert page is not None and page.holds(screen.tokens.position)
        assert app.screen.query_one(TokenText).region.bottom <= 23  # above the footer at 80x24
        await pilot.press("greater_than_sign")
        await pilot.pause()
        assert screen.sample_index != 1 and screen.heat is HeatStatistic.ENTROPY
        assert legend_text(app).startswith("entropy ")
        page = app.screen.query_one(TokenText).page
        assert page is not None and page.first == 0  # a new sample starts at its beginning


async def test_h_belongs_to_the_tokens_tab() -> None:
    app = SampleApp("tp_dup", 0, 0)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("t", "h")
        await pilot.pause()
        assert screen_of(app).heat is None
