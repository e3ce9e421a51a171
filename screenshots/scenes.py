"""The scenes of the real app that the README screenshots and the snapshot tests both show.

A scene is a run directory built deterministically (a seeded demo run, or a
golden case), a fixed clock, the keys a user presses, and what the screen must
then say in text (``shows``, ``wide`` at the larger size only, ``hides``): the
words that make it that scene, checked before any picture is compared or
written, so a baseline can never approve a broken screen. ``screenshots/generate.py``
renders each to SVG; ``tests/tui/test_snapshots.py`` compares each with its baseline.
"""

from __future__ import annotations

import io
import os
import re
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
    shows: tuple[str, ...] = ()
    """Text the screen must show at every size (``re:`` starts a regular expression)."""
    wide: tuple[str, ...] = ()
    """Text it must show at the larger size (columns a small terminal has no room for)."""
    hides: tuple[str, ...] = ()
    """Text it must not show."""

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
            self.check(pilot.app)

        return drive

    def check(self, app: App[None]) -> None:
        """Assert the screen says what makes it this scene (AssertionError with the screen's text)."""
        text = screen_text(app)
        wanted = [*self.shows, *(self.wide if app.size.width >= WIDE else ())]
        missing = [w for w in wanted if not _found(w, text)]
        present = [h for h in self.hides if _found(h, text)]
        if missing or present:
            raise AssertionError(
                f"scene {self.name} at {app.size.width}x{app.size.height}: missing {missing}, "
                f"should not show {present}; the screen was:\n{text}"
            )


WIDE = 120
"""Sizes at least this wide must also show a scene's ``wide`` text."""


def _found(pattern: str, text: str) -> bool:
    if pattern.startswith("re:"):
        return re.search(pattern[3:], text) is not None
    return pattern in text


SCENES = (
    Scene("overview", "demo", (), shows=("step kind", "5 train", "0-std", "state", "zero-std", "staleness")),
    Scene("step", "demo", ("enter", "~"), shows=("step 5 train", "24/24 samples", "sample", "status", "version")),
    Scene(
        "step_groups",
        "demo",
        ("enter", "~", "g"),
        shows=("6 groups · g: back to samples", "degenerate", "resp len", "std", "ZERO STD"),
        hides=("status", "24/24 samples"),
    ),
    Scene(
        "step_filter",
        "demo",
        ("enter", "~", "slash", *"truncated", "enter"),
        shows=(r"re:\b\d+/24 samples · filter: truncated", "truncated"),
        hides=("completed", "filter error", "loading"),
    ),
    Scene(
        "sample",
        "demo",
        ("enter", "~", "down", "down", "down", "enter", "~", "n"),
        shows=("step 5 · sample 123", "outlier #1/", "rollout logp", "lp diff"),
    ),
    Scene(
        "sample_chart",
        "demo",
        ("enter", "~", "down", "down", "down", "enter", "~", "n", "c", "~"),
        shows=("step 5 · sample 123", "┌", "┤", "lp diff"),
    ),
    Scene(
        "sample_conversation",
        "tp_dup",
        ("down", "enter", "~", "enter", "~", "t"),
        shows=("recorded conversation", "─ user", "─ assistant", "─ tool · count"),
    ),
    Scene(  # the cursor on the |lpΔ| column: the per-token columns are on screen at 80 columns too
        "unreadable",
        "cp_legacy_ambiguous",
        ("enter", "~", *["right"] * 16),
        shows=("2 unreadable", "UNREAD   UNREAD"),
    ),
    Scene("help", "demo", ("question_mark",), shows=("miles-tui keys", "action", "Advisories", "Outliers", "overview")),
    Scene("metrics", "live_streams", ("m", "~"), shows=("series · y: linear", "train/grad_norm", "x: train/step")),
    Scene("compute", "live_streams", ("u", "~"), shows=("Compute · last 15m", "GPUs on 1 node", "rollout")),
    Scene("outliers", "demo", ("O", "~"), shows=("outliers · step 5", "lp diff", "imp ratio", "entropy", "top ")),
    Scene("compare", "demo", ("c", "~"), shows=("compare · A = step 4  B = step 5", "rwd Δ", "reward")),
    Scene("advisories", "degenerate", (), shows=("[WARN]", "all_rewards_zero", "advisories (2)")),
)
