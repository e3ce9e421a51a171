"""Pilot tests of the engines view's metric list and metric chart: every scraped metric listed by kind, enter
charts one for every engine with miles' derivation (checked against the scrapes), lines shown and hidden by
their digit, the DP ranks of one engine, escape back to the six charts; keys that cannot act say why; a window
reads only the engine_series hours it touches."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from textual.widgets import OptionList

from miles_tui.tui.screens.engines_screen import EnginesScreen
from miles_tui.tui.screens.overview_screen import OverviewScreen
from screenshots.scenes import build_engines
from tests.harness import frozen_app, screen_text, settle


async def _engines(app: Any, pilot: Any) -> EnginesScreen:
    await settle(pilot)
    await pilot.press("E")
    await settle(pilot)
    assert isinstance(app.screen, EnginesScreen) and app.screen.view is not None
    return app.screen


async def _choose(screen: EnginesScreen, pilot: Any, name: str) -> None:
    """Open the list with ``l`` and walk down to ``name`` as a user would, then press enter."""
    await pilot.press("l")
    await settle(pilot)
    options = screen.query_one("#engines-metrics", OptionList)
    for _ in range(options.option_count):
        if options.highlighted_option is not None and options.highlighted_option.id == f"metric:{name}":
            break
        await pilot.press("down")
    assert options.highlighted_option is not None and options.highlighted_option.id == f"metric:{name}"
    await pilot.press("enter")
    await settle(pilot)


def _last_rate(root: Path, addr: str) -> float:
    """The newest requests-per-second of ``addr`` from the raw scrapes: Δcounter/Δt of the last interval."""
    rows = []
    for path in sorted((root / "dashboard" / "engine_series").glob("*.jsonl")):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            if record["addr"] == addr and record["metric"] == "sglang_num_requests_total":
                rows.append((record["ts"], record["value"]))
    (t0, v0), (t1, v1) = sorted(rows)[-2:]
    return (v1 - v0) / (t1 - t0)


async def test_the_golden_engines_list_every_metric_and_chart_requests_per_second(golden_copy: Any) -> None:
    root = golden_copy("live_engines")
    app = frozen_app(root)
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        screen = await _engines(app, pilot)
        hours = app.engine_hours.hours_read()
        assert [read for _, read in hours] == [False, True]  # the last 15 minutes touch the newest hour only
        await pilot.press("l")
        await settle(pilot)
        text = screen_text(app)
        assert "── gauges, as scraped (5)" in text and "── counters, per second (2)" in text
        assert "sglang_requests_per_s  2 engines  ← sglang_num_requests_total" in text
        assert "means per interval" not in text  # the golden run scrapes no histogram
        await pilot.press("escape")
        await _choose(screen, pilot, "sglang_requests_per_s")
        chart = screen.metric_text()
        alpha, bravo = _last_rate(root, "http://rollout-alpha"), _last_rate(root, "http://rollout-bravo")
        legend = chart.splitlines()[1]
        assert legend.startswith(f"1 rollout-alpha {alpha:.2f}/s  2 rollout-bravo {bravo:.2f}/s"), legend
        assert "sglang_requests_per_s · 2 engines (d: DP ranks of one) · counters, per second" in chart
        assert "now" in chart
        await pilot.press("1")
        await settle(pilot)
        assert screen.metric_text().splitlines()[1].startswith("1 rollout-alpha hidden  2 rollout-bravo")
        await pilot.press("2")
        await settle(pilot)
        assert "every line is hidden" in screen.metric_text()
        await pilot.press("a")
        await settle(pilot)
        assert "hidden" not in screen.metric_text().splitlines()[1]
        await pilot.press("3")
        await settle(pilot)
        assert "the chart has 2 lines: no line 3" in screen_text(app)
        await pilot.press("d")
        await settle(pilot)
        assert "DP ranks of rollout-alpha" in screen.metric_text()
        assert "labels no DP ranks" in screen_text(app)
        await pilot.press("escape")
        await settle(pilot)
        assert screen.mode == "panels" and "running reqs" in screen_text(app)
        await pilot.press("escape")
        assert isinstance(app.screen, OverviewScreen)


async def test_dp_ranks_of_one_engine_and_latency_means_on_one_chart(tmp_path: Path) -> None:
    root = build_engines(tmp_path / "engines")
    app = frozen_app(root)
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        screen = await _engines(app, pilot)
        await _choose(screen, pilot, "sglang_ttft_mean_s")
        chart = screen.metric_text()
        assert "sglang_ttft_mean_s · 2 engines (d: DP ranks of one) · means per interval (Δsum/Δcount)" in chart
        legend = chart.splitlines()[1]
        assert legend.startswith("1 10.0.0.1:30000 ") and " 2 10.0.0.2:30000 " in legend and legend.endswith("ms")
        await pilot.press("d")
        await settle(pilot)
        lines = screen.metric_text().splitlines()
        assert "DP ranks of 10.0.0.1:30000" in lines[0]
        assert [part.split()[0] for part in lines[1].split("  ")] == ["1", "2", "3", "4"]
        assert "dp0" in lines[1] and "dp3" in lines[1]
        await pilot.press("2")
        await settle(pilot)
        assert "2 dp1 hidden" in screen.metric_text().splitlines()[1]
        await pilot.press("n")  # the other engine: no DP labels, one line
        await settle(pilot)
        lines = screen.metric_text().splitlines()
        assert "DP ranks of 10.0.0.2:30000" in lines[0] and lines[1].startswith("1 10.0.0.2:30000 ")
        assert "hidden" not in lines[1]


async def test_chart_keys_on_the_six_charts_say_what_they_need(tmp_path: Path) -> None:
    root = build_engines(tmp_path / "engines")
    app = frozen_app(root)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        screen = await _engines(app, pilot)
        for key in ("1", "d", "a"):
            await pilot.press(key)
            await settle(pilot)
            assert f"{key} works on a metric chart: l lists the metrics" in screen_text(app)
        assert screen.mode == "panels"


async def test_the_demo_lists_its_counters_as_rates(demo_run: Path) -> None:
    app = frozen_app(demo_run)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        screen = await _engines(app, pilot)
        await _choose(screen, pilot, "sglang_aborted_requests_per_s")
        chart = screen.metric_text()
        assert "sglang_aborted_requests_per_s" in chart and "2 engines" in chart
        assert chart.splitlines()[1].startswith("1 ")


async def test_the_gpus_view_shows_each_engine_over_the_lanes_that_serve_it(tmp_path: Path) -> None:
    root = build_engines(tmp_path / "engines")
    app = frozen_app(root)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await pilot.press("u")
        await settle(pilot)
        text = screen_text(app)
        rows = [line for line in text.splitlines() if "⚙" in line]
        assert len(rows) == 2, text
        assert rows[0].lstrip().startswith("⚙ 10.0.0.1:30000") and rows[0].rstrip().endswith("run 48 · 10.0.0.1:0-3")
        assert rows[1].lstrip().startswith("⚙ 10.0.0.2:30000") and rows[1].rstrip().endswith("run 25 · 10.0.0.2:0,1")
        strip = rows[0].split("10.0.0.1:30000", 1)[1].split("run 48")[0].strip()
        assert " " in strip or "▁" in strip  # the restart: the engine ran nothing for three scrapes


async def test_the_gpus_view_of_a_run_without_topology_has_no_engine_rows(demo_run: Path) -> None:
    app = frozen_app(demo_run)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("u")
        await settle(pilot)
        assert "⚙" not in screen_text(app)
