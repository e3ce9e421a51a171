"""Pilot tests of baseline runs in the monitor: the metrics legend and overlay, Δ on the overview and the step
header, compare's B side from a baseline, the palette's "Add baseline run", a bad path, and a live baseline."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from textual.pilot import Pilot

from miles_tui.core.analysis import plot_data
from miles_tui.core.analysis.baseline import value_exactly_at
from miles_tui.tui.app import MilesApp
from miles_tui.tui.formatting import metric_value
from miles_tui.tui.screens.baseline_path_screen import BaselinePathScreen
from miles_tui.tui.screens.compare_screen import CompareScreen
from miles_tui.tui.screens.metrics_screen import MetricsScreen
from miles_tui.tui.screens.outlier_screen import OutlierScreen
from miles_tui.tui.screens.step_screen import StepScreen
from miles_tui.tui.views.overlay import Overlay
from miles_tui.tui.widgets.metric_chart import chart_body
from tests.conftest import EPOCH, stamp, write_demo_run
from tests.harness import frozen_app, screen_text, settle


@pytest.fixture
def runs(tmp_path: Path) -> tuple[Path, Path]:
    """A 5-step demo run and a 3-step baseline written with another seed (steps 3 and 4 it lacks)."""
    run = write_demo_run(tmp_path / "run", 5)
    stamp(run, EPOCH - 600)
    base = write_demo_run(tmp_path / "base", 3, seed=11)
    stamp(base, EPOCH - 600)
    return run, base


async def _ready(pilot: Pilot[None]) -> None:
    for _ in range(3):  # the first poll, then the baseline's own poll and what it posts
        await settle(pilot, linger=0.2)


def _said(app: MilesApp) -> list[str]:
    return [str(n.message) for n in app._notifications]


async def test_metrics_legend_names_the_baseline_with_its_delta_at_the_cursor(runs: tuple[Path, Path]) -> None:
    run, base = runs
    app = frozen_app(run, baselines=[str(base)])
    async with app.run_test(size=(160, 48)) as pilot:
        await _ready(pilot)
        await pilot.press("m")
        await _ready(pilot)
        screen = app.screen
        assert isinstance(screen, MetricsScreen)
        assert "baselines: a ┈ demo" in screen_text(app)
        loss = screen.charts["train/loss"]
        assert [o.mark for o in loss.overlays] == ["a"] and loss.overlays[0].series is not None
        assert "a ┈ demo: no step 4" in loss.drawn_text()  # the newest step: the baseline has none, said
        await pilot.press("right", "left", "left")  # the cursor: newest step, then back to step 2
        await settle(pilot, linger=0.3)
        assert screen.cursor == 2
        mine = value_exactly_at(app.watcher.follower.metrics.series("train/loss"), 2)
        theirs = value_exactly_at(app.baselines.baselines[0].run.metrics.series("train/loss"), 2)
        assert mine is not None and theirs is not None and mine != theirs
        sign = "+" if mine >= theirs else "-"
        legend = loss.drawn_text().splitlines()[1]
        assert legend.startswith("━ run @2 " + metric_value(mine))
        assert f"a ┈ demo {metric_value(theirs)} Δ{sign}{metric_value(abs(mine - theirs))}" in legend


async def test_overview_and_step_header_show_delta_at_the_same_step(runs: tuple[Path, Path]) -> None:
    run, base = runs
    app = frozen_app(run, baselines=[str(base)])
    async with app.run_test(size=(160, 48)) as pilot:
        await _ready(pilot)
        text = screen_text(app)
        assert "Δ vs a ┈ demo @ step 4: it has no step 4 (its last is 2)" in text
        await pilot.press("down", "down")  # step 2: both runs have it
        await settle(pilot)
        line = next(line for line in screen_text(app).splitlines() if "Δ vs a" in line)
        assert "@ step 2: reward " in line and "|lpΔ| " in line and "entropy " in line
        mine = app.model.summaries[(2, False)].aggregate.reward_mean
        theirs = app.baselines.baselines[0].run.aggregates[2].reward_mean
        assert mine is not None and theirs is not None
        arrow = "=" if mine == theirs else ("↑" if mine > theirs else "↓")
        assert f"reward {arrow}" in line
        await pilot.press("enter")
        await settle(pilot, linger=0.2)
        assert isinstance(app.screen, StepScreen)
        header = screen_text(app)
        assert "step 2 train" in header and f"Δ vs a ┈ demo @ step 2: reward {arrow}" in header


async def test_compare_takes_side_b_from_the_baseline_at_the_same_step(runs: tuple[Path, Path]) -> None:
    run, base = runs
    app = frozen_app(run, baselines=[str(base)])
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        await _ready(pilot)
        await pilot.press("down", "down", "c")
        await settle(pilot, linger=0.2)
        assert "A = step 1  B = step 2" in screen_text(app)
        await pilot.press("b")
        await settle(pilot, linger=0.2)
        screen = app.screen
        assert isinstance(screen, CompareScreen) and screen.comparison is not None
        assert "A = step 2  B = baseline a ┈ demo step 2" in screen_text(app)
        theirs = app.baselines.baselines[0].run.aggregates[2]
        assert screen.comparison.b == theirs and screen.comparison.a == app.model.summaries[(2, False)].aggregate
        await pilot.press("O")  # a step's views open the run's own step: side B is the baseline's
        await settle(pilot, linger=0.2)
        assert isinstance(app.screen, OutlierScreen) and app.screen.rollout_id == 2
        assert "outliers of the run's step 2 (side B is baseline a's" in screen_text(app)
        await pilot.press("escape")
        await settle(pilot)
        await pilot.press("right_square_bracket")  # B follows A: the baseline has no step 3, and says so
        await settle(pilot, linger=0.2)
        assert "baseline a (demo): the run has no step 3" in screen_text(app)
        await pilot.press("b")  # the last baseline: back to the run's own steps
        await settle(pilot, linger=0.2)
        assert "A = step 2  B = step 3" in screen_text(app)


async def test_a_bad_baseline_is_said_naming_it_and_the_run_is_monitored(
    runs: tuple[Path, Path], tmp_path: Path
) -> None:
    run, _base = runs
    (tmp_path / "notes").mkdir()
    app = frozen_app(run, baselines=[str(tmp_path / "nope"), str(tmp_path / "notes")])
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        await _ready(pilot)
        said = _said(app)
        assert f"baseline not added: {tmp_path / 'nope'}: not usable as a baseline: no such run directory" in said[0]
        assert f"{tmp_path / 'notes'}: not usable as a baseline: not a --dump-details folder" in said[1]
        assert len(app.baselines) == 0 and app.model.train == (0, 1, 2, 3, 4)
        text = screen_text(app)
        assert "Δ vs" not in text and "step kind" in text
        await pilot.press("c", "b")
        await settle(pilot)
        assert "no baseline run: start with --baseline OTHER" in _said(app)[-1]


async def test_the_palette_adds_a_baseline_by_path(runs: tuple[Path, Path]) -> None:
    run, base = runs
    app = frozen_app(run)
    async with app.run_test(size=(160, 48)) as pilot:
        await _ready(pilot)
        await pilot.press("ctrl+p")
        await settle(pilot)
        await pilot.press(*"add baseline")
        await pilot.pause(0.4)
        await settle(pilot)
        assert "Add baseline run…" in screen_text(app)
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, BaselinePathScreen)
        await pilot.press(*"/no/such/run", "enter")
        await settle(pilot)
        assert "✗ /no/such/run: not usable as a baseline: no such run directory" in screen_text(app)
        app.screen.query_one("#path").value = str(base)  # type: ignore[attr-defined]
        await pilot.press("enter")
        await _ready(pilot)
        assert not isinstance(app.screen, BaselinePathScreen) and [b.mark for b in app.baselines] == ["a"]
        assert "Δ vs a ┈ demo @ step 4" in screen_text(app)
        await pilot.press("ctrl+p")
        await settle(pilot)
        await pilot.press(*f"baseline {run}")  # a path typed after "baseline": offered at once
        await pilot.pause(0.4)
        await settle(pilot)
        assert f"Add baseline run {run}" in screen_text(app)
        await pilot.press("enter")
        await _ready(pilot)
        assert [b.mark for b in app.baselines] == ["a", "b"]
        assert "Δ vs b ┈ demo @ step 4: reward =" in screen_text(app)  # the run against itself


async def test_the_baseline_follows_live(runs: tuple[Path, Path]) -> None:
    run, base = runs
    app = frozen_app(run, baselines=[str(base)])
    async with app.run_test(size=(160, 48)) as pilot:
        await _ready(pilot)
        assert "it has no step 4 (its last is 2)" in screen_text(app)
        write_demo_run(base, 2, start=3, seed=11, end=EPOCH - 300)
        for path in [*base.glob("rollout_data/[34].pt"), *base.glob("train_data/[34]_*.pt")]:
            os.utime(path, (EPOCH - 300, EPOCH - 300))
        app.poll_baselines()
        await _ready(pilot)
        line = next(line for line in screen_text(app).splitlines() if "Δ vs a" in line)
        assert "@ step 4: reward " in line and "no step" not in line


async def test_a_demo_run_against_a_copy_of_itself_has_no_delta(runs: tuple[Path, Path], tmp_path: Path) -> None:
    run, _base = runs
    copy = tmp_path / "copy"
    shutil.copytree(run, copy)
    stamp(copy, EPOCH - 600)
    app = frozen_app(run, baselines=[str(copy)])
    async with app.run_test(size=(80, 24)) as pilot:
        await _ready(pilot)
        delta = app.baselines.baselines[0].delta_at(4, app.model.summaries[(4, False)].aggregate)
        assert delta.present and all(d.delta == 0 for d in delta.figures)
        await pilot.press("m")
        await _ready(pilot)
        screen = app.screen
        assert isinstance(screen, MetricsScreen)
        assert "Δ+0" in screen.charts["train/loss"].drawn_text()


def test_without_colour_a_baseline_is_drawn_as_its_letter() -> None:
    from miles_tui.core.analysis import chart_series
    from miles_tui.core.telemetry import MetricSeries

    def series(values: list[float]) -> MetricSeries:
        n = len(values)
        return MetricSeries("k", "s", np.arange(n), np.arange(n, dtype=float), np.array(values), np.zeros(n))

    run = plot_data(series([0.0, 1.0, 2.0, 3.0]), 60)
    theirs = chart_series(series([5.0, 5.0, 5.0]))
    overlay = Overlay(0, "a", "base", theirs)
    drawn = "\n".join(s.text for s in chart_body(run, 60, 12, color=False, overlays=[(plot_data(theirs, 60), overlay)]))
    alone = "\n".join(s.text for s in chart_body(run, 60, 12, color=False))
    assert drawn.count("a") == 3 and "a" not in alone  # one letter per point of a short series
    assert "4┤" in drawn and "4┤" not in alone  # the axis spans the baseline's values too


async def test_a_read_asked_meanwhile_waits_for_the_running_one(
    runs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A live baseline asks for its series on every poll: a long read must end, not restart each time."""
    import threading

    from miles_tui.tui.views import baseline_series

    run, base = runs
    release, calls, real = threading.Event(), [], baseline_series.overlay_series

    def slow(*args: object, **kwargs: object) -> object:
        calls.append(args[2])
        release.wait(10)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(baseline_series, "overlay_series", slow)
    app = frozen_app(run, baselines=[str(base)])
    async with app.run_test(size=(160, 48)) as pilot:
        await _ready(pilot)
        await pilot.press("m")
        for _ in range(20):
            await pilot.pause(0.05)
            if calls:
                break
        screen = app.screen
        assert isinstance(screen, MetricsScreen) and screen._overlay_reads.reading and len(calls) == 1
        screen._read_overlays()
        screen._read_overlays()  # two asks while it runs: one read after it, none cancelled
        assert len(calls) == 1
        release.set()
        await _ready(pilot)
        assert len(calls) == 2 and not screen._overlay_reads.reading
        assert screen.charts["train/loss"].overlays[0].series is not None


