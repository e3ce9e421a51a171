"""Pilot tests of the compute view: lanes, phases, fleet summary, dead nodes, lane picker, windows, live redraw."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import Label

from miles_tui.tui.app import MilesApp
from miles_tui.tui.messages import TelemetryAppended
from miles_tui.tui.screens.compute_screen import WORST_COUNT, ComputeScreen
from miles_tui.tui.screens.overview_screen import OverviewScreen
from miles_tui.tui.widgets.heat_rows import HeatRows
from tests.conftest import GOLDEN
from tests.core.fleet_writer import Fleet, write_fleet
from tests.harness import frozen_app, settle


async def _open(app: MilesApp, pilot: Pilot[None]) -> ComputeScreen:
    await settle(pilot)
    app.push_screen(ComputeScreen())
    await settle(pilot)
    assert isinstance(app.screen, ComputeScreen)
    assert app.screen.view is not None
    return app.screen


def _rows(screen: ComputeScreen, selector: str) -> list[object]:
    return [row.key for row in screen.query_one(selector, HeatRows).rows]


def _title(screen: ComputeScreen) -> str:
    return str(screen.query_one("#compute-title", Label).render())


def _lines(screen: ComputeScreen, selector: str) -> list[str]:
    """What the widget shows, line by line."""
    widget = screen.query_one(selector, HeatRows)
    return [widget.render_line(y).text for y in range(widget.size.height)]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Fleet:
    """512 GPUs (64 nodes × 8) over 15 minutes; node 10.1.0.4 died 5 minutes before the end."""
    return write_fleet(tmp_path_factory.mktemp("fleet") / "run")


# -- golden ------------------------------------------------------------------------------------------------------


async def test_golden_lanes_and_phases(golden_copy: Callable[[str], Path]) -> None:
    root = golden_copy("live_streams")
    truth = json.loads((GOLDEN / "live_streams.truth.json").read_text())["dashboard"]
    now = truth["time_range"][1] + 10
    app = frozen_app(root, now)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await _open(app, pilot)
        expected = [(lane["node"], lane["gpu"]) for lane in sorted(truth["lanes"], key=lambda lane: lane["index"])]
        assert _rows(screen, "#lanes") == expected
        lanes = _lines(screen, "#lanes")
        assert lanes[0].lstrip().startswith("10.0.0.7:0") and lanes[1].lstrip().startswith("10.0.0.7:1")
        assert not any("DEAD" in line or "stale" in line for line in lanes)
        assert "58.6G" in lanes[0], "memory of the latest bin (60000 MB)"
        phases = [key[2] for key in _rows(screen, "#phases")]  # type: ignore[index]
        assert phases == ["rollout", "train_wait", "actor_train", "update_weights"]
        assert not screen.query_one("#fleet", HeatRows).display, "two GPUs need no fleet summary"
        axis = _lines(screen, "#axis")[0]
        assert "now╵" in axis and "-10m" in axis and "util" in axis
        title = _title(screen)
        assert "last 15m" in title and "2 GPUs on 1 node" in title and "every 10s" in title


# -- a 512-GPU fleet with a dead node ---------------------------------------------------------------------------


async def test_fleet_summary_worst_lanes_and_the_dead_node(fleet: Fleet) -> None:
    app = frozen_app(fleet.root, fleet.end + 10)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await _open(app, pilot)
        assert screen.query_one("#fleet", HeatRows).display
        assert _rows(screen, "#fleet") == [("fleet", "p90"), ("fleet", "median"), ("fleet", "p10"), ("fleet", "silent")]
        assert "8 of 512 now" in _lines(screen, "#fleet")[3]
        title = _title(screen)
        assert f"DEAD: {fleet.dead_node} (8 GPUs)" in title and "512 GPUs on 64 nodes" in title
        lanes = _rows(screen, "#lanes")
        assert len(lanes) == WORST_COUNT
        assert lanes[:8] == [(fleet.dead_node, gpu) for gpu in range(8)], "dead lanes first"
        assert lanes[8:] == [(fleet.slow_node, gpu) for gpu in range(8)], "then the least busy"
        texts = screen.lane_texts()
        assert all(text.rstrip().endswith("DEAD") and "5m10s" in text for text in texts[:8])
        assert not any("DEAD" in text for text in texts[8:])
        open_phases = _lines(screen, "#phases")
        assert any("actor_train" in line and "504 open" in line for line in open_phases)


async def test_node_picker_cycles_and_all_scrolls(fleet: Fleet) -> None:
    app = frozen_app(fleet.root, fleet.end + 10)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await _open(app, pilot)
        nodes = fleet.nodes

        async def press(key: str) -> list[object]:
            await pilot.press(key)
            await pilot.pause()
            return _rows(screen, "#lanes")

        assert await press("n") == [(nodes[0], gpu) for gpu in range(8)]
        assert await press("n") == [(nodes[1], gpu) for gpu in range(8)]
        assert "lanes of 10.1.0.2" in _title(screen)
        assert await press("N") == [(nodes[0], gpu) for gpu in range(8)]
        assert await press("N") == [(nodes[-1], gpu) for gpu in range(8)], "wraps around"
        every = await press("a")
        assert len(every) == fleet.lanes and every[0] == (nodes[0], 0) and every[-1] == (nodes[-1], 7)
        lanes = screen.query_one("#lanes", HeatRows)
        assert lanes.max_scroll_y > 0
        lanes.scroll_end(animate=False)
        await pilot.pause()
        assert _lines(screen, "#lanes")[-1].lstrip().startswith(f"{nodes[-1]}:7")
        assert len(await press("w")) == WORST_COUNT


async def test_window_keys_change_the_window(fleet: Fleet) -> None:
    app = frozen_app(fleet.root, fleet.end + 10)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await _open(app, pilot)
        seen = []
        for key in ("right", "plus", "plus", "plus", "left", "minus", "minus"):
            await pilot.press(key)
            await settle(pilot)
            assert screen.view is not None
            seen.append((screen.window, screen.view.span))
        assert seen == [(1, 3600.0), (2, 21600.0), (3, None), (3, None), (2, 21600.0), (1, 3600.0), (0, 900.0)]
        assert "last 15m" in _title(screen)
        await pilot.press("right", "right", "right")
        await settle(pilot)
        assert "whole run" in _title(screen)
        view = screen.view
        assert view is not None and view.grid.bins.since == fleet.start
        assert view.grid.lanes and len(_rows(screen, "#lanes")) == WORST_COUNT


async def test_small_terminal(fleet: Fleet) -> None:
    app = frozen_app(fleet.root, fleet.end + 10)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _open(app, pilot)
        lanes = screen.query_one("#lanes", HeatRows)
        assert lanes.size.height >= 4 and lanes.strip_width >= 30
        view = screen.view
        assert view is not None and view.grid.bins.count <= lanes.strip_width
        for selector in ("#axis", "#fleet", "#phases", "#lanes"):
            for line in _lines(screen, selector):
                assert len(line) == screen.query_one(selector, HeatRows).scrollable_content_region.width
        assert "DEAD" in _title(screen) and "DEAD" in _lines(screen, "#lanes")[0]
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, OverviewScreen)


# -- empty and live --------------------------------------------------------------------------------------------


async def test_a_run_without_gpu_telemetry_says_so(tmp_path: Path) -> None:
    dash = tmp_path / "run" / "dashboard"
    dash.mkdir(parents=True)
    (dash / "meta.json").write_text(json.dumps({"run_name": "quiet", "start_ts": 1.0, "args": {}}))
    app = frozen_app(tmp_path / "run", 1_787_223_000.0)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _open(app, pilot)
        empty = screen.query_one("#compute-empty", Label)
        assert empty.display and "no GPU telemetry" in str(empty.render())
        assert not screen.query_one("#lanes", HeatRows).display
        await pilot.press("n", "w", "a", "right")  # nothing to pick: nothing breaks
        await settle(pilot)
        assert empty.display


def _append(path: Path, lines: list[dict[str, object]]) -> None:
    with path.open("a") as handle:
        handle.write("".join(json.dumps(line) + "\n" for line in lines))


async def test_new_samples_redraw_the_lanes(tmp_path: Path) -> None:
    fleet = write_fleet(tmp_path / "run", nodes=2, gpus_per_node=2, seconds=600, dead_node=None, slow_node=None)
    now = fleet.end + 10
    app = frozen_app(fleet.root, now)
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await _open(app, pilot)
        assert len(_rows(screen, "#lanes")) == 4
        newest = sorted((fleet.root / "dashboard" / "gpu_util").iterdir())[-1]
        _append(newest, [{"ts": fleet.end + 5, "node": "10.1.0.9", "gpu": 0, "util": 40, "mem_mb": 2048}])
        app.poll_now()  # the app's own poll: the screen notices on the status it forwards
        await settle(pilot)
        assert ("10.1.0.9", 0) in _rows(screen, "#lanes")
        # A forwarded TelemetryAppended redraws too (the follower was polled by someone else).
        _append(newest, [{"ts": fleet.end + 6, "node": "10.1.0.10", "gpu": 3, "util": 40, "mem_mb": 2048}])
        app.watcher.follower.poll(now)
        screen.post_message(TelemetryAppended((), ("gpu_util",)))
        await settle(pilot)
        assert _rows(screen, "#lanes")[-1] == ("10.1.0.10", 3)
        before = screen.view
        screen.post_message(TelemetryAppended(("train/loss",), ()))  # not ours: no recompute
        await settle(pilot)
        assert screen.view is before


async def test_a_stopped_run_shows_its_last_window_and_calls_the_lanes_stale_not_dead(tmp_path: Path) -> None:
    fleet = write_fleet(tmp_path / "run", nodes=2, gpus_per_node=2, seconds=600, dead_node=None, slow_node=None)
    app = frozen_app(fleet.root, fleet.end + 7200)
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await _open(app, pilot)
        view = screen.view
        assert view is not None and view.anchored_to_data and view.grid.bins.until == fleet.end
        title = _title(screen)
        assert "ends at the last sample, 2h00m ago" in title and "no samples from any lane lately" in title
        assert "DEAD" not in title
        texts = screen.lane_texts()
        assert len(texts) == 4 and all(text.rstrip().endswith("stale") and "2h00m" in text for text in texts)
        assert _lines(screen, "#axis")[0].rstrip().split()[-4] == "end╵"
