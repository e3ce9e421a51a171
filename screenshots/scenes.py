"""The scenes of the real app that the README screenshots and the snapshot tests both show.

A scene is a run directory built deterministically (a seeded demo run, or a
golden case), a fixed clock, and the keys a user presses. ``screenshots/generate.py``
renders each to SVG; ``tests/tui/test_snapshots.py`` compares each with its baseline.
"""

from __future__ import annotations

import io
import os
import shutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from rich.console import Console
from textual.app import App
from textual.pilot import Pilot
from textual.widgets import Input

from tui.app import MilesApp, make_app

EPOCH = 1_780_000_000.0
"""The frozen 'now' of every scene (files are stamped ten minutes before it)."""

GOLDEN = Path(__file__).resolve().parents[1].parent / "shared" / "golden"
SIZES = ((80, 24), (160, 48))


def _stamp(root: Path, mtime: float) -> None:
    for path in [root, *root.rglob("*")]:
        os.utime(path, (mtime, mtime))


def build_demo(root: Path, steps: int = 6) -> Path:
    """A seeded demo run (CP/PP/TP shards, eval steps, telemetry) with fixed mtimes."""
    from core.demo import DemoConfig, write_demo_step

    config = DemoConfig(samples_per_step=24, seed=3)
    for rid in range(steps):
        write_demo_step(root, rid, config, np.random.default_rng([3, rid]), now=EPOCH - 600 - (steps - rid) * 30)
    _stamp(root, EPOCH - 600)
    return root


def build_golden(case: str, root: Path) -> Path:
    """A copy of a golden case with aged mtimes."""
    shutil.copytree(GOLDEN / case, root)
    for path in [root, *root.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o200)
    _stamp(root, EPOCH - 3600)
    return root


def screen_text(app: App[None]) -> str:
    """The screen as a user reads it: plain text, one line per terminal row (what a screenshot shows)."""
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), color_system=None, record=True)
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    return console.export_text()


async def settle(pilot: Pilot[None]) -> None:
    """Wait until every worker is done and the screen is repainted; drop toasts."""
    app = pilot.app
    for _ in range(4):
        await pilot.pause()
        await app.workers.wait_for_complete()
    app.clear_notifications()
    for input_box in app.screen.query(Input):
        input_box.cursor_blink = False
    await pilot.pause()


@dataclass(frozen=True)
class Scene:
    """One screen state to show."""

    name: str
    """File stem of the screenshot / snapshot."""
    source: str
    """'demo' or a golden case name."""
    keys: tuple[str, ...]
    """Keys pressed after the first poll; '~' settles (waits for workers)."""

    def build(self, workdir: Path) -> Path:
        target = workdir / self.source
        if target.exists():
            return target
        if self.source == "demo":
            return build_demo(target)
        return build_golden(self.source, target)

    def app(self, workdir: Path) -> MilesApp:
        return make_app(self.build(workdir), poll_seconds=3600, clock=lambda: EPOCH)

    def driver(self) -> Callable[[Pilot[None]], Awaitable[None]]:
        async def drive(pilot: Pilot[None]) -> None:
            await settle(pilot)
            for key in self.keys:
                if key == "~":
                    await settle(pilot)
                else:
                    await pilot.press(key)
            await settle(pilot)

        return drive


SCENES = (
    Scene("overview", "demo", ()),
    Scene("step", "demo", ("enter", "~")),
    Scene("step_groups", "demo", ("enter", "~", "g")),
    Scene("step_filter", "demo", ("enter", "~", "slash", *"truncated", "enter")),
    Scene("sample", "demo", ("enter", "~", "down", "down", "down", "enter", "~", "n")),
    Scene("sample_chart", "demo", ("enter", "~", "down", "down", "down", "enter", "~", "n", "c", "~")),
    Scene("sample_conversation", "tp_dup", ("down", "enter", "~", "enter", "~", "t")),
    Scene("unreadable", "cp_legacy_ambiguous", ("enter", "~")),
    Scene("help", "demo", ("question_mark",)),
    Scene("metrics", "live_streams", ("m", "~")),
    Scene("compute", "live_streams", ("u", "~")),
    Scene("outliers", "demo", ("O", "~")),
    Scene("compare", "demo", ("c", "~")),
    Scene("advisories", "degenerate", ()),
)
