"""The scenes of the real app that the README screenshots and the snapshot tests both show.

A scene is a run directory built deterministically (a seeded demo run, or a
golden case), a fixed clock, the keys a user presses, and what the screen must
then say in text (``shows``, ``wide`` at the larger size only, ``hides``): the
words that make it that scene, checked before any picture is compared or
written, so a baseline can never approve a broken screen. ``screenshots/generate.py``
renders each to SVG; ``tests/tui/test_snapshots.py`` compares each with its baseline.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from textual.app import App
from textual.pilot import Pilot

from miles_tui.tui.app import MilesApp
from tests.harness import EPOCH, frozen_app, screen_text, settle

GOLDEN = Path(__file__).resolve().parents[1] / "tests" / "golden"
"""The golden runs, as data in the repository (tests/golden/README.md says where they come from)."""
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
        write_demo_step(root, rid, config, np.random.default_rng([3, rid]), now=EPOCH - 600 - (steps - 1 - rid) * 30)
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
    minute ago, with prompt tokens and the TTFT and e2e histograms' sums and counts (slower under load)."""
    from datetime import UTC, datetime

    from miles_tui.core.synth.dump_files import append_jsonl, write_json

    rng = np.random.default_rng(12)
    args = {"sglang_max_running_requests": 128, "sglang_mem_fraction_static": 0.8, "colocate": False}
    write_json(root / "dashboard" / "meta.json", {"run_name": "engines", "start_ts": EPOCH - 3600, "args": args})
    start, scrapes, restart = EPOCH - 30 - 160 * 15, 161, 128
    engines = {"http://10.0.0.1:30000": ("0", "1", "2", "3"), "http://10.0.0.2:30000": (None,)}
    counters: dict[tuple[str, str | None], list[float]] = {}
    histograms: dict[tuple[str, str | None], list[float]] = {}  # prompt tokens, ttft sum, e2e sum
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
                prompt, ttft, e2e = histograms.setdefault((addr, rank), [0.0, 0.0, 0.0])
                if addr.endswith("1:30000") and i == restart:
                    done, aborted = 0.0, 0.0  # the engine restarted: its counters begin again
                    prompt, ttft, e2e = 0.0, 0.0, 0.0
                before = round(done)
                done += 0.0 if down else running * 0.2 + rng.uniform(0, 1)
                finished = max(round(done) - before, 0)
                prompt += finished * 700.0
                ttft += finished * (0.05 + running / 200)
                e2e += finished * (2.0 + running / 10)
                histograms[(addr, rank)] = [prompt, ttft, e2e]
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
                    "sglang_prompt_tokens_total": prompt,
                    "sglang_time_to_first_token_seconds_sum": round(ttft, 4),
                    "sglang_time_to_first_token_seconds_count": round(done),
                    "sglang_e2e_request_latency_seconds_sum": round(e2e, 4),
                    "sglang_e2e_request_latency_seconds_count": round(done),
                }
                labels = {} if rank is None else {"dp_rank": rank}
                records.setdefault(hour, []).extend(
                    {"ts": ts, "addr": addr, "metric": m, "labels": labels, "value": v} for m, v in gauges.items()
                )
    for hour, lines in records.items():
        append_jsonl(root / "dashboard" / "engine_series" / f"{hour}.jsonl", lines)
    _engine_gpus(root, start, scrapes, restart)
    _stamp(root, EPOCH - 30)
    return root


