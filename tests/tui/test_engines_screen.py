"""Pilot tests of the engines view: the key, the per-engine table, the charts per DP rank, restarts marked in
text, the GPUs view's windows, engine switching, live redraw; and what makes each screenshot scene that scene."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import Label, Static

from miles_tui.core.analysis import PANELS
from miles_tui.core.synth.dump_files import append_jsonl
from miles_tui.tui.app import MilesApp, make_app
from miles_tui.tui.cli import _monitor_parser
from miles_tui.tui.screens.engines_screen import EnginesScreen
from miles_tui.tui.screens.overview_screen import OverviewScreen
from screenshots.scenes import EPOCH, SCENES, SIZES, Scene, build_engines
from tests.conftest import stamp, write_demo_run


def _app(root: Path, now: float = EPOCH) -> MilesApp:
    return make_app(root, poll_seconds=3600, clock=lambda: now)


async def _settle(app: MilesApp, pilot: Pilot[None]) -> None:
    for _ in range(4):
        await pilot.pause()
        await app.workers.wait_for_complete()
    await pilot.pause()


async def _open(app: MilesApp, pilot: Pilot[None]) -> EnginesScreen:
    await _settle(app, pilot)
    await pilot.press("E")
    await _settle(app, pilot)
    assert isinstance(app.screen, EnginesScreen) and app.screen.view is not None
    return app.screen


def _title(screen: EnginesScreen) -> str:
    return str(screen.query_one("#engines-title", Label).render())


def _table(screen: EnginesScreen) -> list[str]:
    return str(screen.query_one("#engines-table", Static).render()).splitlines()


def _scene(name: str) -> Scene:
    return next(scene for scene in SCENES if scene.name == name)


@pytest.fixture
def live_engines(tmp_path: Path) -> Path:
    return _scene("engines").build(tmp_path)


async def test_the_key_opens_the_engines_of_live_engines(live_engines: Path) -> None:
    app = _app(live_engines)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await _open(app, pilot)
        title = _title(screen)
        assert "Engines" in title and "last 15m" in title and "2 engines" in title and "every 15s" in title
        heading, alpha, bravo = _table(screen)
        assert heading.split()[:3] == ["engine", "dp", "run"]
        # the newest scrape (ts 1787243020): alpha runs 47, queues 32, KV 93.4 %, hit 45.41 %, 1578.4 tok/s
        assert alpha.startswith("▶ rollout-alpha") and alpha.split()[3:8] == ["47", "32", "93.4%", "45.4%", "1578.4"]
        assert bravo.startswith("  rollout-bravo") and "none" in bravo
        charts = screen.chart_texts()
        assert charts["sglang_num_running_reqs"].startswith("running reqs  47")
        assert "100%" in charts["sglang_token_usage"] and "now" in charts["sglang_token_usage"]
        assert "restart" not in "".join(charts.values())  # no counter fell in this run
        await pilot.press("n")
        assert "charts: rollout-bravo" in _title(screen) and _table(screen)[2].startswith("▶ rollout-bravo")
        assert screen.chart_texts()["sglang_num_running_reqs"].startswith("running reqs  52")
        await pilot.press("N")
        assert "charts: rollout-alpha" in _title(screen)
        for key, name in (("right", "last 1h"), ("plus", "last 6h"), ("right", "whole run"), ("right", "whole run")):
            await pilot.press(key)
            await _settle(app, pilot)
            assert name in _title(screen)
        await pilot.press("left")
        await _settle(app, pilot)
        assert "last 6h" in _title(screen)
        await pilot.press("escape")
        assert isinstance(app.screen, OverviewScreen)


async def test_dp_ranks_split_the_charts_and_a_restart_is_marked_in_text(tmp_path: Path) -> None:
    root = build_engines(tmp_path / "engines")
    app = _app(root)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await _open(app, pilot)
        assert screen.view is not None
        block = screen.view.engines[0]
        assert block.dp_ranks == ("0", "1", "2", "3") and len(block.restarts) == 1
        assert [line.dp_rank for line in block.panels["sglang_num_running_reqs"].lines] == ["0", "1", "2", "3"]
        assert "4 DP ranks" in _title(screen)
        _, first, second = _table(screen)
        assert first.startswith("▶ 10.0.0.1:30000") and first.split()[2] == "4" and first.endswith("↺1 -8m")
        assert second.split()[1] == "–" and second.endswith("none")  # no DP labels, no restart
        charts = screen.chart_texts()
        for metric in PANELS:
            assert "↺1 restart" in charts[metric].splitlines()[0]
        assert "dp0" in charts["sglang_num_running_reqs"].splitlines()[0]
        await pilot.press("n")
        charts = screen.chart_texts()
        assert "restart" not in "".join(charts.values()) and "dp0" not in "".join(charts.values())


async def test_a_run_without_engine_telemetry_says_so(tmp_path: Path) -> None:
    root = write_demo_run(tmp_path / "demo", 2)
    shutil.rmtree(root / "dashboard" / "engine_series")  # the demo scrapes engines: a run without them
    stamp(root, EPOCH - 600)
    app = _app(root)
    async with app.run_test(size=(100, 30)) as pilot:
        await _settle(app, pilot)
        await pilot.press("E")
        await _settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, EnginesScreen)
        empty = screen.query_one("#engines-empty", Label)
        assert empty.display and "no inference-engine telemetry" in str(empty.render())
        await pilot.press("E")  # already there: nothing stacks
        assert len(app.screen_stack) == 3


async def test_new_scrapes_redraw_the_view(tmp_path: Path) -> None:
    root = build_engines(tmp_path / "engines")
    app = _app(root)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await _open(app, pilot)
        assert _table(screen)[2].split()[1:3] == ["–", "25"]
        newest = EPOCH - 30
        addr = "http://10.0.0.2:30000"
        record = {"ts": newest + 15, "addr": addr, "metric": "sglang_num_running_reqs", "labels": {}, "value": 99}
        files = sorted((root / "dashboard" / "engine_series").iterdir())
        append_jsonl(files[-1], [record])
        app.poll_now()
        await _settle(app, pilot)
        assert _table(screen)[2].split()[1:3] == ["–", "99"]


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
@pytest.mark.parametrize("name", ["engines", "engines_dp"])
async def test_scene_shows_what_makes_it(name: str, size: tuple[int, int], tmp_path: Path) -> None:
    """The screenshot scenes' content in text: a baseline cannot approve a broken engines screen."""
    scene = _scene(name)
    app = scene.app(tmp_path)
    async with app.run_test(size=size) as pilot:
        await scene.driver()(pilot)
        screen = app.screen
        assert isinstance(screen, EnginesScreen)
        assert "Engines · last 15m · 2 engines" in _title(screen)
        table = _table(screen)
        assert len(table) == 3 and "aborted" in table[0] and "restarts" in table[0]
        running = screen.query_one("#chart-sglang_num_running_reqs")
        assert running.region.height >= 8 and running.region.y < size[1]  # on screen, tall enough to read
        text = screen.chart_texts()["sglang_num_running_reqs"]
        assert any("\u2800" < ch <= "\u28ff" for ch in text)  # a braille line is drawn
        if name == "engines":
            assert table[1].startswith("▶ rollout-alpha") and "93.4%" in table[1]
        else:
            assert table[1].endswith("↺1 -8m") and "↺1 restart" in text


def test_low_mfu_threshold_reaches_the_monitor(tmp_path: Path) -> None:
    args = _monitor_parser().parse_args([str(tmp_path), "--low-mfu-threshold", "0"])
    assert args.low_mfu_threshold == 0.0
    assert _monitor_parser().parse_args([str(tmp_path)]).low_mfu_threshold is None
    assert make_app(tmp_path, low_mfu_threshold=0.0).watcher.streams.low_mfu_threshold == 0.0
    assert make_app(tmp_path).watcher.streams.low_mfu_threshold == 0.15
