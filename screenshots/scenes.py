"""The scenes of the real app that the README screenshots and the snapshot tests both show.

A scene is a run directory built deterministically (a seeded demo run, or a
golden case), a fixed clock, and the keys a user presses. ``screenshots/generate.py``
renders each to SVG; ``tests/tui/test_snapshots.py`` compares each with its baseline.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from textual.pilot import Pilot

from miles_tui.tui.app import MilesApp
from tests.harness import EPOCH, frozen_app, settle

GOLDEN = Path(__file__).resolve().parents[1].parent / "shared" / "golden"
SIZES = ((80, 24), (160, 48))


def _stamp(root: Path, mtime: float) -> None:
    for path in [root, *root.rglob("*")]:
        os.utime(path, (mtime, mtime))


def build_demo(root: Path, steps: int = 6) -> Path:
    """A seeded demo run (CP/PP/TP shards, eval steps, telemetry) with fixed mtimes."""
    from miles_tui.core.synth.demo import write_demo_step
    from miles_tui.core.synth.demo_batch import DemoConfig

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
        return frozen_app(self.build(workdir))

    def driver(self) -> Callable[[Pilot[None]], Awaitable[None]]:
        async def drive(pilot: Pilot[None]) -> None:
            await settle(pilot, quiet=True)
            for key in self.keys:
                if key == "~":
                    await settle(pilot, quiet=True)
                else:
                    await pilot.press(key)
            await settle(pilot, quiet=True)

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
