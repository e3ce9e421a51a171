"""Pilot tests of the metrics view: grid, filter, log-y, smoothing, inspector, live redraws, dump-derived series."""

from __future__ import annotations

import json
import math
import shutil
import stat
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from textual.binding import Binding
from textual.pilot import Pilot
from textual.strip import Strip
from textual.widgets import Input, Label, Static

from miles_tui.core.analysis import chart_keys, chart_series, group_keys, plot_data
from miles_tui.core.analysis.metric_view import ema
from miles_tui.core.telemetry import MetricSeries, MetricStore
from miles_tui.tui.app import MilesApp
from miles_tui.tui.formatting import metric_value
from miles_tui.tui.model.messages import TelemetryAppended
from miles_tui.tui.renderers.plot import ansi_strips, step_tick, tick_labels, y_ticks
from miles_tui.tui.screens.metrics_screen import LOADING_NOTE, MetricsScreen
from miles_tui.tui.screens.overview_screen import OverviewScreen
from miles_tui.tui.views.metric_lines import NO_METRICS_NOTE, NOTHING_YET_NOTE
from miles_tui.tui.widgets.metric_chart import MetricChart, chart_body, chart_title
from miles_tui.tui.widgets.run_header import RunHeader
from tests.conftest import EPOCH, GOLDEN, stamp, write_demo_run
from tests.harness import frozen_app, settle


async def _open(app: MilesApp, pilot: Pilot[None]) -> MetricsScreen:
    await settle(pilot, linger=0.3)
    app.push_screen(MetricsScreen())
    await settle(pilot, linger=0.3)
    assert isinstance(app.screen, MetricsScreen)
    return app.screen


def _text(widget: Static | Label) -> str:
    return str(widget.render())


def _store(app: MilesApp) -> MetricStore:
    return app.watcher.follower.metrics


def _live_copy(tmp_path: Path) -> Path:
    """A writable, aged copy of the golden live_streams run."""
    target = tmp_path / "live_streams"
    shutil.copytree(GOLDEN / "live_streams", target)
    for path in [target, *target.rglob("*")]:
        path.chmod(path.stat().st_mode | stat.S_IWUSR)
    stamp(target, EPOCH - 3600)
    return target


def _append(run: Path, *records: dict[str, Any]) -> None:
    with (run / "dashboard" / "metrics.jsonl").open("a") as out:
        for record in records:
            out.write(json.dumps(record) + "\n")


def _expected(store: MetricStore, key: str, x_key: str, step: float) -> tuple[float, float]:
    """The store's (step, value) of ``key`` at or before ``step``: what the inspector must show."""
    steps, values, _ts = store.points(key, x_key)
    found = [(s, v) for s, v in zip(steps, values, strict=True) if s <= step]
    return found[-1]


async def test_charts_are_grouped_by_category_against_their_own_step_key(golden_copy: Any) -> None:
    app = frozen_app(golden_copy("live_streams"))
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await _open(app, pilot)
        store = _store(app)
        assert screen.source == "metrics"
        expected = [key for _name, keys in group_keys(chart_keys(store)) for key in keys]
        assert list(screen.charts) == expected
        assert "train/step" not in screen.charts and "rollout/step" not in screen.charts  # x axes, not charts
        titles = [_text(label) for label in screen.query(".category-title").results(Label)]
        assert titles == ["train · 4", "rollout · 3", "perf · 5", "eval · 1"]
        loss = screen.charts["train/loss"]
        assert "train/loss  x: train/step" in loss.drawn_text()
        assert "x: rollout/step" in screen.charts["rollout/raw_reward"].drawn_text()
        assert loss.series is not None and loss.series.series.x_key == store.default_x_key("train/loss")
        train = [screen.charts[k] for k in expected if k.startswith("train/")]
        assert len({chart.region.x for chart in train}) == 3, "three columns at 160 cells"
        assert 10 <= loss.region.height <= 12
        assert screen.query_one(RunHeader).context == "metrics"
        assert "13/13 series" in _text(screen.query_one("#metrics-status", Label))


