"""A new critical advisory rings the bell once (tmux flags the window); --no-bell keeps quiet."""

from __future__ import annotations

from pathlib import Path

import pytest

from miles_tui.core.analysis import Advisory, Level
from tests.harness import frozen_app, settle

STALL = Advisory(Level.CRITICAL, "stalled_phase", "train open for 2.0h")
STALL_LATER = Advisory(Level.CRITICAL, "stalled_phase", "train open for 2.5h")
WARNING = Advisory(Level.WARNING, "truncation", "30% truncated", rollout_id=3)
CORRUPT = Advisory(Level.CRITICAL, "step_unreadable", "1_1.pt is corrupt", rollout_id=1)


@pytest.mark.parametrize("bell", [True, False])
async def test_each_new_critical_advisory_rings_once(demo_run: Path, bell: bool) -> None:
    app = frozen_app(demo_run, bell=bell)
    rings: list[None] = []
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        app._poll_streams()  # both sources have reported: what was there at start rang nothing
        await settle(pilot)
        app.bell = lambda: rings.append(None)  # type: ignore[method-assign]  # count instead of beeping
        for advisories, expected in [
            ((WARNING,), 0),
            ((STALL, WARNING), 1),
            ((STALL_LATER, WARNING), 1),  # the same stall, an older age: not new
            ((STALL_LATER, CORRUPT), 2),
            ((), 2),
        ]:
            app._stream_advisories = advisories  # as if the telemetry rules had said so
            app._take_health()
            await settle(pilot)
            assert len(rings) == (expected if bell else 0)
