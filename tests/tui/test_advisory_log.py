"""Advisories have a history (issue 24, item 2): a log of every advisory with its first and last step, the
sidebar keeps a cleared one (dimmed, "cleared at step N") for a while, and Enter on it still jumps."""

from __future__ import annotations

from pathlib import Path

import pytest

from miles_tui.core.analysis import Advisory, Level
from miles_tui.core.analysis.advisory_log import AdvisoryLog, merged, step_history
from miles_tui.core.synth.demo import run_demo
from miles_tui.tui.screens.advisory_log_screen import AdvisoryLogScreen
from miles_tui.tui.screens.step_screen import StepScreen
from miles_tui.tui.widgets.advisory_list import AdvisoryList
from miles_tui.tui.widgets.virtual_table import VirtualTable
from tests.conftest import EPOCH, stamp
from tests.harness import frozen_app, screen_text, settle


async def _summarized(app: object, pilot: object, steps: int) -> None:
    """Wait for the back-fill to summarize every train step (the log's history covers them all)."""
    for _ in range(60):
        await settle(pilot, linger=0.2)  # type: ignore[arg-type]
        summaries = app.model.summaries  # type: ignore[attr-defined]
        if sum(1 for _rid, ev in summaries if not ev) >= steps:
            return
    raise AssertionError("the back-fill did not finish")


def _zero(step: int) -> Advisory:
    return Advisory(Level.WARNING, "zero_std_groups", f"groups at {step}", rollout_id=step)


def test_a_flickering_advisory_is_one_entry_with_its_first_and_last_step() -> None:
    seen = {59, 67}
    history = step_history({s: [_zero(s)] if s in seen else [] for s in range(55, 69)})
    [entry] = history.entries
    assert (entry.first_step, entry.last_step, entry.count, entry.active, entry.cleared_at) == (59, 67, 2, False, 68)
    assert entry.advisory.rollout_id == 67  # Enter goes where it was last seen
    assert history.sidebar(68) == (entry,) and history.sidebar(68 + 10) == ()  # kept for a while, then not


def test_polls_clear_and_revive_an_entry_and_merge_with_the_steps_history() -> None:
    live = AdvisoryLog().observe([_zero(3)], 3, 100.0).observe([], 4, 110.0)
    [entry] = live.entries
    assert not entry.active and entry.cleared_at == 4 and entry.last_seen == 100.0
    live = live.observe([_zero(5)], 5, 120.0).observe([_zero(5)], 5, 125.0)  # a second poll of step 5
    [entry] = live.entries
    assert entry.active and entry.count == 2 and entry.first_seen == 100.0 and entry.last_seen == 125.0
    both = merged(step_history({0: [_zero(0)], 1: [], 2: []}), live)
    [entry] = both.entries
    assert entry.first_step == 0 and entry.active and entry.last_step == 5


@pytest.fixture
def flicker_demo(tmp_path: Path) -> Path:
    """The issue's demo: zero_std_groups at step 59, gone 60-66, back at 67, gone at 68."""
    root = tmp_path / "demo"
    run_demo(root, 69, 0.0, max_steps=69, clock=lambda: EPOCH - 600, sleep=lambda _s: None)
    stamp(root, EPOCH - 600)
    return root


async def test_a_cleared_advisory_stays_in_the_sidebar_and_enter_still_jumps(flicker_demo: Path) -> None:
    app = frozen_app(flicker_demo)
    async with app.run_test(size=(100, 30)) as pilot:
        await _summarized(app, pilot, 69)
        sidebar = app.screen.query_one(AdvisoryList)
        [entry] = [e for e in sidebar.entries if e.advisory.code == "zero_std_groups"]
        assert not entry.active and entry.cleared_at == 68 and entry.last_step == 67
        index = sidebar.entries.index(entry)
        prompt = sidebar.get_option_at_index(index).prompt
        assert "cleared at step 68" in getattr(prompt, "plain", str(prompt))  # dimmed, still listed
        sidebar.highlighted = index
        sidebar.focus()
        await pilot.press("enter")
        await settle(pilot)
        steps = [s for s in app.screen_stack if isinstance(s, StepScreen)]
        assert [s.rollout_id for s in steps] == [67]  # the step (and the sample the advisory names)


async def test_the_advisory_log_lists_every_advisory_with_its_history(flicker_demo: Path) -> None:
    app = frozen_app(flicker_demo)
    async with app.run_test(size=(160, 30)) as pilot:
        await _summarized(app, pilot, 69)
        await pilot.press("a", "a")  # a: the sidebar; a again: the log
        await settle(pilot)
        assert isinstance(app.screen, AdvisoryLogScreen)
        text = screen_text(app)
        assert "zero_std_groups" in text and "cleared at step 68" in text, text
        table = app.screen.query_one("#log", VirtualTable)
        [row] = [r for r in table.rows if r.key == ("zero_std_groups", None)]
        cells = {c.key: cell.plain for c, cell in zip(table.columns, row.cells, strict=True)}
        assert (cells["first_step"], cells["last_step"], cells["count"]) == ("0", "67", "28"), cells
        assert table.move_to_key(("zero_std_groups", None))
        await pilot.press("enter")
        await settle(pilot)
        assert [s.rollout_id for s in app.screen_stack if isinstance(s, StepScreen)] == [67]


async def test_enter_on_an_engine_advisory_opens_the_engines_view(golden_copy: object) -> None:
    """Issue 24.8: Enter on kv_cache_pool_bound did nothing and said nothing."""
    from miles_tui.tui.screens.engines_screen import EnginesScreen

    root = golden_copy("live_engines")  # type: ignore[operator]
    newest = 1787243020.0  # its newest scrape: judged five minutes after it, the run is live
    app = frozen_app(root, newest + 300)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        sidebar = app.screen.query_one(AdvisoryList)
        codes = [e.advisory.code for e in sidebar.entries]
        assert codes[0] == "kv_cache_pool_bound", codes
        await pilot.press("a", "enter")
        await settle(pilot)
        assert isinstance(app.screen, EnginesScreen)