async def test_filter_by_glob_or_substring(golden_copy: Any) -> None:
    app = frozen_app(golden_copy("live_streams"))
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await _open(app, pilot)
        await pilot.press("slash")
        box = screen.query_one("#filter", Input)
        assert box.display and box.has_focus
        await pilot.press("l", "o", "s", "s")  # typed into the box: 'l' does not toggle log-y here
        await pilot.pause()
        assert not screen.view.log_y
        assert screen.shown_keys() == ("train/loss", "train/pg_loss")
        assert [k for k, c in screen.charts.items() if c.display] == ["train/loss", "train/pg_loss"]
        assert [s.display for s in screen.query(".category")] == [True, False, False, False]
        await pilot.press("enter")
        assert not box.display and screen.pattern == "loss"
        assert "filter 'loss'" in _text(screen.query_one("#metrics-status", Label))

        screen.set_filter("perf/*")
        await pilot.pause()
        assert screen.shown_keys() == tuple(k for k in screen.charts if k.startswith("perf/"))
        assert len(screen.shown_keys()) == 5

        screen.set_filter("zzz")
        await pilot.pause()
        empty = screen.query_one("#metrics-empty", Static)
        assert empty.display and "no series match 'zzz'" in _text(empty)
        assert not any(c.display for c in screen.charts.values())

        await pilot.press("slash")
        assert box.display
        await pilot.press("escape")  # closes the box, keeps the screen
        assert not box.display and isinstance(app.screen, MetricsScreen)
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, OverviewScreen)


async def test_log_y_and_smoothing_toggles(golden_copy: Any) -> None:
    app = frozen_app(golden_copy("live_streams"))
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await _open(app, pilot)
        status = screen.query_one("#metrics-status", Label)
        pg_loss = screen.charts["train/pg_loss"]
        before = pg_loss.builds
        await pilot.press("l")
        await pilot.pause()
        assert all(chart.view.log_y for chart in screen.charts.values())
        assert "y: log" in _text(status)
        assert pg_loss.builds > before, "the visible charts redraw"
        data = pg_loss.plot_data(pg_loss.content_size.width)
        assert data is not None and data.log_y
        assert pg_loss.series is not None
        values = pg_loss.series.series.value
        assert data.hi == pytest.approx(math.log10(values.max()))
        assert data.lo == pytest.approx(math.log10(values[values > 0].min()))
        full = plot_data(pg_loss.series, len(values), log_y=True)  # no downsampling: every point
        assert np.isnan(full.raw).sum() == (values <= 0).sum(), "non-positive losses are gaps on a log axis"
        await pilot.press("l")
        assert not screen.view.log_y and "y: linear" in _text(status)

        reward = screen.charts["rollout/raw_reward"]
        assert reward.series is not None
        for weight in (0.6, 0.9):
            await pilot.press("e")
            await pilot.pause()
            assert screen.view.smoothing == weight and reward.view.smoothing == weight
            assert f"EMA {weight:g}" in _text(status)
            data = reward.plot_data(reward.content_size.width)
            assert data is not None and len(data.smooth) > 0
            smoothed = ema(reward.series.series.value, 1 - weight)  # steps 0..59 are the positions
            np.testing.assert_allclose(data.smooth, smoothed[data.smooth_x.astype(int)])
            assert data.smooth[-1] == pytest.approx(smoothed[-1])
        await pilot.press("e")
        await pilot.pause()
        assert screen.view.smoothing == 0 and "smoothing: off" in _text(status)
        data = reward.plot_data(reward.content_size.width)
        assert data is not None and len(data.smooth) == 0


async def test_inspector_shows_the_store_values_at_the_cursor(golden_copy: Any) -> None:
    app = frozen_app(golden_copy("live_streams"))
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await _open(app, pilot)
        store = _store(app)
        inspector = screen.query_one("#inspector", Static)
        assert "←/→" in _text(inspector)
        await pilot.press("right")  # first press: the newest step
        assert screen.cursor == 179
        await pilot.press("left", "left")
        await pilot.pause(0.3)
        assert screen.cursor == 177
        assert all(chart.cursor == 177 for chart in screen.charts.values())
        shown = screen.inspected()
        assert set(shown) >= {"train/grad_norm", "train/loss", "rollout/raw_reward"}
        assert set(shown) == set(screen.in_view_keys())
        text = _text(inspector)
        assert "step 177" in text
        for key, point in shown.items():
            series = screen.series[key]
            assert point is not None
            assert (point.step, point.value) == _expected(store, key, series.x_key, 177)
            assert f"{key} {metric_value(point.value)}" in text
        assert shown["train/loss"] is not None and shown["train/loss"].step == 177  # logged at that very step
        assert "@177" in screen.charts["train/loss"].drawn_text()
        await pilot.press("shift+left")
        assert screen.cursor == 167
        await pilot.press("c")
        assert screen.cursor is None and screen.inspected() == {}
        assert all(chart.cursor is None for chart in screen.charts.values())


