"""Pilot tests: the metrics view's inspector says what the selected metric means (tab selects a chart)."""

from __future__ import annotations

import json
import shutil
import stat
from pathlib import Path
from typing import Any

from textual.pilot import Pilot
from textual.widgets import Label, Static

from miles_tui.core.telemetry import metric_meaning
from miles_tui.tui.app import MilesApp
from miles_tui.tui.screens.metrics_screen import MetricsScreen
from miles_tui.tui.views.metric_lines import INSPECTOR_HINT, NO_MEANING_NOTE, inspector_text, meaning_line
from tests.conftest import EPOCH, GOLDEN, stamp
from tests.harness import frozen_app, settle


async def _open(app: MilesApp, pilot: Pilot[None]) -> MetricsScreen:
    await settle(pilot, linger=0.3)
    await pilot.press("m")
    await settle(pilot, linger=0.3)
    assert isinstance(app.screen, MetricsScreen)
    return app.screen


def _inspector(screen: MetricsScreen) -> str:
    return str(screen.query_one("#inspector", Static).render())


async def test_tab_selects_a_chart_and_the_inspector_says_what_it_means(golden_copy: Any) -> None:
    app = frozen_app(golden_copy("live_streams"))
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await _open(app, pilot)
        assert screen.selected_key() is None
        assert INSPECTOR_HINT in _inspector(screen)
        await pilot.press("tab")
        await pilot.pause(0.2)
        first = screen.in_view_keys()[0]
        assert screen.selected_key() == first
        meaning = metric_meaning(first)
        assert meaning, f"{first} is traced in miles"
        assert meaning in _inspector(screen).replace("\n", " ")  # may wrap at the panel's width
        shown = screen.shown_keys()
        await pilot.press("tab")
        await pilot.pause(0.2)
        second = shown[shown.index(first) + 1]
        assert screen.selected_key() == second
        assert second in _inspector(screen)
        await pilot.press("shift+tab")
        await pilot.pause(0.2)
        assert screen.selected_key() == first
        await pilot.press("right")  # the cursor line stays below the meaning
        await pilot.pause(0.3)
        text = _inspector(screen)
        assert text.index(first) < text.index("step ")


async def test_train_loss_and_a_rollout_family_read_their_traced_lines(golden_copy: Any) -> None:
    app = frozen_app(golden_copy("live_streams"))
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await _open(app, pilot)
        await pilot.press("slash", *"train/loss", "enter")
        await pilot.pause(0.3)
        await pilot.press("tab")
        await pilot.pause(0.2)
        assert screen.selected_key() == "train/loss"
        assert "total loss: pg_loss - entropy_coef" in _inspector(screen)
        await pilot.press("slash", "ctrl+u", *"response_len", "enter")
        await pilot.pause(0.3)
        await pilot.press("tab")
        await pilot.pause(0.2)
        assert screen.selected_key() == "rollout/response_len/mean"
        assert "mean over the rollout's samples" in _inspector(screen).replace("\n", " ")


def _with_custom_key(tmp_path: Path) -> Path:
    """A copy of live_streams whose metrics.jsonl also logs a key miles does not (a user's own)."""
    target = tmp_path / "live_streams"
    shutil.copytree(GOLDEN / "live_streams", target)
    for path in [target, *target.rglob("*")]:
        path.chmod(path.stat().st_mode | stat.S_IWUSR)
    record = {"ts": EPOCH - 4000, "step_key": "rollout/step", "step": 0, "metrics": {"custom/\x1b[31mx": 1.0}}
    with (target / "dashboard" / "metrics.jsonl").open("a") as out:
        out.write(json.dumps(record) + "\n")
    stamp(target, EPOCH - 3600)
    return target


async def test_a_key_miles_does_not_log_says_so_inertly(tmp_path: Path) -> None:
    app = frozen_app(_with_custom_key(tmp_path))
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await _open(app, pilot)
        await pilot.press("slash", *"custom", "enter")
        await pilot.pause(0.3)
        await pilot.press("tab")
        await pilot.pause(0.2)
        assert screen.selected_key() == "custom/\x1b[31mx"
        text = _inspector(screen)
        assert NO_MEANING_NOTE in text
        assert "\x1b" not in text


async def test_the_selection_survives_new_keys(golden_copy: Any) -> None:
    app = frozen_app(golden_copy("live_streams"))
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await _open(app, pilot)
        await pilot.press("tab", "tab")
        await pilot.pause(0.2)
        chosen = screen.selected_key()
        assert chosen is not None
        await screen._rebuild(screen.source, dict(screen.charted))
        await pilot.pause(0.2)
        assert screen.selected_key() == chosen


def test_meaning_lines() -> None:
    assert meaning_line("train/grad_norm").plain.startswith("train/grad_norm  global L2 norm of the gradient")
    assert meaning_line("rollout/zero_std_ratio").plain == f"rollout/zero_std_ratio  {NO_MEANING_NOTE}"
    assert inspector_text(None, {}, None).plain == INSPECTOR_HINT
    assert inspector_text(None, {}, "train/loss").plain.split("\n") == [
        meaning_line("train/loss").plain,
        INSPECTOR_HINT,
    ]


def _with_wandb(tmp_path: Path, **args: Any) -> Path:
    """A copy of live_streams whose meta.json records W&B arguments as miles snapshots them."""
    target = tmp_path / "wandb_run"
    shutil.copytree(GOLDEN / "live_streams", target)
    for path in [target, *target.rglob("*")]:
        path.chmod(path.stat().st_mode | stat.S_IWUSR)
    meta_path = target / "dashboard" / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta["args"].update(args)
    meta_path.write_text(json.dumps(meta))
    stamp(target, EPOCH - 3600)
    return target


async def test_the_wandb_run_url_is_shown_and_w_copies_it(tmp_path: Path) -> None:
    run = _with_wandb(tmp_path, wandb_team="rl-lab", wandb_project="qwen3", wandb_run_id="a1b2c3", wandb_group="g7")
    app = frozen_app(run)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await _open(app, pilot)
        line = str(screen.query_one("#wandb", Label).render())
        assert "W&B run  https://wandb.ai/rl-lab/qwen3/runs/a1b2c3 · group g7 · W: copy" in line
        await pilot.press("W")
        await pilot.pause()
        assert app.clipboard == "https://wandb.ai/rl-lab/qwen3/runs/a1b2c3"
        app.copy_to_clipboard("")
        await pilot.press("ctrl+p", *"copy w&b", "enter")
        await settle(pilot)
        assert app.clipboard == "https://wandb.ai/rl-lab/qwen3/runs/a1b2c3"


async def test_project_url_without_a_run_id_and_hostile_values(tmp_path: Path) -> None:
    run = _with_wandb(tmp_path, wandb_team="t/\x1b[31m", wandb_project="p", wandb_run_id="\x1b]52;c;QQ==\x07")
    app = frozen_app(run)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await _open(app, pilot)
        line = str(screen.query_one("#wandb", Label).render())
        assert "W&B: wandb_team not a usable name (the URL needs the entity)" in line
        assert "\x1b" not in line
        await pilot.press("W")
        await pilot.pause()
        assert app.clipboard == ""


async def test_no_wandb_line_without_a_project(golden_copy: Any) -> None:
    app = frozen_app(golden_copy("live_streams"))
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await _open(app, pilot)
        assert not screen.query_one("#wandb", Label).display
