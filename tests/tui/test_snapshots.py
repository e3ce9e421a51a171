"""Snapshot tests: every scene of screenshots/scenes.py at 80x24 and 160x48 (`--snapshot-update` to accept)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from screenshots.scenes import GOLDEN, SCENES, SIZES, Scene


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
@pytest.mark.parametrize("scene", SCENES, ids=[s.name for s in SCENES])
def test_screen(scene: Scene, size: tuple[int, int], snap_compare: Callable[..., Any], tmp_path: Path) -> None:
    if scene.needs_golden and not (GOLDEN / scene.source).is_dir():
        pytest.skip("../shared/golden is not present")
    drive = scene.driver()

    async def run_before(pilot: Pilot[None]) -> None:
        await drive(pilot)
        update = pilot.app.screen._compositor.render_update(full=True)
        shown = "\n".join("".join(segment.text for strip in line for segment in strip) for line in update.strips)
        missing = [text for text in scene.expect if text not in shown]
        assert not missing, f"{scene.name} at {size}: {missing} not on screen:\n{shown}"

    assert snap_compare(scene.app(tmp_path), terminal_size=size, run_before=run_before)