async def test_zoom_narrows_every_chart_to_a_step_window_around_the_cursor(golden_copy: Any) -> None:
    """The web dashboard's drag-zoom, from the keyboard: + halves the steps shown (each step key on its own: a
    train step is not a rollout step) around the cursor where it falls among a key's steps, else keeping the
    newest; - doubles them, 0 shows every step; a cursor moved out of a window slides it."""
    app = frozen_app(golden_copy("live_streams"))
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await _open(app, pilot)
        status = screen.query_one("#metrics-status", Label)
        loss, reward = screen.charts["train/loss"], screen.charts["rollout/raw_reward"]
        assert loss.series is not None and reward.series is not None
        assert (loss.series.series.x_key, reward.series.series.x_key) == ("train/step", "rollout/step")
        train, rollout = loss.series.series.step, reward.series.series.step
        await pilot.press("plus")
        await pilot.pause()
        half = (float(train.min()) + float(train.max())) / 2
        rollout_half = (float(rollout.min()) + float(rollout.max())) / 2
        assert screen.view.window("train/step") == (half, float(train.max()))
        assert screen.view.window("rollout/step") == (rollout_half, float(rollout.max()))
        assert f"train/step {round(half)}–179" in _text(status) and "rollout/step 30–59" in _text(status)
        data = loss.plot_data(loss.content_size.width)
        assert data is not None and (data.x_lo, data.x_hi) == (half, float(train.max()))
        inside = (train >= half) & (train <= train.max())
        assert data.x.min() == train[inside].min() and data.x.max() == train[inside].max(), "the window's points"
        values = loss.series.series.value[inside]
        assert (data.lo, data.hi) == (values.min(), values.max()), "the y axis fits the window"
        shown = reward.plot_data(reward.content_size.width)
        assert shown is not None and shown.lo is not None and shown.x.min() >= rollout_half, "rollout keeps its own"
        await pilot.press("right", "left", "left")  # the cursor: the newest step, then two back
        await pilot.press("plus")
        await pilot.pause()
        lo, hi = screen.view.window("train/step") or (0, 0)
        assert lo <= 177 <= hi and hi - lo == pytest.approx((float(train.max()) - half) / 2), "around the cursor"
        for _ in range(int(hi - lo) + 5):
            await pilot.press("shift+left")
        await pilot.pause()
        window = screen.view.window("train/step")
        assert screen.cursor is not None and window is not None
        assert window[0] <= screen.cursor <= window[1], "the window follows the cursor"
        await pilot.press("minus")
        await pilot.press("0")
        await pilot.pause()
        assert screen.view.steps == () and "(0: all)" not in _text(status)
        await pilot.press("minus")
        await pilot.pause()
        assert screen.view.steps == ()


def test_a_log_axis_counts_the_points_it_cannot_draw() -> None:
    """Log-y used to leave out losses <= 0 without a word: the chart's title counts them."""
    values = np.array([0.5, -0.2, 0.0, 0.3, 0.1, np.nan])
    series = MetricSeries("train/loss", "rollout_id", np.arange(6), np.arange(6.0), values, np.zeros(6))
    data = plot_data(series, 100, log_y=True)
    assert data.hidden == 2, "NaN is a gap on any axis; only -0.2 and 0.0 have no place on a log one"
    assert "2 ≤0 not drawn" in chart_title("train/loss", "rollout_id", None, None, 80, data.hidden).plain
    assert "not drawn" not in chart_title("train/loss", "rollout_id", None, None, 80, 0).plain
    assert plot_data(series, 100, log_y=True, steps=(3.0, 5.0)).hidden == 0, "counted in the window only"