def _engine_gpus(root: Path, start: float, scrapes: int, restart: int) -> None:
    """The GPUs of ``build_engines``' engines: 4 on 10.0.0.1 (idle while its engine restarts), 2 on 10.0.0.2,
    sampled with the scrapes, and the topology that says which serves which."""
    from datetime import UTC, datetime

    from miles_tui.core.synth.dump_files import append_jsonl

    lanes = {("10.0.0.1", gpu): 80.0 - 15 * gpu for gpu in range(4)} | {("10.0.0.2", 0): 70.0, ("10.0.0.2", 1): 65.0}
    by_hour: dict[str, list[dict[str, object]]] = {}
    for i in range(scrapes):
        ts = start + 15 * i
        down = restart <= i < restart + 3
        for (node, gpu), util in lanes.items():
            busy = 0.0 if down and node == "10.0.0.1" else util + 10 * ((i + gpu) % 3 - 1)
            by_hour.setdefault(datetime.fromtimestamp(ts, UTC).strftime("%Y%m%d_%H"), []).append(
                {"ts": ts, "node": node, "gpu": gpu, "util": busy, "mem_mb": 60000, "power_w": 500}
            )
    for hour, lines in by_hour.items():
        append_jsonl(root / "dashboard" / "gpu_util" / f"{hour}.jsonl", lines)
    engines = [
        {"addr": "http://10.0.0.1:30000", "worker_type": "regular", "engine_rank": 0,
         "gpus": [["10.0.0.1", gpu] for gpu in range(4)], "gpu_uuids": [None] * 4},
        {"addr": "http://10.0.0.2:30000", "worker_type": "regular", "engine_rank": 1,
         "gpus": [["10.0.0.2", 0], ["10.0.0.2", 1]], "gpu_uuids": [None] * 2},
    ]  # fmt: skip
    append_jsonl(root / "dashboard" / "topology.jsonl", [{"ts": start - 60, "engines": engines}])


def build_fleet(root: Path) -> Path:
    """96 GPUs (12 nodes × 8) over two hours up to ten seconds ago, sampled every 10 s, each a training rank
    that waits, trains and updates weights every 50 s; one node runs slow and one died 20 minutes ago."""
    from tests.core.fleet_writer import write_fleet

    end = EPOCH - 10
    write_fleet(root, nodes=12, start=end - 7200, seconds=7200, dead_node=3, dead_at=end - 1200, slow_node=5)
    _stamp(root, end)
    return root


def build_demo_baseline(root: Path) -> Path:
    """A second seeded demo run to overlay on ``demo`` (another seed: its figures differ at every step), named
    ``yesterday`` in its meta.json."""
    from miles_tui.core.synth.demo import write_demo_step
    from miles_tui.core.synth.demo_batch import DemoConfig
    from miles_tui.core.synth.dump_files import write_json

    config = DemoConfig(samples_per_step=24, seed=9)
    steps = 6
    for rid in range(steps):
        write_demo_step(root, rid, config, np.random.default_rng([9, rid]), now=EPOCH - 600 - (steps - 1 - rid) * 30)
    meta = root / "dashboard" / "meta.json"
    write_json(meta, {**json.loads(meta.read_text()), "run_name": "yesterday"})
    _stamp(root, EPOCH - 600)
    return root


def build_spans(root: Path) -> Path:
    """tp_dup with reasoning: every recorded assistant answer thinks inline (``<think>``) and calls its tool
    as raw ``<tool_call>`` text, and the system prompt runs to 30 lines (what ``z`` folds)."""
    build_golden("tp_dup", root)
    system = "You are a careful assistant. Count the tokens of the prompt, then answer with the count.\n" * 30
    for sidecar in (root / "trajectory").glob("*.jsonl"):
        records = [json.loads(line) for line in sidecar.read_text().splitlines() if line.strip()]
        for record in records:
            for message in record["messages"]:
                if message["role"] == "system":
                    message["content"] = system
                elif message["role"] == "assistant" and message.get("tool_calls"):
                    call = json.dumps(message.pop("tool_calls")[0]["function"])
                    message["content"] = (
                        f"<think>The prompt is short;\nI will count it.</think><tool_call>{call}</tool_call>"
                    )
        sidecar.write_text("".join(json.dumps(r) + "\n" for r in records))
    _stamp(root, EPOCH - 3600)
    return root


def build_drift(root: Path) -> Path:
    """One step whose records use shapes this reader does not know (a future ``spec_info`` key set and
    ``weight_versions`` entries that are neither versions nor span lists), ``schema_version`` 1."""
    from tests.drift_runs import write_drift_run

    write_drift_run(root, "unknown")
    _stamp(root, EPOCH - 3600)
    return root


SYNTHETIC = {
    "engines_dp": build_engines,
    "fleet": build_fleet,
    "demo_baseline": build_demo_baseline,
    "spans": build_spans,
    "drift": build_drift,
}
"""Sources built here (beside ``demo`` and the golden cases)."""