def _metrics_run(root: Path, seed: int, count: int) -> Path:
    import json

    rng = np.random.default_rng(seed)
    (root / "dashboard").mkdir(parents=True)
    with (root / "dashboard" / "metrics.jsonl").open("w") as out:
        for step in range(count):
            metrics = {"train/loss": float(rng.normal()), "train/step": step}
            out.write(
                json.dumps({"ts": EPOCH - count + step, "step_key": "train/step", "step": step, "metrics": metrics})
            )
            out.write("\n")
    stamp(root, EPOCH - 60)
    return root


def test_a_long_baseline_is_exact_at_every_cursor_stop_however_few_points_a_chart_keeps(tmp_path: Path) -> None:
    """Charts keep at most CHART_POINTS points of a series (each bucket's min and max): the run's and the
    baseline's kept steps differ, yet the legend reads the baseline's own value at each of the run's stops."""
    from miles_tui.core.analysis import chart_series
    from miles_tui.core.analysis.baseline_run import open_baseline
    from miles_tui.core.analysis.metric_view import CHART_POINTS
    from miles_tui.tui.runtime.baseline_watch import Baseline
    from miles_tui.tui.views.baseline_series import overlay_series
    from miles_tui.tui.widgets.baseline_overlay import legend_line

    count = 3 * CHART_POINTS
    run_store = open_baseline(_metrics_run(tmp_path / "run", 1, count))
    run_store.poll(EPOCH)
    base = open_baseline(_metrics_run(tmp_path / "base", 2, count - 100))  # its last 100 steps missing
    base.poll(EPOCH)
    whole = run_store.metrics.series("train/loss")
    theirs = base.metrics.series("train/loss")
    assert whole is not None and theirs is not None
    kept = chart_series(whole).series
    assert len(kept.step) <= CHART_POINTS < count
    overlays = overlay_series([Baseline("a", base)], {"train/loss": kept}, "metrics")
    assert overlays is not None
    (overlay,) = overlays["train/loss"]
    assert overlay.series is not None and overlay.series.total == count - 100
    dropped = set(kept.step.tolist()) - set(overlay.series.series.step.tolist())
    assert dropped, "the two charts keep different steps"
    for step in sorted(dropped)[:50]:
        expected = value_exactly_at(theirs, step) if step < count - 100 else None
        assert overlay.value_at(step) == expected
    step = next(s for s in sorted(dropped) if s < count - 100)
    legend = legend_line(kept, overlays["train/loss"], step, 200, metric_value, lambda s: str(int(s))).plain
    assert f"a ┈ base {metric_value(value_exactly_at(theirs, step) or 0.0)} Δ" in legend
    newest = legend_line(kept, overlays["train/loss"], None, 200, metric_value, lambda s: str(int(s))).plain
    assert f"a ┈ base: no step {int(kept.step[-1])}" in newest  # the run's last step: the baseline stopped before


async def test_a_hostile_baseline_name_reaches_no_screen_as_control_characters(runs: tuple[Path, Path]) -> None:
    import json

    run, base = runs
    meta = base / "dashboard" / "meta.json"
    meta.write_text(json.dumps({**json.loads(meta.read_text()), "run_name": "evil\x1b]52;c;aGk=\x07\x1b[2J[b]x[/b]"}))
    stamp(base, EPOCH - 600)
    app = frozen_app(run, baselines=[str(base)])
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        await _ready(pilot)
        await pilot.press("m")
        await _ready(pilot)
        screen = app.screen
        assert isinstance(screen, MetricsScreen)
        legend = screen.charts["train/loss"].drawn_text()
        assert "a ┈ evil" in legend and "\x1b" not in legend and "\x07" not in legend
        assert "[b]x[/b]" in screen_text(app)  # shown as typed: never markup
        await pilot.press("escape")
        await settle(pilot)
        line = next(line for line in screen_text(app).splitlines() if "Δ vs a" in line)
        assert "\x1b" not in line and "evil" in line