async def test_a_costly_read_spaces_out_the_next_live_update(tmp_path: Path) -> None:
    """A long run's series take seconds to read: new points are read again only after ten times that."""
    from miles_tui.tui.screens import metrics_screen

    run = _live_copy(tmp_path)
    app = frozen_app(run)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await _open(app, pilot)
        screen._read_cost = 0.3  # as if the last read had taken 0.3 s: the next waits 3 s after it
        screen._read_done = time.monotonic()
        _append(run, {"ts": EPOCH, "step_key": "train/step", "step": 180, "metrics": {"train/loss": 0.001}})
        app.poll_now()
        await settle(pilot)
        loss = screen.charts["train/loss"]
        assert loss.series is not None and loss.series.series.step[-1] != 180, "read again at once"
        assert screen._deferred is not None
        await pilot.pause(metrics_screen.READ_SPACING * 0.3 + 0.3)
        await settle(pilot)
        assert loss.series.series.step[-1] == 180, "the deferred read never came"


async def test_a_live_append_redraws_only_the_changed_chart(tmp_path: Path) -> None:
    run = _live_copy(tmp_path)
    app = frozen_app(run)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await _open(app, pilot)
        visible = screen.in_view_keys()
        assert "train/loss" in visible and "train/grad_norm" in visible
        builds = {key: chart.builds for key, chart in screen.charts.items()}
        charts = dict(screen.charts)
        _append(
            run,
            {"ts": EPOCH, "step_key": "train/step", "step": 180, "metrics": {"train/loss": 0.001, "train/step": 180}},
        )
        app.poll_now()
        await settle(pilot, linger=0.3)
        assert screen.charts == charts, "known keys: the grid is not rebuilt"
        loss = screen.charts["train/loss"]
        assert loss.series is not None and loss.series.series.step[-1] == 180 and loss.series.series.value[-1] == 0.001
        assert loss.builds == builds["train/loss"] + 1
        others = {key: chart.builds for key, chart in screen.charts.items() if key != "train/loss"}
        assert others == {key: n for key, n in builds.items() if key != "train/loss"}

        # The forwarded message alone (no status poll after it) redraws the same way.
        _append(run, {"ts": EPOCH, "step_key": "train/step", "step": 181, "metrics": {"train/loss": 0.002}})
        await app.watcher.poll_streams()
        screen.post_message(TelemetryAppended(("train/loss",), ()))
        await settle(pilot, linger=0.3)
        assert loss.series is not None and loss.series.series.step[-1] == 181
        assert loss.builds == builds["train/loss"] + 2
        assert {key: chart.builds for key, chart in screen.charts.items() if key != "train/loss"} == others

        _append(run, {"ts": EPOCH, "step_key": "rollout/step", "step": 60, "metrics": {"perf/new_metric": 2.0}})
        app.poll_now()
        await settle(pilot, linger=0.3)
        assert "perf/new_metric" in screen.charts, "a new key rebuilds the grid"
        assert list(screen.charts).index("perf/new_metric") > list(screen.charts).index("perf/mfu_peak_tflops")


async def test_a_run_without_metrics_shows_dump_derived_series(tmp_path: Path) -> None:
    run = write_demo_run(tmp_path / "demo", 4)
    (run / "dashboard" / "metrics.jsonl").unlink()
    stamp(run, EPOCH - 600)
    app = frozen_app(run)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await _open(app, pilot)
        assert screen.source == "dump"
        assert NO_METRICS_NOTE in _text(screen.query_one("#metrics-status", Label))
        assert screen.charts and all(key.startswith("dump/") for key in screen.charts)
        train = sorted((rid, s.aggregate) for (rid, ev), s in app.model.summaries.items() if not ev)
        reward = screen.series["dump/reward_mean"]
        assert reward.x_key == "rollout_id"
        assert reward.step.tolist() == [rid for rid, _a in train]
        assert reward.value.tolist() == pytest.approx([a.reward_mean for _rid, a in train])
        assert "x: rollout_id" in screen.charts["dump/reward_mean"].drawn_text()
        await pilot.press("right")
        shown = screen.inspected()
        assert shown["dump/reward_mean"] is not None
        assert shown["dump/reward_mean"].value == pytest.approx(train[-1][1].reward_mean)

        write_demo_run(run, 2, start=4)
        (run / "dashboard" / "metrics.jsonl").unlink()
        stamp(run, EPOCH - 600)
        app.poll_now()
        await settle(pilot, linger=0.3)
        assert screen.series["dump/reward_mean"].step.tolist() == [0, 1, 2, 3, 4, 5]
        assert screen.charts["dump/reward_mean"].series is screen.charted["dump/reward_mean"]


