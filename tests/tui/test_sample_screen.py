"""The sample screen, driven by keys on real golden dumps (and one 32k-token synthetic sample for latency)."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from textual import on
from textual.app import App
from textual.binding import Binding
from textual.content import Content
from textual.widgets import Static, TabbedContent

from miles_tui.core.dump import SERIES, Conversation, FieldState, Run, Sidecar, TokenView, read_sidecar
from miles_tui.core.dump import Message as ChatMessage
from miles_tui.core.dump.token_view import token_view
from miles_tui.tui.formatting import number
from miles_tui.tui.renderers.plot import finite_runs
from miles_tui.tui.screens.sample_screen import SampleScreen
from miles_tui.tui.widgets.series_chart import ChartSeries, SeriesChart, chart_text
from miles_tui.tui.widgets.token_sparkline import GUTTER, TokenSparkline

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "tests" / "golden"
sys.path.insert(0, str(REPO))  # bench/ is not a package: the latency test shares the benchmark's fixture and clock
from bench.sample_cursor import measure, synthetic_step  # noqa: E402


class SampleApp(App[None]):
    """Pushes one SampleScreen and records the messages it posts."""

    def __init__(self, screen_factory: Any) -> None:
        super().__init__()
        self.screen_factory = screen_factory
        self.shown: list[SampleScreen.SampleShown] = []

    def on_mount(self) -> None:
        self.push_screen(self.screen_factory())

    @on(SampleScreen.SampleShown)
    def _record(self, message: SampleScreen.SampleShown) -> None:
        self.shown.append(message)


def golden(case: str, rollout_id: int, sample_index: int, evaluation: bool = False) -> SampleApp:
    run = Run(GOLDEN / case, use_cache=False)
    step = run.open(rollout_id, evaluation, time.time() + 3600)
    sidecar = read_sidecar(run.path, rollout_id, evaluation)
    return SampleApp(lambda: SampleScreen(step, sample_index, run.detokenizer, sidecar))


def screen_of(app: App[None]) -> SampleScreen:
    assert isinstance(app.screen, SampleScreen)
    return app.screen


def cursor_line(app: App[None]) -> str:
    return str(app.screen.query_one("#cursor-line", Static).render())


def view_of(app: App[None]) -> TokenView:
    screen = screen_of(app)
    return token_view(screen.step, screen.sample_index)


def panel(app: App[None], series: str) -> TokenSparkline:
    return app.screen.query_one(f"#series-{series}", TokenSparkline)


async def test_cursor_moves_and_the_line_shows_that_token() -> None:
    app = golden("tp_dup", 0, 0)
    async with app.run_test(size=(160, 48)) as pilot:
        view = view_of(app)
        await pilot.press("right", "right", "right")
        position = view.prompt_length + 3
        line = cursor_line(app)
        assert f"token {position} " in line
        assert f"response 4/{view.response_length}" in line
        assert f"id {view.token_ids[position]} " in line
        detokenizer = screen_of(app).detokenizer
        text = None if detokenizer is None else detokenizer.texts([view.token_ids[position]])
        assert text is not None and repr(text[0]) in line
        for name in SERIES:
            values = view.masked(name)
            assert values is not None
            assert number(float(values[3]), 4) in line
            assert panel(app, name).reading == pytest.approx(values[3])
            assert panel(app, name).cursor == position
        await pilot.press("shift+right")
        assert screen_of(app).cursor == 13
        await pilot.press("shift+left", "left")
        assert screen_of(app).cursor == 2
        await pilot.press("end")
        assert screen_of(app).cursor == view.response_length - 1
        await pilot.press("right")
        assert screen_of(app).cursor == view.response_length - 1
        await pilot.press("home", "left")
        assert screen_of(app).cursor == 0


async def test_masked_positions_say_masked() -> None:
    app = golden("tp_dup", 0, 1)
    async with app.run_test(size=(160, 48)) as pilot:
        view = view_of(app)
        assert view.loss_mask is not None
        masked = int(np.flatnonzero(view.loss_mask == 0)[0])
        await pilot.press(*(["right"] * masked))
        line = cursor_line(app)
        assert "mask 0 (loss-masked)" in line
        assert "lpΔ masked" in line and "rollout masked" in line
        lp_diff = view.masked("lp_diff")
        assert lp_diff is not None and np.isnan(lp_diff[masked])
        assert panel(app, "lp_diff").reading is None
        await pilot.press("home")
        assert "mask 1 (trained)" in cursor_line(app) and "masked" not in cursor_line(app)


async def test_n_walks_the_outliers_largest_lp_diff_first() -> None:
    app = golden("tp_dup", 0, 1)
    async with app.run_test(size=(160, 48)) as pilot:
        view = view_of(app)
        lp_diff = view.masked("lp_diff")
        assert lp_diff is not None
        outliers = view.outlier_positions()
        await pilot.press("n")
        assert screen_of(app).cursor == int(np.nanargmax(np.abs(lp_diff)))
        assert f"outlier #1/{len(outliers)}" in cursor_line(app)
        await pilot.press("n")
        assert screen_of(app).cursor == int(outliers[1])
        assert abs(lp_diff[outliers[1]]) <= abs(lp_diff[outliers[0]])
        await pilot.press("N")
        assert screen_of(app).cursor == int(outliers[0])


async def test_group_neighbours_replace_the_sample_in_place() -> None:
    app = golden("tp_dup", 0, 1)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = screen_of(app)
        members = [r.sample_index for r in screen.step.summary.rows if r.group_index == 0]
        assert members[:2] == [0, 1]
        panels_before = list(screen.query(TokenSparkline))
        await pilot.press("greater_than_sign")
        assert screen_of(app) is screen and screen.sample_index == members[2]
        assert list(screen.query(TokenSparkline)) == panels_before  # widgets kept, data swapped
        assert f"sample {members[2]}" in str(screen.query_one("#chips", Static).render())
        await pilot.press("less_than_sign", "less_than_sign", "less_than_sign")
        assert screen.sample_index == members[0]
        await pilot.pause()
        assert [m.sample_index for m in app.shown] == [members[2], members[1], members[0]]
        assert screen.cursor == 0


async def test_alignment_failed_sample_shows_unreadable_never_zero() -> None:
    app = golden("cp_legacy_ambiguous", 1, 8)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        screen = screen_of(app)
        assert screen.sample.row.alignment_failed
        chips = str(screen.query_one("#chips", Static).render())
        assert "per-token data UNREADABLE (slices could not be placed)" in chips
        view = view_of(app)
        unreadable = [n for n in SERIES if view.states[n] is FieldState.UNREADABLE]
        assert "train_log_probs" in unreadable
        for name in unreadable:
            sparkline = panel(app, name)
            assert sparkline.display and sparkline.state is FieldState.UNREADABLE
            assert sparkline.data is None
            rendered = "".join(sparkline.render_line(y).text for y in range(sparkline.size.height))
            assert "UNREADABLE" in rendered and "slices could not be placed" in rendered
        assert "UNREADABLE: train" in cursor_line(app)


async def test_not_dumped_series_are_listed_on_one_line() -> None:
    app = golden("tp_dup", 0, 10000001, evaluation=True)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        view = view_of(app)
        missing = [n for n in SERIES if view.states[n] is FieldState.NOT_DUMPED]
        assert missing and "rollout_log_probs" not in missing
        line = str(app.screen.query_one("#not-dumped", Static).render())
        assert line.startswith("not dumped: ") and "train logp" in line
        assert all(not panel(app, name).display for name in missing)
        assert panel(app, "rollout_log_probs").display


async def test_conversation_tab_shows_the_recorded_messages() -> None:
    app = golden("tp_dup", 0, 0)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("t")
        await pilot.pause()
        assert app.screen.query_one(TabbedContent).active == "conversation"
        messages = [str(w.render()) for w in app.screen.query("#messages .message").results(Static)]
        assert messages[0] == "You are a careful assistant."
        assert any("→ count(" in m for m in messages)
        titles = [Content.from_markup(str(w.border_title)).plain for w in app.screen.query("#messages .message")]
        assert titles == ["system #0", "user #1", "assistant #2", "tool · count #3", "assistant #4"]
        await pilot.press("right")  # cursor keys belong to the conversation now
        assert screen_of(app).cursor == 0
        await pilot.press("t")
        assert app.screen.query_one(TabbedContent).active == "tokens"


async def test_conversation_tab_says_when_none_was_recorded() -> None:
    app = golden("tp_dup", 0, 1)  # the sidecar has samples 0, 3, 6, 9 only
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("t")
        await pilot.pause()
        (note,) = app.screen.query("#messages .no-conversation").results(Static)
        assert str(note.render()) == "this run recorded no conversation for this sample"


async def test_chart_toggles_and_follows_the_selected_series() -> None:
    app = golden("tp_dup", 0, 1)
    async with app.run_test(size=(160, 48)) as pilot:
        chart = app.screen.query_one("#chart", SeriesChart)
        assert not chart.display
        await pilot.press("c")
        await pilot.pause()
        assert chart.display and chart.series is not None and chart.series.title == "lpΔ"
        assert "lpΔ" in str(chart.render())
        assert chart.cursor == view_of(app).prompt_length
        await pilot.press("s")
        assert chart.series.title == "ratio" and panel(app, "imp_ratio").selected
        assert not panel(app, "lp_diff").selected
        view = view_of(app)
        values = chart.series.values[view.prompt_length :]
        masked = view.masked("imp_ratio")
        assert masked is not None
        np.testing.assert_array_equal(np.isnan(values), np.isnan(masked))  # the same gaps
        await pilot.press("c")
        assert not chart.display


async def test_80x24_keeps_the_chips_and_the_cursor_line_on_screen() -> None:
    app = golden("cp_legacy_ambiguous", 1, 8)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("right")
        await pilot.pause()
        for selector in ("#chips", "#cursor-line", "#axis"):
            region = app.screen.query_one(selector).region
            assert region.height > 0 and region.bottom <= 23, selector  # above the footer
        assert "UNREADABLE" in str(app.screen.query_one("#chips", Static).render())
        assert "token 9 " in cursor_line(app)


async def test_the_latency_benchmark_drives_every_key_on_a_32k_token_response() -> None:
    # The 50 ms target is checked by bench/sample_cursor.py, not here: timings belong in benchmarks.
    step = synthetic_step()
    assert step.summary.rows[0].response_length == 32_768
    detokenizer = Run(GOLDEN / "tp_dup", use_cache=False).detokenizer
    timings = await measure(lambda: SampleScreen(step, 0, detokenizer, None), (160, 48), repeats=2)
    for label in ("right", "shift+right", "n", "right (chart)", "shift+left (chart)"):
        assert len(timings[label]) == 2 and all(t > 0 for t in timings[label]), label


async def test_the_window_follows_the_cursor_through_a_long_response() -> None:
    step = synthetic_step()
    app = SampleApp(lambda: SampleScreen(step, 0, None, None))
    async with app.run_test(size=(160, 48)) as pilot:
        screen = screen_of(app)
        view = screen.sample.view
        assert "v3–v5" in str(screen.query_one("#chips", Static).render())
        assert screen.window[1] - screen.window[0] == 256
        for key, size in (("w", 1024), ("w", 4096), ("w", view.total_length), ("w", 256)):
            await pilot.press(key)
            assert screen.window[1] - screen.window[0] == size
        for key in ("end", "home", *(["shift+right"] * 30), "n", "n"):
            await pilot.press(key)
            start, stop = screen.window
            assert start <= view.prompt_length + screen.cursor < stop
            assert panel(app, "entropy").window == screen.window
        assert "id " in cursor_line(app) and "text" not in cursor_line(app)  # no tokenizer: ids only


async def test_clicking_the_bars_moves_the_cursor_there() -> None:
    app = golden("tp_dup", 0, 0)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        entropy = panel(app, "entropy")
        frame = entropy.frame
        assert frame is not None and frame.columns_per_token > 1
        prompt_length = view_of(app).prompt_length
        target = prompt_length + 10
        columns = frame.columns_of(target)
        assert columns is not None
        await pilot.click("#series-entropy", offset=(GUTTER + columns[0], 1))
        assert screen_of(app).cursor == 10
        first = frame.columns_of(0)
        assert first is not None
        await pilot.click("#series-entropy", offset=(GUTTER + first[0], 1))  # a prompt token
        assert screen_of(app).cursor == 0


async def test_escape_and_backspace_go_back() -> None:
    for key in ("escape", "backspace"):
        app = golden("tp_dup", 0, 0)
        async with app.run_test(size=(80, 24)) as pilot:
            assert isinstance(app.screen, SampleScreen)
            await pilot.press(key)
            assert not isinstance(app.screen, SampleScreen)


async def test_every_binding_has_a_description() -> None:
    for binding in SampleScreen.BINDINGS:
        assert isinstance(binding, Binding) and binding.description, binding


def test_chart_draws_each_run_separately_and_reads_without_colour() -> None:
    values = np.array([0.0, 1.0, np.nan, np.nan, np.nan, 1.0, 0.0, np.nan, 2.0])
    assert finite_runs(values) == [(0, 2), (5, 7), (8, 9)]
    text = chart_text(ChartSeries("lp diff", 100, values), 60, 12, cursor=105, color=False)
    assert "lp diff" in text.plain and "│" in text.plain
    assert all(not span.style for span in text.spans)  # colourless theme: nothing relies on colour
    assert chart_text(ChartSeries("x", 0, np.full(5, np.nan)), 60, 12).plain == "x: no values in this window"


async def test_chart_with_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    app = golden("tp_dup", 0, 1)
    async with app.run_test(size=(120, 40)) as pilot:
        assert app.no_color
        await pilot.press("c")
        await pilot.pause()
        chart = app.screen.query_one("#chart", SeriesChart)
        assert "lpΔ" in str(chart.render())


async def test_conversation_shows_reasoning_and_never_reads_markup() -> None:
    run = Run(GOLDEN / "tp_dup", use_cache=False)
    step = run.open(0, False, time.time() + 3600)
    message = ChatMessage("assistant", "[bold]not markup[/bold]", "thinking [red]hard", (), None)
    conversation = Conversation(1, 0, "completed", 1.0, "p", (message,))
    sidecar = Sidecar(Path("trajectory/0.jsonl"), {1: conversation}, ())
    app = SampleApp(lambda: SampleScreen(step, 1, run.detokenizer, sidecar))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("t")
        await pilot.pause()
        (widget,) = app.screen.query("#messages .message").results(Static)
        assert str(widget.render()) == "reasoning: thinking [red]hard\n[bold]not markup[/bold]"
