"""Pilot tests of the compute view: lanes (utilisation, own phases, memory), phases, fleet summary, dead nodes,
lane picker, zoom and pan of the window, live redraw."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from textual.pilot import Pilot
from textual.widgets import Label

from miles_tui.tui.app import MilesApp
from miles_tui.tui.model.messages import TelemetryAppended
from miles_tui.tui.screens.compute_screen import WORST_COUNT, ComputeScreen
from miles_tui.tui.screens.overview_screen import OverviewScreen
from miles_tui.tui.views.compute_rows import LANE_LINES
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
    rows = screen.query_one(selector, HeatRows).rows
    if selector == "#lanes":  # a lane's first line is keyed by the lane; its phase and memory lines follow
        return [rows[i].key for i in range(0, len(rows), LANE_LINES)]
    return [row.key for row in rows]


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
        assert lanes[0].lstrip().startswith("10.0.0.7:0") and lanes[3].lstrip().startswith("10.0.0.7:1")
        assert lanes[1].split()[0] == "phases" and lanes[2].split()[0] == "memory"
        assert "█39% ▒4% ·1%" in lanes[1], "the lane's share of each phase, marked as the legend marks it"
        assert "███    ██" in lanes[1] and "peak 58.6G █=58.8G" in lanes[2], "training, then no phase"
        assert not any("DEAD" in line or "stale" in line for line in lanes)
        assert "58.6G" in lanes[0], "memory of the latest bin (60000 MB)"
        keys = _rows(screen, "#phases")
        phases = [key[2] for key in keys if key[0] == "phase"]  # type: ignore[index]
        assert phases == ["rollout", "train_wait", "actor_train", "update_weights"]
        assert keys[-2:] == [("starve", "wait"), ("starve", "buffer")], "the starvation rows under the phases"
        assert not screen.query_one("#fleet", HeatRows).display, "two GPUs need no fleet summary"
        axis = _lines(screen, "#axis")[0]
        assert "now╵" in axis and "-10m" in axis and "util" in axis
        title = _title(screen)
        assert "last 15m · live · 11:25:27–11:40:27 UTC" in title
        assert "2 GPUs on 1 node" in title and "every 10s" in title
        legend = _lines(screen, "#phases")
        assert [line.split()[:2] for line in legend if line.strip()][:4] == [
            ["▓", "rollout"],
            ["·", "train_wait"],
            ["█", "actor_train"],
            ["▒", "update_weights"],
        ]


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
        assert _lines(screen, "#lanes")[-LANE_LINES].lstrip().startswith(f"{nodes[-1]}:7")
        assert len(await press("w")) == WORST_COUNT


async def test_each_lane_shows_its_own_phases_and_memory_and_the_fleet_still_summarises(fleet: Fleet) -> None:
    app = frozen_app(fleet.root, fleet.end + 10)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await _open(app, pilot)
        lanes = screen.query_one("#lanes", HeatRows)
        assert len(lanes.rows) == LANE_LINES * WORST_COUNT
        assert screen.query_one("#fleet", HeatRows).display, "above 64 GPUs the fleet summary stays"
        dead, slow = _lines(screen, "#lanes")[:LANE_LINES], _lines(screen, "#lanes")[3 * LANE_LINES + 1]
        assert dead[0].lstrip().startswith(fleet.dead_node) and dead[0].rstrip().endswith("DEAD")
        start = lanes.label_width + 2  # the widget's left padding and the gap after the label
        band = dead[1][start : start + lanes.strip_width]
        assert "···" in band and "███" in band, "waiting reads as dots, training as a bar"
        assert band.rstrip().endswith("·" * 20), "it died waiting: the open train_wait runs on to now"
        assert "·" in slow and "█" in slow
        assert dead[2].split()[0] == "memory" and "peak" in dead[2]


async def test_zoom_and_pan_keys_move_the_window_and_the_title_says_where(tmp_path: Path) -> None:
    fleet = write_fleet(tmp_path / "run", nodes=2, gpus_per_node=2, seconds=3 * 3600, dead_node=None, slow_node=None)
    now = fleet.end + 10  # 2026-08-20 13:50:10 UTC
    app = frozen_app(fleet.root, now)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await _open(app, pilot)

        async def press(*keys: str) -> str:
            await pilot.press(*keys)
            await settle(pilot)
            assert screen.view is not None
            return _title(screen)

        assert "last 15m · live · 13:35:10–13:50:10 UTC" in _title(screen)
        assert _lines(screen, "#axis")[0].split()[-4] == "now╵"
        title = await press("left")
        assert "15m · PANNED, ends 7m30s ago (0: live) · 13:27:40–13:42:40 UTC" in title
        assert _lines(screen, "#axis")[0].split()[-4] == "-7m30s╵", "ticks count back from now"
        assert "PANNED, ends 15m00s ago" in await press("left")
        title = await press("plus")
        assert "7m30s · PANNED" in title and "13:23:55–13:31:25 UTC" in title, "zoomed in around the centre"
        assert "last 7m30s · live · 13:42:40–13:50:10 UTC" in await press("right", "right", "right", "right", "right")
        assert "last 15m · live" in await press("minus")
        assert "last 30m · live" in await press("minus")
        assert "whole run · live · 10:50:00–13:50:10 UTC" in await press("4")
        assert "last 1h · live" in await press("2")
        title = await press("shift+left")
        assert "1h · PANNED" in title and "10:50:00–11:50:00 UTC" in title, "the start of the run"
        view = screen.view
        assert view is not None and view.grid.bins.since == fleet.start
        assert not any(np.isnan(view.grid.util).all(axis=1)), "the past has data"
        assert "PANNED" in await press("left"), "no earlier than the run"
        assert "last 1h · live · 12:50:10–13:50:10 UTC" in await press("0")
        assert "last 15m · live" in await press("1")
        assert "last 7m30s · live" in await press("equals_sign"), "= is + without shift"
        assert "PANNED" in await press("left")
        assert "last 7m30s · live" in await press("shift+right")


async def test_a_live_window_follows_new_data_and_a_panned_one_stays(tmp_path: Path) -> None:
    fleet = write_fleet(tmp_path / "run", nodes=1, gpus_per_node=2, seconds=3600, dead_node=None, slow_node=None)
    clock = [fleet.end + 5]
    app = frozen_app(fleet.root, lambda: clock[0])
    newest = sorted((fleet.root / "dashboard" / "gpu_util").iterdir())[-1]
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await _open(app, pilot)

        async def tick() -> str:
            clock[0] += 60
            _append(
                newest, [{"ts": clock[0] - 1, "node": fleet.nodes[0], "gpu": g, "util": 5, "mem_mb": 1} for g in (0, 1)]
            )
            app.poll_now()
            await settle(pilot)
            return _title(screen)

        assert "live · 11:35:05–11:50:05 UTC" in _title(screen)
        assert "live · 11:36:05–11:51:05 UTC" in await tick(), "live: the window moves with the clock"
        await pilot.press("left")
        await settle(pilot)
        assert "PANNED, ends 7m30s ago (0: live) · 11:28:35–11:43:35 UTC" in _title(screen)
        assert "PANNED, ends 8m30s ago (0: live) · 11:28:35–11:43:35 UTC" in await tick(), "panned: it stays"


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
        assert "live" not in title  # a window of old samples read "live (ends ... 103d ago)"
        assert "DEAD" not in title
        texts = screen.lane_texts()
        assert len(texts) == 4 and all(text.rstrip().endswith("stale") and "2h00m" in text for text in texts)
        assert _lines(screen, "#axis")[0].rstrip().split()[-4] == "end╵"


async def test_zero_on_a_live_window_says_so_and_a_far_panned_axis_names_its_date(
    golden_copy: Callable[[str], Path],
) -> None:
    root = golden_copy("live_streams")
    truth = json.loads((GOLDEN / "live_streams.truth.json").read_text())["dashboard"]
    now = truth["time_range"][1] + 3 * 86400  # the run stopped three days ago
    app = frozen_app(root, now)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await _open(app, pilot)
        await pilot.press("0")
        await settle(pilot)
        said = [n.message for n in app._notifications]
        assert any("already live" in m and "last sample" in m for m in said), said
        await pilot.press("left")
        for _ in range(50):
            await settle(pilot)
            if "PANNED" in _title(screen):
                break
        axis = _lines(screen, "#axis")[0]
        assert "-3d" not in axis, "offsets from now would all read alike"
        assert "08-20 " in axis and "╵" in axis, axis