async def test_an_empty_run_says_what_is_missing(tmp_path: Path) -> None:
    app = frozen_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _open(app, pilot)
        assert screen.source == "none" and not screen.charts
        empty = screen.query_one("#metrics-empty", Static)
        assert empty.display and NOTHING_YET_NOTE in _text(empty)
        await pilot.press("right", "l", "e")  # nothing to move over or redraw: no error
        assert screen.cursor is None


async def test_series_are_read_off_the_ui_thread_and_the_screen_shows_before_them(
    golden_copy: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long run's series take a second to read: the screen appears at once, says so, and fills in."""
    release = threading.Event()
    readers: list[bool] = []
    series = MetricStore.series

    def slow_series(self: MetricStore, *args: Any, **kwargs: Any) -> Any:
        readers.append(threading.current_thread() is threading.main_thread())
        release.wait(5)  # on the UI thread (the old way) this would hold the screen back for 5 s per key
        return series(self, *args, **kwargs)

    app = frozen_app(golden_copy("live_streams"))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot, linger=0.3)
        monkeypatch.setattr(MetricStore, "series", slow_series)
        await pilot.press("m")
        for _ in range(100):
            if readers:
                break
            await pilot.pause(0.02)
        screen = app.screen
        assert isinstance(screen, MetricsScreen), "the screen is up while its series are read"
        assert screen.first_read and not screen.charts
        assert LOADING_NOTE in _text(screen.query_one("#metrics-empty", Static))
        assert LOADING_NOTE in _text(screen.query_one("#metrics-status", Label))
        await pilot.press("l")  # keys work meanwhile
        assert screen.view.log_y
        release.set()
        await settle(pilot, linger=0.3)
        assert readers and not any(readers), "no series is read on the UI thread"
        assert not screen.first_read and "train/loss" in screen.charts
        assert "13/13 series" in _text(screen.query_one("#metrics-status", Label))
        assert not screen.query_one("#metrics-empty", Static).display


async def test_a_demo_run_with_metrics_opened_before_the_first_poll(tmp_path: Path) -> None:
    run = write_demo_run(tmp_path / "demo", 6)
    stamp(run, EPOCH - 600)
    app = frozen_app(run)
    async with app.run_test(size=(160, 48)) as pilot:
        app.push_screen(MetricsScreen())  # before any poll finished: the grid fills in as data arrives
        await settle(pilot, linger=0.3)
        screen = app.screen
        assert isinstance(screen, MetricsScreen)
        store = _store(app)
        assert screen.source == "metrics"
        assert {"train/loss", "train/entropy", "rollout/raw_reward", "perf/actor_train_mfu"} <= set(screen.charts)
        await pilot.press("right", "left")
        assert screen.cursor == 4
        for key, point in screen.inspected().items():
            assert point is not None
            assert (point.step, point.value) == _expected(store, key, screen.series[key].x_key, 4)


async def test_80x24_is_one_column_and_still_works(golden_copy: Any) -> None:
    app = frozen_app(golden_copy("live_streams"))
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _open(app, pilot)
        visible = [screen.charts[key] for key in screen.in_view_keys()]
        assert visible, "at least one chart on screen"
        assert len({chart.region.x for chart in screen.charts.values()}) == 1, "one column"
        chart = visible[0]
        assert chart.region.width >= 70 and 8 <= chart.region.height <= 10
        rendered = chart.drawn_text()
        assert "┌" in rendered and "└" in rendered, "a framed figure, not a 'too small' note"
        await pilot.press("right")
        await pilot.pause(0.3)
        assert "step 179" in _text(screen.query_one("#inspector", Static))
        assert screen.query_one("#inspector", Static).region.height <= 3
        await pilot.press("pagedown")
        await pilot.pause()
        assert screen.in_view_keys() != tuple(c.key for c in visible), "the grid scrolls"


def test_every_binding_says_what_it_does() -> None:
    bindings = [b for b in MetricsScreen.BINDINGS if isinstance(b, Binding)]
    assert {b.action for b in bindings} >= {"back", "filter", "toggle_log", "cycle_smoothing", "cursor(-1)"}
    assert all(b.description for b in bindings)


def _plain(strips: list[Strip]) -> str:
    return "\n".join(strip.text for strip in strips)


def _colored(strips: list[Strip]) -> bool:
    return any(segment.style is not None and segment.style.color is not None for s in strips for segment in s)


