"""Snapshot tests: every scene of screenshots/scenes.py at 80x24 and 160x48 (`--snapshot-update` to accept)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from screenshots.scenes import SCENES, SIZES, Scene


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
@pytest.mark.parametrize("scene", SCENES, ids=[s.name for s in SCENES])
def test_screen(scene: Scene, size: tuple[int, int], snap_compare: Callable[..., Any], tmp_path: Path) -> None:
    # The driver also checks what makes the scene that scene (Scene.check: shows, wide, hides), so a
    # baseline can never approve a broken screen.
    assert snap_compare(scene.app(tmp_path), terminal_size=size, run_before=scene.driver())