AXIS_TICKS = "re:-[1-9][0-9]*m +-[1-9][0-9]*m"
"""Two time ticks of an engine chart's axis side by side, each minutes before the window's end (never ``-0s``)."""


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
    baselines: tuple[str, ...] = ()
    """Sources opened as baseline runs (``--baseline``), in order."""

    def build(self, workdir: Path, source: str | None = None) -> Path:
        source = source or self.source
        target = workdir / source
        if target.exists():
            return target
        if source == "demo":
            return build_demo(target)
        if source in SYNTHETIC:
            return SYNTHETIC[source](target)
        return build_golden(source, target)

    @property
    def needs_golden(self) -> bool:
        """Whether the scene is built from a golden run (tests/golden)."""
        return self.source != "demo" and self.source not in SYNTHETIC

    def app(self, workdir: Path) -> MilesApp:
        baselines = [str(self.build(workdir, source)) for source in self.baselines]
        return frozen_app(self.build(workdir), baselines=baselines)

    def driver(self) -> Callable[[Pilot[None]], Awaitable[None]]:
        async def drive(pilot: Pilot[None]) -> None:
            await settle(pilot, quiet=True)
            for key in self.keys:
                if key == "~":
                    await settle(pilot, quiet=True)
                else:
                    await pilot.press(key)
            await settle(pilot, quiet=True)
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
    Scene(
        "overview",
        "demo",
        (),
        shows=("step kind", "5 train", "zero-std", "state", "staleness", "MFU", "of 989 TFLOP/s", "wait", "groups"),
    ),
    Scene(  # the golden run's MFU is its truth's mfu_summary; it logs no wait ratio (derived) and no data buffer
        "starvation",
        "live_streams",
        (),
        shows=("mean 11.0% of 989 TFLOP/s", "11.6%", "57%–61% (1−train/step)", "buffer    not recorded by this run"),
        wide=("MFU 11.6% · mean 11.0% of 989 TFLOP/s", "starvation (bars 0–max; wait: share of each step"),
    ),
    Scene(  # records in a shape this reader does not know: one advisory naming the file, the fields, the schema
        "format_drift",
        "drift",
        (),
        shows=("unknown_format",),
        wide=("rollout_data/9.pt (step 9) has records in a shape", "update miles-tui"),
    ),
    Scene(  # ... and its cells read "unknown format", never "–"; the step's figures say what they leave out
        "format_drift_step",
        "drift",
        ("enter", "~"),
        shows=("unknown format", "6/6 samples"),
        wide=("stale 3.50 · mixed 67% (of 3: 3 unknown format)",),
    ),
    Scene("step", "demo", ("enter", "~"), shows=("step 5 train", "24/24 samples", "sample", "status", "version")),
    Scene(
        "step_groups",
        "demo",
        ("enter", "~", "g"),
        shows=("6 groups · g: back to samples", "zero-std", "resp len", "std"),
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
        shows=("step 5 · sample 123", "outlier #1/", "rollout logp", "lpΔ"),
    ),
    Scene(
        "sample_chart",
        "demo",
        ("enter", "~", "down", "down", "down", "enter", "~", "n", "c", "~"),
        shows=("step 5 · sample 123", "┌", "┤", "lpΔ"),
    ),
    Scene(
        "sample_conversation",
        "tp_dup",
        ("down", "enter", "~", "enter", "~", "t"),
        shows=("recorded conversation", "─ user", "─ assistant", "─ tool · count"),
    ),
    Scene(  # inline reasoning and raw tool calls labelled and styled apart; z folds the system prompt
        "conversation_spans",
        "spans",
        ("down", "enter", "~", "enter", "~", "t", "z"),
        shows=("[think] The prompt is short;", "[tool call] {", "[/tool call]", "▸ 30 lines", "(z: unfold)"),
        hides=("<think>", "<tool_call>"),
    ),
    Scene(  # a sample with a loss-masked tool span: its tokens struck, never coloured as low
        "sample_colour",
        "tp_dup",
        ("down", "enter", "~", "down", "enter", "~", "h"),
        shows=("step 2 · sample 25", "|lpΔ| 0.0011", "underlined: top 10% >0.0461", "struck: no value"),
        wide=("deciles of 28 trained tokens", "italic: prompt", "t17t20t96t36t31t76"),
        hides=("UNREADABLE",),
    ),
    Scene(  # every per-token series unreadable: the text says so and no token is in a decile
        "sample_colour_unreadable",
        "cp_legacy_ambiguous",
        ("enter", "~", "enter", "~", "h", "h"),
        shows=("entropy UNREADABLE for this sample", "struck: no value"),
        hides=("underlined: top 10%", "deciles of"),
    ),
    Scene(  # the cursor on the |lpΔ| column: the per-token columns are on screen at 80 columns too
        "unreadable",
        "cp_legacy_ambiguous",
        ("enter", "~", *["right"] * 16),
        shows=("2 unreadable", "UNREAD   UNREAD"),
    ),
    Scene("help", "demo", ("question_mark",), shows=("miles-tui keys", "action", "Advisories", "Outliers", "overview")),
    Scene("metrics", "live_streams", ("m", "~"), shows=("series · y: linear", "train/grad_norm", "x: train/step")),
    Scene(  # tab selects a chart: the inspector says what its metric means, as traced in miles' source
        "metrics_meaning",
        "live_streams",
        ("m", "~", "tab", "~", "right", "~"),
        shows=("global L2 norm of the gradient", "step 179"),
        wide=("train/grad_norm  global L2 norm of the gradient before clipping, one value per train step",),
    ),
    Scene(  # + zooms every chart to half the steps around the cursor: the status line names the window
        "metrics_zoom",
        "live_streams",
        ("m", "~", "right", "~", "plus", "~"),
        shows=("re:train/step \\d+–179", "(0: all)", "train/grad_norm", "@179"),
        wide=("rollout/step 30–59",),
    ),
    Scene(  # a baseline run on every chart: dimmed, its letter at its last point, named in each legend with its Δ
        "metrics_baseline",
        "demo",
        ("m", "~", "~", "right", "~"),
        shows=("baselines: a ┈ yesterday", "━ run @5", "a ┈ yesterday", "re:Δ[+-]\\d"),
        wide=("train/loss  x: train/step",),
        baselines=("demo_baseline",),
    ),
    Scene(
        "compute",
        "live_streams",
        ("u", "~"),
        shows=("last 15m · live", "· train_wait", "10.0.0.7:0", "phases", "memory", "wait/step", "61% worst of 18"),
    ),
    Scene(
        "compute_panned",
        "fleet",
        ("u", "~", "minus", "~", "left", "~"),
        shows=("30m · PANNED, ends 15m00s ago", "DEAD: 10.1.0.4", "median", "10.1.0.4:0", "phases", "memory"),
    ),
    Scene(  # the samples in flight under the phases: generating while the rollout runs, none while it trains
        "compute_trajectories",
        "demo",
        ("u", "~"),
        shows=("▓ rollout", "█ generating", "▒ tool call", "░ queued", "samples, peak"),
    ),
    Scene(  # miles' lane grammar typed at /: the dead node and four train ranks, said in the title
        "compute_lanes",
        "fleet",
        ("u", "~", "2", "~", "slash", *"node:10.1.0.4, rank:0-3", "enter", "~"),
        shows=("lanes node:10.1.0.4, rank:0-3: 12 of 96", "10.1.0.1:0", "DEAD: 10.1.0.4"),
        wide=("10.1.0.4:0",),
    ),
    Scene(  # W: the lanes slowest in update_weights, as miles' quick pick ranks them, with their mean spans
        "compute_slowest",
        "live_streams",
        ("u", "~", "W", "~"),
        shows=("slowest update_weights (mean span, miles' pick): 10.0.0.7:1 2.2s,", "10.0.0.7:1", "2 of 2"),
    ),
    Scene(  # the inspector at the cursor: every lane's figures in that bin and the processes holding its memory
        "compute_inspector",
        "demo",
        ("u", "~", "p", "~", "right_square_bracket", "~"),
        shows=("▼", "lane                  util     mem  power  phase", "processes at", "ray::MegatronTrainRayActor"),
        wide=("power", "peak"),
    ),
    Scene("engines", "live_engines", ("E", "~"), ("Engines · last 15m", "aborted"), ("2 engines",), ("-0s",)),
    Scene(
        "engines_dp",
        "engines_dp",
        ("E", "~"),
        shows=("Engines · last 15m", "↺1", AXIS_TICKS),
        wide=("4 DP ranks", "dp0"),
        hides=("-0s",),
    ),
    Scene(  # every scraped metric by kind: gauges as scraped, counters as rates, histogram sum/count as means
        "engines_metric_list",
        "engines_dp",
        ("E", "~", "l", "~"),
        shows=("enter: chart the metric", "── gauges, as scraped (5)", "sglang_cache_hit_rate  2 engines, 4 DP ranks"),
        wide=("── counters, per second (3)", "── means per interval (Δsum/Δcount) (2)", "sglang_ttft_mean_s"),
    ),
    Scene(  # TTFT of both engines on one chart: a mark and a legend entry each
        "engines_metric",
        "engines_dp",
        ("E", "~", "l", "~", "end", "enter", "~"),
        shows=("sglang_ttft_mean_s", "re:1 10\\.0\\.0\\.1:30000 \\d+\\.\\dms  2 10\\.0\\.0\\.2:30000", AXIS_TICKS),
        wide=("2 engines (d: DP ranks of one) · means per interval (Δsum/Δcount)", "now"),
        hides=("-0s",),
    ),
    Scene(  # the DP ranks of one engine, rank 1 hidden
        "engines_metric_dp",
        "engines_dp",
        ("E", "~", "l", "~", "end", "enter", "~", "d", "~", "2", "~"),
        shows=("DP ranks of 10.0.0.1:30000", "2 dp1 hidden", AXIS_TICKS),
        wide=("1 dp0 ", "4 dp3 "),
        hides=("-0s",),
    ),
    Scene(  # each engine's running requests over the GPU lanes that serve it (topology.jsonl)
        "compute_engines",
        "engines_dp",
        ("u", "~"),
        shows=("⚙ 10.0.0.1:30", "⚙ 10.0.0.2:30", "run 48 · 10.0.0.1:0-3", "run 25 · 10.0.0.2:0,1"),
        wide=("⚙ 10.0.0.1:30000",),
    ),
    Scene(
        "scatter",
        "demo",
        ("enter", "~", "p", "~"),
        shows=("step 5 · reward vs response length", "◆", "× truncated at the response cap", "(enter: open)"),
    ),
    Scene(  # + keeps the response lengths around the cursor's sample; the points left out are counted
        "scatter_zoom",
        "demo",
        ("enter", "~", "p", "~", "plus", "~"),
        shows=("re:step 5 · reward vs response length · \\d+ samples · lengths \\d+–\\d+, \\d+ outside", "◆"),
    ),
    Scene(  # a step's samples as lifecycle lanes on one axis, to the column where the train step consumed them
        "anatomy",
        "demo",
        ("enter", "~", "a", "~"),
        shows=("Batch anatomy · step 5 · 24 of 24 samples", "sorted by submit", "+0s", "█", "│", "generating"),
        wide=("tool call", "queued", "consumed by the train step", "turns·tools·reward", "completed"),
    ),
    Scene(  # Enter on a lane: the sample, its own lifecycle under its chips
        "anatomy_sample",
        "demo",
        ("enter", "~", "a", "~", "down", "enter", "~"),
        shows=("step 5 · sample", "lifecycle ░"),
        wide=("queued ", "generating ", "consumed by step 5 after"),
    ),
    Scene("outliers", "demo", ("O", "~"), shows=("outliers · step 5", "|lpΔ|", "ratio", "entropy", "top ")),
    Scene("compare", "demo", ("c", "~"), shows=("compare · A = step 4  B = step 5", "reward Δ", "slots, not prompts")),
    Scene("advisories", "degenerate", (), shows=("[WARN]", "all_rewards_zero", "advisories (2, 1 cleared)")),
)
