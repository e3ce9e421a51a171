"""The batch anatomy: `a` on a step draws one lane per sample on one axis, `s` sorts, Enter opens the sample;
the sample screen shows the sample's own lane, or says no trajectory was recorded. And the text rows."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text

from miles_tui.core.telemetry.stream_records import TrajectoryEvent
from miles_tui.core.telemetry.trajectory_lanes import GENERATING, STALE_GENERATING, trajectory_lanes
from miles_tui.tui.screens.anatomy_screen import AnatomyScreen
from miles_tui.tui.screens.help_screen import HelpScreen, _describe
from miles_tui.tui.screens.sample_screen import SampleScreen
from miles_tui.tui.screens.step_screen import StepScreen
from miles_tui.tui.views.anatomy_rows import (
    CONSUME_GLYPH,
    GLYPHS,
    NO_TRAJECTORY,
    axis_label,
    lane_text,
    legend_text,
    sample_lane_lines,
)
from miles_tui.tui.widgets.lifecycle_lane import LifecycleLane
from miles_tui.tui.widgets.virtual_table import VirtualTable
from tests.harness import frozen_app, screen_text, settle


async def test_a_on_a_step_draws_every_sample_and_enter_opens_the_one_under_the_cursor(demo_run: Path) -> None:
    app = frozen_app(demo_run)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, StepScreen)
        rid = app.screen.rollout_id
        await pilot.press("a")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, AnatomyScreen) and screen.anatomy is not None
        summary = app.model.summaries[(rid, False)]
        assert screen.anatomy.lanes == len(summary.rows)
        text = screen_text(app)
        assert f"Batch anatomy · step {rid} · {len(summary.rows)} of {len(summary.rows)} samples" in text
        assert "sorted by submit" in text and "+0s" in text
        assert "generating" in text and "tool call" in text and "consumed by the train step" in text
        lanes = screen.lane_texts()
        assert len(lanes) == len(summary.rows)
        drawn_generating = (GLYPHS[GENERATING], GLYPHS[STALE_GENERATING])
        assert all(CONSUME_GLYPH in lane and any(g in lane for g in drawn_generating) for lane in lanes)
        assert any(GLYPHS[GENERATING] in lane for lane in lanes)  # the newest version's samples
        assert any(GLYPHS[3] in lane for lane in lanes)  # the demo's multi-turn samples call tools
        table = screen.query_one("#anatomy", VirtualTable)
        first = [row.key for row in table.rows]
        await pilot.press("s")  # wall span
        await pilot.press("s")  # reward
        await settle(pilot)
        assert "sorted by reward" in screen_text(app)
        by_reward = [row.key for row in table.rows]
        assert sorted(by_reward) == sorted(first)
        rewards = [next(r.reward for r in summary.rows if r.sample_index == k) for k in by_reward]
        assert rewards == sorted(rewards)
        await pilot.press("down")
        chosen = table.cursor_key
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, SampleScreen) and app.screen.sample_index == chosen
        lane = app.screen.query_one(LifecycleLane)
        assert lane.shown is not None and lane.shown[2] is not None
        assert f"consumed by step {rid}" in screen_text(app)
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, AnatomyScreen)


async def test_the_palette_opens_the_anatomy_of_the_step_in_view(demo_run: Path) -> None:
    from tests.tui.test_palette import _run_command

    app = frozen_app(demo_run)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await _run_command(pilot, "batch anatomy")
        assert isinstance(app.screen, AnatomyScreen)
        assert app.screen.rollout_id == app.model.latest and not app.screen.evaluation


async def test_the_key_is_in_the_steps_help(demo_run: Path) -> None:
    app = frozen_app(demo_run)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        step = app.screen
        await pilot.press("question_mark")
        await settle(pilot)
        assert isinstance(app.screen, HelpScreen)
        assert ("a", "Batch anatomy", "step") in _describe(step).rows


async def test_a_run_without_events_says_so_on_the_anatomy_and_the_sample(golden_copy: object) -> None:
    root = golden_copy("tp_dup")  # type: ignore[operator]
    app = frozen_app(root)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("down", "enter")
        await settle(pilot)
        assert isinstance(app.screen, StepScreen) and not app.screen.evaluation
        await pilot.press("a")
        await settle(pilot)
        assert isinstance(app.screen, AnatomyScreen)
        text = " ".join(screen_text(app).split())
        assert "0 of" in text and "No trajectory recorded for step" in text
        await pilot.press("escape")
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, SampleScreen)
        assert f"lifecycle: {NO_TRAJECTORY}" in screen_text(app)


async def test_the_gpu_view_draws_samples_in_flight_while_the_rollout_runs(demo_run: Path) -> None:
    from miles_tui.tui.screens.compute_screen import ComputeScreen

    app = frozen_app(demo_run)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await pilot.press("u")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, ComputeScreen) and screen.flight is not None and screen.view is not None
        flight = screen.flight
        assert flight.samples == 4 * 16  # every sample of the demo's four steps
        assert flight.generating.max() > 0 and flight.tools.max() > 0
        bins = screen.view.grid.bins
        assert (flight.bins.since, flight.bins.count) == (bins.since, bins.count)
        text = screen_text(app)
        assert "█ generating" in text and "▒ tool call" in text and "░ queued" in text and "samples, peak" in text


async def test_the_gpu_view_has_no_trajectory_rows_without_events(golden_copy: object) -> None:
    from miles_tui.tui.screens.compute_screen import ComputeScreen

    app = frozen_app(golden_copy("live_streams"))  # type: ignore[operator]
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await pilot.press("u")
        await settle(pilot)
        assert isinstance(app.screen, ComputeScreen) and app.screen.flight is None
        assert "generating" not in screen_text(app)


# -- the text rows ---------------------------------------------------------------------------------------


def _lane() -> object:
    events = [
        TrajectoryEvent(0.0, "attempt_start", 1, 0, -1, "", ""),
        TrajectoryEvent(2.0, "gen_start", 1, 0, 1, "3", ""),
        TrajectoryEvent(5.0, "gen_end", 1, 0, 1, "3", ""),
        TrajectoryEvent(5.0, "tool_start", 1, 0, 1, "", "\x1b[31mred\u202e"),
        TrajectoryEvent(7.0, "tool_end", 1, 0, 1, "", ""),
        TrajectoryEvent(7.0, "gen_start", 1, 0, 2, "4", ""),
        TrajectoryEvent(9.0, "gen_end", 1, 0, 2, "4", ""),
        TrajectoryEvent(9.0, "attempt_end", 1, 0, -1, "4", "\x1b]0;pwned\x07done\u202e"),
    ]
    (lane,) = trajectory_lanes(events).lanes
    return lane


def test_a_lane_reads_without_colour_and_the_consume_line_is_on_its_column() -> None:
    lane = _lane()
    text = lane_text(lane, 0.0, 20.0, 20, consumed=15.0)  # type: ignore[arg-type]
    assert text.plain == "░░███▒▒██······│    "
    assert len(text.plain) == 20


def test_generation_on_older_weights_reads_apart() -> None:
    lane = _lane()  # turn 1 on version 3, turn 2 on version 4
    text = lane_text(lane, 0.0, 20.0, 20, consumed=15.0, newest=4)  # type: ignore[arg-type]
    assert text.plain == "░░▓▓▓▒▒██······│    "
    assert sample_lane_lines(lane, 15.0, 4, 30)[0].plain.count("▓") > 0  # type: ignore[arg-type]
    assert "▓▓ on older weights" in legend_text().plain


def test_the_axis_puts_round_offsets_at_their_columns_and_never_overlaps() -> None:
    axis = axis_label(0.0, 60.0, 60)
    assert axis.startswith("+0s") and "+30s" in axis and axis.index("+30s") == 30
    assert len(axis) <= 60
    assert axis_label(0.0, 0.0, 10) == "" and axis_label(0.0, 10.0, 0) == ""
    dense = axis_label(0.0, 3600.0, 12)
    assert dense.startswith("+0s") and len(dense) <= 12


def test_run_strings_on_the_sample_line_are_inert() -> None:
    lines = sample_lane_lines(_lane(), 15.0, 4, 60)  # type: ignore[arg-type]
    joined = Text("\n").join(lines).plain
    assert "\x1b" not in joined and "\x07" not in joined and "\u202e" not in joined
    assert "2 turns" in joined and "1 tool call 2s" in joined and "consumed by step 4 after 15s" in joined
    assert sample_lane_lines(None, None, 4, 60)[0].plain == f"lifecycle: {NO_TRAJECTORY}"


def test_the_legend_names_every_glyph() -> None:
    legend = legend_text().plain
    for glyph in GLYPHS.values():
        if glyph.strip():
            assert glyph * 2 in legend
    assert CONSUME_GLYPH in legend
