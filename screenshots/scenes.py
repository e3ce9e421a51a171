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


def build_engines(root: Path) -> Path:
    """A run of engine telemetry only: a dp-attention engine (4 ranks, load piled on two) that restarts
    eight minutes before the end, beside a plain engine; scraped every 15 s for 40 minutes up to half a
    minute ago."""
    from datetime import UTC, datetime

    from miles_tui.core.synth.dump_files import append_jsonl, write_json

    rng = np.random.default_rng(12)
    args = {"sglang_max_running_requests": 128, "sglang_mem_fraction_static": 0.8, "colocate": False}
    write_json(root / "dashboard" / "meta.json", {"run_name": "engines", "start_ts": EPOCH - 3600, "args": args})
    start, scrapes, restart = EPOCH - 30 - 160 * 15, 161, 128
    engines = {"http://10.0.0.1:30000": ("0", "1", "2", "3"), "http://10.0.0.2:30000": (None,)}
    counters: dict[tuple[str, str | None], list[float]] = {}
    records: dict[str, list[dict[str, object]]] = {}
    for i in range(scrapes):
        ts = start + 15 * i
        hour = datetime.fromtimestamp(ts, UTC).strftime("%Y%m%d_%H")
        for addr, ranks in engines.items():
            for rank in ranks:
                load = {"0": 22.0, "1": 18.0, "2": 3.0, "3": 1.0}.get(rank or "", 30.0)
                down = addr.endswith("1:30000") and restart <= i < restart + 3  # coming back up
                running = 0.0 if down else max(0.0, load + rng.normal(0, load / 6))
                done, aborted = counters.setdefault((addr, rank), [0.0, 0.0])
                if addr.endswith("1:30000") and i == restart:
                    done, aborted = 0.0, 0.0  # the engine restarted: its counters begin again
                done += 0.0 if down else running * 0.2 + rng.uniform(0, 1)
                aborted += 0.0 if down else float(rng.uniform() < 0.05 + 0.1 * (rank == "0"))
                counters[(addr, rank)] = [done, aborted]
                gauges = {
                    "sglang_num_running_reqs": round(running),
                    "sglang_num_queue_reqs": 0.0 if down else round(max(0.0, running / 3 + rng.normal(0, 2))),
                    "sglang_token_usage": 0.0 if down else round(min(0.99, 0.5 + running / 60), 4),
                    "sglang_cache_hit_rate": round(0.35 + rng.normal(0, 0.03), 4),
                    "sglang_gen_throughput": 0.0 if down else round(running * 38 + rng.normal(0, 40), 1),
                    "sglang_num_requests_total": round(done),
                    "sglang_num_aborted_requests_total": aborted,
                }
                labels = {} if rank is None else {"dp_rank": rank}
                records.setdefault(hour, []).extend(
                    {"ts": ts, "addr": addr, "metric": m, "labels": labels, "value": v} for m, v in gauges.items()
                )
    for hour, lines in records.items():
        append_jsonl(root / "dashboard" / "engine_series" / f"{hour}.jsonl", lines)
    _stamp(root, EPOCH - 30)
    return root


def build_fleet(root: Path) -> Path:
    """96 GPUs (12 nodes × 8) over two hours up to ten seconds ago, sampled every 10 s, each a training rank
    that waits, trains and updates weights every 50 s; one node runs slow and one died 20 minutes ago."""
    from tests.core.fleet_writer import write_fleet

    end = EPOCH - 10
    write_fleet(root, nodes=12, start=end - 7200, seconds=7200, dead_node=3, dead_at=end - 1200, slow_node=5)
    _stamp(root, end)
    return root


SYNTHETIC = {"engines_dp": build_engines, "fleet": build_fleet}
"""Sources built here (beside ``demo`` and the golden cases)."""


@dataclass(frozen=True)
class Scene:
    """One screen state to show."""

    name: str
    """File stem of the screenshot / snapshot."""
    source: str
    """'demo' or a golden case name."""
    keys: tuple[str, ...]
    """Keys pressed after the first poll; '~' settles (waits for workers)."""
    expect: tuple[str, ...] = ()
    """Texts the screen must show: what makes it this scene (checked by the snapshot test at every size)."""

    def build(self, workdir: Path) -> Path:
        target = workdir / self.source
        if target.exists():
            return target
        if self.source == "demo":
            return build_demo(target)
        if self.source in SYNTHETIC:
            return SYNTHETIC[self.source](target)
        return build_golden(self.source, target)

    @property
    def needs_golden(self) -> bool:
        """Whether the scene is built from ../shared/golden."""
        return self.source != "demo" and self.source not in SYNTHETIC

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
    Scene("compute", "live_streams", ("u", "~"), ("last 15m · live", "· train_wait", "10.0.0.7:0", "phases", "memory")),
    Scene(
        "compute_panned",
        "fleet",
        ("u", "~", "minus", "~", "left", "~"),
        ("30m · PANNED, ends 15m00s ago", "DEAD: 10.1.0.4", "median", "10.1.0.4:0", "phases", "memory"),
    ),
    Scene("engines", "live_engines", ("E", "~")),
    Scene("engines_dp", "engines_dp", ("E", "~")),
    Scene("outliers", "demo", ("O", "~")),
    Scene("compare", "demo", ("c", "~")),
    Scene("advisories", "degenerate", ()),
)