def test_no_color_chart_has_no_escape_codes_and_only_the_smoothed_line() -> None:
    from miles_tui.core.telemetry import MetricSeries

    count = 200
    series = MetricSeries(
        key="train/loss",
        x_key="train/step",
        record=np.arange(count, dtype=np.int64),
        step=np.arange(count, dtype=np.float64),
        value=np.sin(np.arange(count) / 5.0) + 2.0,
        ts=np.zeros(count),
    )
    smoothed = plot_data(series, 80, smoothing=0.9)
    plain = chart_body(smoothed, 60, 10, cursor=100, color=False)
    assert len(plain) == 10 and all(strip.cell_length == 60 for strip in plain)
    assert "\x1b" not in _plain(plain) and not _colored(plain)
    assert "│" in plain[2].text[6:-1], "the cursor reads as a line without colour"
    assert _colored(chart_body(smoothed, 60, 10, cursor=100, color=True))
    raw_only = chart_body(plot_data(series, 80), 60, 10, cursor=100, color=False)
    assert _plain(plain) != _plain(raw_only), "NO_COLOR with smoothing: only the smoothed line"
    assert "too small" in _plain(chart_body(smoothed, 40, 3))


def test_a_chart_without_numbers_says_so() -> None:
    from miles_tui.core.telemetry import MetricSeries

    series = MetricSeries("eval/x", "eval/step", np.arange(2), np.arange(2.0), np.full(2, np.nan), np.zeros(2))
    assert "no numeric values" in _plain(chart_body(plot_data(series, 40), 50, 10))
    negative = MetricSeries("eval/x", "eval/step", np.arange(2), np.arange(2.0), np.array([-1.0, 0.0]), np.zeros(2))
    assert "no positive values" in _plain(chart_body(plot_data(negative, 40, log_y=True), 50, 10))
    chart = MetricChart(chart_series(series))
    assert chart.key == "eval/x"


def test_axis_ticks_are_round_and_far_enough_apart() -> None:
    assert y_ticks(0.0, 0.1, 8, False) == pytest.approx([0.0, 0.05, 0.1])
    assert tick_labels([0.0, 0.05, 0.1], False) == ["0.00", "0.05", "0.10"]
    assert y_ticks(880.0, 1750.0, 8, False) == [1000.0, 1500.0]
    assert y_ticks(0.300016, 0.398673, 8, False) == [0.300016, 0.398673]  # no two round values 2.5 rows apart
    assert tick_labels([0.300016, 0.398673], False) == ["0.300", "0.399"]
    assert tick_labels([0.0, 1e6, 2e6], False) == ["0", "1M", "2M"]
    decades = y_ticks(-3.0, 0.5, 8, True)
    assert decades == [-3.0, -1.0] and tick_labels(decades, True) == ["0.001", "0.1"]
    assert tick_labels(y_ticks(-0.4, -0.2, 8, True), True) == ["0.4", "0.5", "0.6"]
    assert [step_tick(t) for t in (0, 950, 2500, 12_500, 1_500_000)] == ["0", "950", "2.5k", "12.5k", "1.5M"]


def test_plotext_escape_codes_become_styled_segments() -> None:
    strips = ansi_strips("\x1b[0mab\x1b[38;5;12mcd\x1b[0m\x1b[38;5;12mef\x1b[0m \nxy\n")
    assert [strip.text for strip in strips] == ["abcdef ", "xy"]
    segments = list(strips[0])
    assert [seg.text for seg in segments] == ["ab", "cdef", " "], "equal styles merge"
    assert segments[1].style is not None and segments[1].style.color is not None
    assert segments[1].style.color.number == 12


def test_status_and_inspector_lines() -> None:
    from miles_tui.core.analysis import PointAt
    from miles_tui.tui.views.metric_lines import INSPECTOR_HINT, ChartView, inspector_line, status_line

    status = status_line("dump", 3, 7, "perf/*", ChartView(0.9, True)).plain
    assert status == f"{NO_METRICS_NOTE} · 3/7 series · filter 'perf/*' · y: log · smoothing: EMA 0.9"
    assert status_line("metrics", 7, 7, "", ChartView()).plain == "7/7 series · y: linear · smoothing: off"
    assert inspector_line(None, {}).plain == INSPECTOR_HINT
    line = inspector_line(42.0, {"train/loss": PointAt(42.0, 0.46125), "eval/aime": PointAt(40.0, 0.31), "x": None})
    assert line.plain == "step 42  train/loss 0.4612  eval/aime 0.31 @40  x –"
