"""Shared fixtures: a per-test summary cache, demo runs written by core's own writer, golden copies, and a
private tmux server."""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from tests.tmux_term import Tmux

GOLDEN = Path(__file__).resolve().parent / "golden"
EPOCH = 1_780_000_000.0
"""A fixed 'now' for deterministic screens: files are stamped relative to it."""


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MILES_TUI_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))


def stamp(root: Path, mtime: float) -> None:
    """Give every file under root the same mtime."""
    for path in root.rglob("*"):
        os.utime(path, (mtime, mtime))


def write_demo_run(
    root: Path,
    steps: int,
    *,
    start: int = 0,
    samples: int = 16,
    seed: int = 7,
    end: float = EPOCH - 600,
    num_rollout: int | None = None,
) -> Path:
    """A demo run of `steps` steps (deterministic), written with core's writer; its newest records are
    timestamped ``end`` (the time the fixtures stamp its files with: the run's clock and the files' agree)."""
    from miles_tui.core.synth.demo import write_demo_step
    from miles_tui.core.synth.demo_batch import DemoConfig

    config = DemoConfig(samples_per_step=samples, seed=seed, num_rollout=num_rollout)
    for rid in range(start, start + steps):
        rng = np.random.default_rng(seed * 1000 + rid)
        write_demo_step(root, rid, config, rng, now=end - (start + steps - 1 - rid) * config.step_seconds)
    return root


@pytest.fixture
def demo_run(tmp_path: Path) -> Path:
    root = write_demo_run(tmp_path / "demo", 4)
    stamp(root, EPOCH - 600)
    return root


@pytest.fixture
def golden_copy(tmp_path: Path) -> Iterator[object]:
    """A factory: golden_copy('tp_dup') gives a read-only, aged copy of that case."""
    made: list[Path] = []

    def make(case: str) -> Path:
        target = tmp_path / "golden" / case
        if target in made:
            return target
        shutil.copytree(GOLDEN / case, target)
        stamp(target, EPOCH - 3600)
        for path in [target, *target.rglob("*")]:
            path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
        made.append(target)
        return target

    yield make
    for target in made:
        for path in [target, *target.rglob("*")]:
            path.chmod(path.stat().st_mode | stat.S_IWUSR)


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[Tmux]:
    """A private tmux server for one test (which is skipped where tmux is not installed); ended afterwards."""
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed")
    term = Tmux(tmp_path)
    yield term
    term.kill()
