"""Pacer: after a stretch of work it sleeps share times as long (at most cap); the next stretch starts after."""

from __future__ import annotations

import pytest

from miles_tui.core.base import pacing
from miles_tui.core.base.pacing import Pacer


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> tuple[list[float], list[float]]:
    """(the clock's next readings, the sleeps asked for)."""
    readings: list[float] = []
    sleeps: list[float] = []
    monkeypatch.setattr(pacing.time, "perf_counter", lambda: readings.pop(0))
    monkeypatch.setattr(pacing.time, "sleep", sleeps.append)
    return readings, sleeps


def test_each_pause_is_share_times_the_work_since_the_last_at_most_cap(clock: tuple[list[float], list[float]]) -> None:
    readings, sleeps = clock
    readings += [10.0]  # created
    pacer = Pacer(1.5, 0.25)
    readings += [10.1, 10.25]  # 0.1 s of work, then it wakes at 10.25
    pacer.pause()
    readings += [10.3, 10.3]  # 0.05 s since it woke
    pacer.pause()
    readings += [11.3, 11.6]  # a second of work: the cap
    pacer.pause()
    readings += [20.0, 20.02, 20.02]  # restart: what came before does not count
    pacer.restart()
    pacer.pause()
    assert sleeps == pytest.approx([0.15, 0.075, 0.25, 0.03])
    assert readings == []


def test_a_share_of_nothing_never_sleeps(clock: tuple[list[float], list[float]]) -> None:
    readings, sleeps = clock
    readings += [0.0, 5.0, 9.0]
    pacer = Pacer(0.0, 1.0)
    pacer.pause()
    pacer.pause()
    assert sleeps == []
