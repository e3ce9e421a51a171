"""A long miles run's ``--dump-details`` folder at miles' own rates, for bench/week_run.py (issue 23).

What miles' dashboard writer does (``miles/dashboard/store.py``, ``gpu_sampler.py``,
``sglang_scraper.py``, ``hooks.py``, ``collector.py``), and so what this writes:

- ``dashboard/meta.json``: ``{run_name, start_ts, args, schema_version}`` with ``indent=1``; ``args`` carries
  ``num_rollout`` (the planned steps, more than were done) beside miles' snapshot keys;
- hourly partitions ``{stream}/{YYYYMMDD_HH}.jsonl`` (UTC) of ``gpu_util``, ``phases``, ``engine_series``
  and ``gpu_processes``, compact ``json.dumps`` lines in the dataclass field order; a phase is keyed by
  its END hour, an open marker (``t1 = -1.0``) by its start hour;
- ``gpu_util``: every GPU once a second (``--dashboard-gpu-sample-interval 1.0``); a node's sampler stamps
  one ``time.time()`` per tick for all its GPUs and pushes a batch every 5 s, so a file holds runs of
  5 ticks x 8 GPUs node by node, up to 5 s out of order across nodes;
- ``gpu_processes``: every 5 s per GPU, one line per process holding memory (colocated: the train actor
  and the sglang scheduler);
- ``phases``: every train rank's Timer emits an open marker when a phase starts and a closing record
  (same name/t0) when it ends, closings batched up to 2 s; one 60 s cycle (``train_wait``,
  ``actor_train``, ``update_weights``) per rank, and the rollout manager's ``rollout`` (no GPUs, rank -1);
- ``engine_series``: each engine scraped every 15 s (the issue's rate; miles' default is 2 s), float
  values, ``labels`` ``{}``;
- ``topology.jsonl`` (a snapshot at start, another when the dropped node's engine is gone),
  ``lane_catalog.json``, ``metrics.jsonl`` (a rollout and a train record per step, with
  bench/telemetry_gen.py's record makers), and ``rollout_data/`` + ``train_data/`` of the last few steps
  (the project's own writer).

Shapes that vary, so no reader is tuned to one generator's bytes:

- the first ``legacy_hours`` of gpu_util are a v1 flat ``gpu_util.jsonl`` (spaced ``json.dumps`` default
  separators, another field order: ``node, gpu, ts, ...``);
- one hour a day of gpu_util has float values (``97.0``) and ts rounded to the millisecond;
- the AMD node's records carry extra fields (``vendor``, ``partition``) and ``power_w`` 0 when socket power
  is unreadable. NB: miles' AMD sampler at HEAD (31f1ca961) writes the same six fields as NVML; the extra
  fields stand for a newer or patched writer, which a reader must ignore;
- a node drops out on day 3: its GPUs, processes and engine go silent and its ranks' phases stay open;
- the newest hour is still being written: gpu_util, phases and metrics.jsonl end in a partial line.

Generation is vectorised (numpy per hour of ticks, one f-string per line) and cached: :func:`ensure`
reuses a folder whose marker (``week_params.json``) names the same parameters.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import random
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parent))

import telemetry_gen  # bench/ is this module's folder

GENERATOR_VERSION = 1
"""Bumped whenever what is written changes: a cached folder of another version is rebuilt."""
MARKER = "week_params.json"
GPUS_PER_NODE = 8
GPU_INTERVAL = 1.0
PUSH_TICKS = 5
"""A sampler pushes its buffer every 5 s: 5 ticks of its node's GPUs in a row."""
PROCESS_EVERY = 5
"""Ticks between per-process samples (miles' PROCESS_SAMPLE_INTERVAL_SECONDS)."""
SCRAPE_INTERVAL = 15.0
CYCLE_SECONDS = 60.0
TRAIN_PHASES = ("train_wait", "actor_train", "update_weights")
ENGINE_METRICS = (
    "sglang_num_running_reqs", "sglang_num_queue_reqs", "sglang_token_usage", "sglang_cache_hit_rate",
    "sglang_gen_throughput", "sglang_num_requests_total", "sglang_num_aborted_requests_total",
)  # fmt: skip
RUN_NAME = "qwen3-30b-a3b-grpo-week"
"""meta.json's run_name: not the folder's name, so the header showing it proves meta.json was read."""
HOUR = 3600

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Params:
    """What a generated run depends on (the marker file holds these)."""

    nodes: int = 8
    days: float = 7.0
    seed: int = 23
    legacy_hours: float = 2.0
    drop_node: int = 5
    """Index of the node that drops out (-1: none)."""
    drop_day: float = 2.4
    """When it drops, in days since the start (2.4: on day 3)."""
    amd_node: int = 7
    """Index of the node whose records carry AMD's extra fields (-1: none)."""
    processes: bool = True
    step_files: int = 4
    """rollout_data/ steps written (the newest ones)."""
    version: int = GENERATOR_VERSION

    @property
    def gpus(self) -> int:
        return self.nodes * GPUS_PER_NODE

    def folder_name(self) -> str:
        return f"run-{self.nodes}n-{self.days:g}d"


@dataclass
class StreamSize:
    records: int = 0
    bytes: int = 0
    files: int = 0


@dataclass
class Generated:
    """A generated run: where, when, and what each stream holds."""

    run: str
    start_ts: float
    end_ts: float
    steps: int
    params: dict[str, Any]
    streams: dict[str, StreamSize] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def path(self) -> Path:
        return Path(self.run)

    @classmethod
    def load(cls, data: dict[str, Any]) -> Generated:
        streams = {k: StreamSize(**v) for k, v in data.pop("streams").items()}
        return cls(**data, streams=streams)


def node_name(index: int) -> str:
    return f"10.0.{index // 250}.{index % 250 + 11}"


def hour_key(hour: int) -> str:
    return time.strftime("%Y%m%d_%H", time.gmtime(hour * HOUR))


class HourFiles:
    """Appends lines to ``{folder}/{YYYYMMDD_HH}.jsonl`` and counts what went where."""

    def __init__(self, folder: Path, size: StreamSize) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder, self.size = folder, size
        self.seen: set[int] = set()

    def write(self, hour: int, text: str, records: int) -> None:
        with open(self.folder / f"{hour_key(hour)}.jsonl", "a", encoding="utf-8") as out:
            out.write(text)
        self.seen.add(hour)
        self.size.records += records
        self.size.bytes += len(text)
        self.size.files = len(self.seen)

    def newest(self) -> Path:
        return self.folder / f"{hour_key(max(self.seen))}.jsonl"


def by_hour(times: FloatArray) -> list[tuple[int, npt.NDArray[np.bool_]]]:
    """(hour, mask) for each UTC hour the times fall in."""
    hours = np.floor(times / HOUR).astype(np.int64)
    return [(int(h), hours == h) for h in np.unique(hours)]


@dataclass
class Cycles:
    """The training cycles: start, end of train_wait, end of actor_train (update_weights runs to the next start)."""

    start: FloatArray
    wait_end: FloatArray
    train_end: FloatArray

    @property
    def end(self) -> FloatArray:
        return np.append(self.start[1:], self.start[-1] + CYCLE_SECONDS)

    def phase_at(self, ts: FloatArray) -> IntArray:
        """0 before the first cycle (initialising), 1 train_wait (rollout), 2 actor_train, 3 update_weights."""
        i = np.searchsorted(self.start, ts, side="right") - 1
        ok = i >= 0
        j = np.clip(i, 0, None)
        phase = np.where(ts < self.wait_end[j], 1, np.where(ts < self.train_end[j], 2, 3))
        return np.where(ok, phase, 0).astype(np.int64)


def make_cycles(rng: np.random.Generator, start: float, end: float) -> Cycles:
    lengths = rng.uniform(CYCLE_SECONDS - 4, CYCLE_SECONDS + 4, int((end - start) / (CYCLE_SECONDS - 4)) + 2)
    starts = start + 90.0 + np.concatenate(([0.0], np.cumsum(lengths[:-1])))
    starts = starts[starts < end]
    lengths = lengths[: len(starts)]
    wait_end = starts + lengths * rng.uniform(0.55, 0.65, len(starts))
    train_end = wait_end + lengths * rng.uniform(0.25, 0.3, len(starts))
    return Cycles(starts, wait_end, train_end)


# -- gpu_util and gpu_processes ---------------------------------------------------------------------------


UTIL_BY_PHASE = np.array([2.0, 78.0, 96.0, 35.0])
MEM_BY_PHASE = np.array([1200.0, 71000.0, 76500.0, 52000.0])


class GpuWriter:
    """gpu_util (and gpu_processes) for every node, an hour of ticks at a time."""

    def __init__(self, params: Params, dash: Path, start: float, end: float, cycles: Cycles, gen: Generated) -> None:
        self.p, self.start, self.end, self.cycles = params, start, end, cycles
        self.drop_at = start + params.drop_day * 86400 if params.drop_node >= 0 else math.inf
        self.legacy_end = start + params.legacy_hours * HOUR
        gen.streams["gpu_util"] = StreamSize()
        self.files = HourFiles(dash / "gpu_util", gen.streams["gpu_util"])
        self.legacy = dash / "gpu_util.jsonl"
        gen.streams["gpu_util.jsonl (legacy)"] = self.legacy_size = StreamSize(files=1)
        self.proc_files: HourFiles | None = None
        if params.processes:
            gen.streams["gpu_processes"] = StreamSize()
            self.proc_files = HourFiles(dash / "gpu_processes", gen.streams["gpu_processes"])
        lanes = [(node_name(n), g) for n in range(params.nodes) for g in range(GPUS_PER_NODE)]
        amd = {k for k, (n, _) in enumerate(lanes) if params.amd_node >= 0 and n == node_name(params.amd_node)}
        self.mid = [f',"node":"{n}","gpu":{g},"util":' for n, g in lanes]
        self.ext = [',"vendor":"amd","partition":"SPX"}\n' if k in amd else "}\n" for k in range(len(lanes))]
        self.amd = np.array([k in amd for k in range(len(lanes))])
        self.legacy_mid = [f'{{"node": "{n}", "gpu": {g}, "ts": ' for n, g in lanes]
        self.proc_mid: list[str] = []
        for k, (n, g) in enumerate(lanes):
            self.proc_mid.append(f',"node":"{n}","gpu":{g},"pid":{31000 + 17 * k},"name":"ray::MegatronTrainRayActor",'
                                 '"mem_mb":')  # fmt: skip
            self.proc_mid.append(f',"node":"{n}","gpu":{g},"pid":{52000 + 23 * k},"name":"sglang::scheduler_TP{g}",'
                                 '"mem_mb":')  # fmt: skip
        self.offsets = np.random.default_rng(params.seed).uniform(0, 1, params.nodes)
        self.slow_lane = 3  # one GPU that lags the fleet: the "worst lanes" list has a clear first

    def run(self) -> None:
        ticks = int((self.end - self.start) / GPU_INTERVAL)
        chunk = HOUR - HOUR % PUSH_TICKS
        for index, first in enumerate(range(0, ticks, chunk)):
            self.chunk(np.random.default_rng([self.p.seed, 1, index]), first, min(first + chunk, ticks))

    def chunk(self, rng: np.random.Generator, first: int, last: int) -> None:
        nodes, g = self.p.nodes, GPUS_PER_NODE
        count = last - first
        windows = math.ceil(count / PUSH_TICKS)
        span = windows * PUSH_TICKS
        k = np.arange(first, first + span, dtype=np.float64)
        ts = self.start + k[None, :] * GPU_INTERVAL + self.offsets[:, None] + rng.normal(0, 0.003, (nodes, span))
        ts = np.round(ts, 7)  # time.time()'s resolution as repr shows it
        phase = self.cycles.phase_at(ts)  # (nodes, span)
        util = UTIL_BY_PHASE[phase][:, :, None] + rng.normal(0, 4, (nodes, span, g))
        util[:, :, self.slow_lane] -= 25 * (phase == 2)
        util = np.clip(util, 0, 100).round()
        mem = MEM_BY_PHASE[phase][:, :, None] + rng.normal(0, 300, (nodes, span, g))
        power = 90 + util * 6.1 + rng.normal(0, 15, (nodes, span, g))
        # the push order: windows of 5 ticks, node after node (a random order per window), 8 GPUs a tick
        order = np.argsort(rng.random((windows, nodes)), axis=1)

        def arrange(a: npt.NDArray[Any]) -> npt.NDArray[Any]:
            shaped = a.reshape(nodes, windows, PUSH_TICKS, -1).transpose(1, 0, 2, 3)
            return np.take_along_axis(shaped, order[:, :, None, None], axis=1).reshape(-1)

        lane = np.arange(nodes * g).reshape(nodes, 1, g).repeat(span, axis=1)
        flat_ts = arrange(np.repeat(ts[:, :, None], g, axis=2))
        flat_k, flat_lane = arrange(np.repeat(k[None, :, None].repeat(nodes, 0), g, axis=2)), arrange(lane)
        flat_util, flat_mem, flat_power = arrange(util), arrange(mem), arrange(power)
        amd = self.amd[flat_lane]
        flat_mem = np.where(amd, flat_mem * 2.1, flat_mem)  # MI300X: 192 GB
        flat_power = np.where(amd & (rng.random(len(flat_power)) < 0.2), 0, flat_power)  # socket power unreadable
        alive = (flat_k < last) & ~((flat_lane // g == self.p.drop_node) & (flat_ts >= self.drop_at))
        alive &= flat_ts < self.end
        legacy = flat_ts < self.legacy_end
        self._write_util(flat_ts, flat_lane, flat_util, flat_mem, flat_power, alive & legacy, alive & ~legacy)
        if self.proc_files is not None:
            sampled = alive & ~legacy & (flat_k % PROCESS_EVERY == 0)
            self._write_processes(rng, flat_ts[sampled] + 0.004, flat_lane[sampled], flat_mem[sampled])

    def _write_util(
        self,
        ts: FloatArray,
        lane: IntArray,
        util: FloatArray,
        mem: FloatArray,
        power: FloatArray,
        legacy: npt.NDArray[np.bool_],
        parted: npt.NDArray[np.bool_],
    ) -> None:
        if legacy.any():
            mids = self.legacy_mid
            text = "".join([
                f'{mids[n]}{t!r}, "util": {u}, "mem_mb": {m}, "power_w": {p}}}\n'
                for t, n, u, m, p in zip(
                    ts[legacy].tolist(), lane[legacy].tolist(), util[legacy].astype(np.int64).tolist(),
                    mem[legacy].astype(np.int64).tolist(), power[legacy].astype(np.int64).tolist(), strict=True,
                )
            ])  # fmt: skip
            with open(self.legacy, "a", encoding="utf-8") as out:
                out.write(text)
            self.legacy_size.records += int(legacy.sum())
            self.legacy_size.bytes += len(text)
        for hour, mask in by_hour(ts[parted]):
            pick = np.flatnonzero(parted)[mask]
            floats = hour % 24 == 13  # one hour a day written by a sampler that logs floats
            values: Sequence[list[Any]]
            if floats:
                values = (np.round(ts[pick], 3).tolist(), util[pick].tolist(), np.round(mem[pick]).tolist(),
                          np.round(power[pick]).tolist())  # fmt: skip
            else:
                values = (ts[pick].tolist(), util[pick].astype(np.int64).tolist(), mem[pick].astype(np.int64).tolist(),
                          power[pick].astype(np.int64).tolist())  # fmt: skip
            mids, ext = self.mid, self.ext
            text = "".join([
                f'{{"ts":{t!r}{mids[n]}{u!r},"mem_mb":{m!r},"power_w":{p!r}{ext[n]}'
                for t, n, u, m, p in zip(values[0], lane[pick].tolist(), *values[1:], strict=True)
            ])  # fmt: skip
            self.files.write(hour, text, len(pick))

    def _write_processes(self, rng: np.random.Generator, ts: FloatArray, lane: IntArray, mem: FloatArray) -> None:
        assert self.proc_files is not None
        train = np.maximum(mem - 48000 + rng.normal(0, 200, len(mem)), 900).astype(np.int64)
        engine = np.full(len(mem), 47200, dtype=np.int64)
        # two lines a GPU: the train actor, then the sglang scheduler
        t2 = np.repeat(ts, 2)
        mid2 = np.stack([2 * lane, 2 * lane + 1], axis=1).reshape(-1)
        mem2 = np.stack([train, engine], axis=1).reshape(-1)
        mids = self.proc_mid
        for hour, mask in by_hour(t2):
            text = "".join([
                f'{{"ts":{t!r}{mids[m]}{v}}}\n'
                for t, m, v in zip(t2[mask].tolist(), mid2[mask].tolist(), mem2[mask].tolist(), strict=True)
            ])  # fmt: skip
            self.proc_files.write(hour, text, int(mask.sum()))


# -- phases ----------------------------------------------------------------------------------------------


def write_phases(params: Params, dash: Path, start: float, end: float, cycles: Cycles, gen: Generated) -> Path:
    """Open markers and closing records of every rank's phases (and the rollout manager's); the newest file."""
    gen.streams["phases"] = size = StreamSize()
    files = HourFiles(dash / "phases", size)
    ranks = params.gpus
    drop_at = start + params.drop_day * 86400 if params.drop_node >= 0 else math.inf
    mids = [f',"node":"{node_name(r // GPUS_PER_NODE)}","gpus":[{r % GPUS_PER_NODE}],"rank":{r},"role":"train"}}\n'
            for r in range(ranks)]  # fmt: skip
    mids.append(f',"node":"{node_name(0)}","gpus":[],"rank":-1,"role":"rollout_manager"}}\n')
    names = (*TRAIN_PHASES, "rollout")
    n = len(cycles.start)
    per_chunk = 120  # cycles: about two hours
    for index, c0 in enumerate(range(0, n, per_chunk)):
        rng = np.random.default_rng([params.seed, 2, index])
        c1 = min(c0 + per_chunk, n)
        bounds = np.stack([cycles.start[c0:c1], cycles.wait_end[c0:c1], cycles.train_end[c0:c1], cycles.end[c0:c1]])
        m = c1 - c0
        # (cycles, ranks, phases): each rank starts a phase a few ms after the fleet's boundary
        t0 = bounds[:3].T[:, None, :] + rng.uniform(0.001, 0.05, (m, ranks, 3))
        t1 = bounds[1:].T[:, None, :] + rng.uniform(0.001, 0.05, (m, ranks, 3))
        rank = np.broadcast_to(np.arange(ranks)[None, :, None], (m, ranks, 3))
        name = np.broadcast_to(np.arange(3)[None, None, :], (m, ranks, 3))
        rt0 = bounds[0] + rng.uniform(0.01, 0.2, m)
        rt1 = bounds[1] - rng.uniform(0.1, 0.5, m)
        all_t0 = np.concatenate([t0.reshape(-1), rt0])
        all_t1 = np.concatenate([t1.reshape(-1), rt1])
        all_rank = np.concatenate([rank.reshape(-1), np.full(m, ranks)])
        all_name = np.concatenate([name.reshape(-1), np.full(m, 3)])
        cutoff = np.where(all_rank // GPUS_PER_NODE == params.drop_node, min(drop_at, end), end)
        delay = rng.uniform(0.0, 2.0, len(all_t1))  # closings wait for a batch (64 events or 2 s)
        opened = all_t0 < cutoff
        closed = all_t1 + delay < cutoff
        t0s = np.round(np.concatenate([all_t0[opened], all_t0[closed]]), 7)
        t1s = np.concatenate([np.full(int(opened.sum()), -1.0), np.round(all_t1[closed], 7)])
        emitted = np.concatenate([all_t0[opened], all_t1[closed] + delay[closed]])
        key_ts = np.where(t1s < 0, t0s, t1s)  # phases by END hour, open markers by their start
        who = np.concatenate([all_rank[opened], all_rank[closed]])
        what = np.concatenate([all_name[opened], all_name[closed]])
        order = np.argsort(emitted, kind="stable")
        t0s, t1s, key_ts, who, what = t0s[order], t1s[order], key_ts[order], who[order], what[order]
        for hour, mask in by_hour(key_ts):
            text = "".join([
                f'{{"name":"{names[w]}","t0":{a!r},"t1":{b!r}{mids[r]}'
                for w, a, b, r in zip(what[mask].tolist(), t0s[mask].tolist(), t1s[mask].tolist(),
                                      who[mask].tolist(), strict=True)
            ])  # fmt: skip
            files.write(hour, text, int(mask.sum()))
    return files.newest()


# -- engine_series ---------------------------------------------------------------------------------------


def write_engines(params: Params, dash: Path, start: float, end: float, cycles: Cycles, gen: Generated) -> None:
    gen.streams["engine_series"] = size = StreamSize()
    files = HourFiles(dash / "engine_series", size)
    engines = params.nodes  # one engine a node (tp 8)
    metrics = len(ENGINE_METRICS)
    mids = [f',"addr":"http://{node_name(e)}:30000","metric":"{name}","labels":{{}},"value":'
            for e in range(engines) for name in ENGINE_METRICS]  # fmt: skip
    drop_at = start + params.drop_day * 86400 if params.drop_node >= 0 else math.inf
    scrapes = np.arange(start + 60.0, end, SCRAPE_INTERVAL)
    totals = np.zeros((engines, 2))
    per_chunk = 960  # four hours of scrapes
    for index, s0 in enumerate(range(0, len(scrapes), per_chunk)):
        rng = np.random.default_rng([params.seed, 3, index])
        ts = np.round(scrapes[s0 : s0 + per_chunk] + rng.uniform(0, 0.3, len(scrapes[s0 : s0 + per_chunk])), 7)
        j = len(ts)
        busy = (cycles.phase_at(ts) == 1)[:, None]  # generating: the engines hold the GPUs
        running = np.where(busy, rng.integers(40, 129, (j, engines)), 0).astype(np.float64)
        queue = np.where(busy, rng.integers(0, 300, (j, engines)), 0).astype(np.float64)
        usage = np.where(busy, np.round(rng.uniform(0.45, 0.97, (j, engines)), 4), 0.0)
        hits = np.round(rng.uniform(0.2, 0.65, (j, engines)), 4)
        throughput = np.where(busy, np.round(rng.uniform(1800, 9200, (j, engines)), 2), 0.0)
        requests = totals[:, 0] + np.cumsum(np.where(busy, rng.integers(20, 90, (j, engines)), 0), axis=0)
        aborted = totals[:, 1] + np.cumsum(rng.random((j, engines)) < 0.01, axis=0)
        totals = np.stack([requests[-1], aborted[-1]], axis=1)
        values = np.stack([running, queue, usage, hits, throughput, requests.astype(np.float64),
                           aborted.astype(np.float64)], axis=2)  # (scrapes, engines, metrics)  # fmt: skip
        live = ~((np.arange(engines)[None, :] == params.drop_node) & (ts[:, None] >= drop_at))
        live = np.repeat(live[:, :, None], metrics, axis=2).reshape(-1)
        flat_ts = np.repeat(ts, engines * metrics)[live]
        flat_mid = np.tile(np.arange(engines * metrics), j)[live]
        flat_v = values.reshape(-1)[live]
        for hour, mask in by_hour(flat_ts):
            text = "".join([
                f'{{"ts":{t!r}{mids[m]}{v!r}}}\n'
                for t, m, v in zip(flat_ts[mask].tolist(), flat_mid[mask].tolist(), flat_v[mask].tolist(), strict=True)
            ])  # fmt: skip
            files.write(hour, text, int(mask.sum()))


# -- metrics, meta, topology, steps ------------------------------------------------------------------------


def write_metrics(params: Params, dash: Path, cycles: Cycles, end: float, gen: Generated) -> None:
    """A rollout record when a cycle's rollout ends and a train record when its training ends."""
    rng = random.Random(params.seed)
    lines = []
    for step, (wait_end, train_end) in enumerate(zip(cycles.wait_end.tolist(), cycles.train_end.tolist(),
                                                     strict=True)):  # fmt: skip
        if train_end + 1 >= end:
            break
        rollout = telemetry_gen._rollout(rng, step, rng.randrange(telemetry_gen.NULL_EVERY) == 0)
        lines.append(json.dumps({"ts": wait_end + 0.8, "step_key": "rollout/step", "step": step, "metrics": rollout},
                                separators=(",", ":")))  # fmt: skip
        train = telemetry_gen._train(rng, step, step > len(cycles.start) * 0.6, rng.random() < 0.002)
        lines.append(json.dumps({"ts": train_end + 0.6, "step_key": "train/step", "step": step, "metrics": train},
                                separators=(",", ":")))  # fmt: skip
    last = len(lines) // 2
    record = {"ts": end, "step_key": "rollout/step", "step": last, "metrics": telemetry_gen._rollout(rng, last, False)}
    partial = json.dumps(record, separators=(",", ":"))
    text = "\n".join(lines) + "\n" + partial[: len(partial) // 2]
    (dash / "metrics.jsonl").write_text(text, encoding="utf-8")
    gen.streams["metrics.jsonl"] = StreamSize(len(lines), len(text), 1)
    gen.steps = len(lines) // 2


def write_meta(params: Params, dash: Path, start: float, steps: int) -> None:
    planned = int(math.ceil(steps * 1.5 / 1000) * 1000)
    args = {
        "wandb_project": "miles-week", "wandb_group": "issue-23", "colocate": True, "num_gpus_per_node": 8,
        "actor_num_nodes": params.nodes, "actor_num_gpus_per_node": 8, "rollout_num_gpus": params.gpus,
        "rollout_num_gpus_per_engine": 8, "rollout_batch_size": 64, "n_samples_per_prompt": 8,
        "rollout_max_response_len": 8192, "hf_checkpoint": "/models/Qwen3-30B-A3B", "num_rollout": planned,
        "sglang_mem_fraction_static": 0.7, "use_miles_router": False,
    }  # fmt: skip
    meta = {"run_name": RUN_NAME, "start_ts": start, "args": args, "schema_version": 1}
    (dash / "meta.json").write_text(json.dumps(meta, indent=1))


def write_topology(params: Params, dash: Path, start: float, end: float, gen: Generated) -> None:
    def engine(e: int) -> dict[str, Any]:
        gpus = [[node_name(e), g] for g in range(GPUS_PER_NODE)]
        uuids = [f"GPU-{e:04x}{g:04x}-5f3c-4a1e-9d2b-{e * 8 + g:012x}" for g in range(GPUS_PER_NODE)]
        return {"addr": f"http://{node_name(e)}:30000", "worker_type": "regular", "engine_rank": e, "gpus": gpus,
                "gpu_uuids": uuids}  # fmt: skip

    snapshots = [{"ts": start + 75.0, "engines": [engine(e) for e in range(params.nodes)]}]
    drop_at = start + params.drop_day * 86400
    if params.drop_node >= 0 and drop_at + 95.0 < end:
        alive = [engine(e) for e in range(params.nodes) if e != params.drop_node]
        snapshots.append({"ts": drop_at + 95.0, "engines": alive})
    text = "".join(json.dumps(s, separators=(",", ":")) + "\n" for s in snapshots)
    (dash / "topology.jsonl").write_text(text)
    lanes = {
        f"{node_name(n)}:{g}": {"ranks": [n * 8 + g], "engine_addrs": [f"http://{node_name(n)}:30000"],
                                "roles": ["rollout", "train"]}
        for n in range(params.nodes) for g in range(GPUS_PER_NODE)
    }  # fmt: skip
    (dash / "lane_catalog.json").write_text(json.dumps({"version": 1, "lanes": lanes}))
    gen.streams["topology.jsonl"] = StreamSize(len(snapshots), len(text), 1)


def write_steps(run: Path, first: int, count: int, stamp: float) -> None:
    """The newest ``count`` steps as small dumps (8 samples, dp1) with the project's writer."""
    # imported by name: the editable install's import hook is invisible to mypy
    make_sample = importlib.import_module("miles_tui.core.synth.dump_files").make_sample
    parallel_layout = importlib.import_module("miles_tui.core.synth.layout").ParallelLayout
    write_step = importlib.import_module("miles_tui.core.synth.writer").write_step

    for rid in range(first, first + count):
        rng = np.random.default_rng(rid)
        samples: list[dict[str, Any]] = []
        per_token: dict[str, list[npt.NDArray[np.float32]]] = {
            k: [] for k in ("log_probs", "entropy", "advantages", "returns")
        }
        for i in range(8):
            length, prompt = int(rng.integers(16, 64)), int(rng.integers(8, 32))
            rollout_lp = (-rng.random(length)).astype(np.float32)
            samples.append(make_sample(
                index=rid * 8 + i, group_index=i // 4, tokens=rng.integers(0, 1000, prompt + length).tolist(),
                response_length=length, reward=float(rng.integers(0, 2)), weight_versions=[str(max(rid - 1, 0))],
                rollout_log_probs=rollout_lp.tolist(), status="completed",
            ))  # fmt: skip
            per_token["log_probs"].append(rollout_lp + rng.normal(0, 0.02, length).astype(np.float32))
            per_token["entropy"].append(rng.random(length).astype(np.float32))
            per_token["advantages"].append(np.zeros(length, np.float32))
            per_token["returns"].append(np.zeros(length, np.float32))
        write_step(run, rid, samples, per_token, parallel_layout.parse("dp1 cp1 tp1 pp1"))
    for folder in ("rollout_data", "train_data"):
        for path in (run / folder).rglob("*"):
            os.utime(path, (stamp, stamp))


def cut_last_line(path: Path, template: str) -> None:
    """End ``path`` in half a record (the writer was cut mid-line)."""
    with open(path, "a", encoding="utf-8") as out:
        out.write(template[: len(template) // 2])


# -- the folder ------------------------------------------------------------------------------------------


def generate(params: Params, run: Path, log: Callable[[str], None] = print) -> Generated:
    """Write the run into ``run`` (which must not exist); the marker last."""
    started = time.perf_counter()
    end = float(math.floor(time.time()) - 20)
    start = end - params.days * 86400
    dash = run / "dashboard"
    dash.mkdir(parents=True)
    gen = Generated(str(run), start, end, 0, asdict(params))
    cycles = make_cycles(np.random.default_rng([params.seed, 0]), start, end)
    write_metrics(params, dash, cycles, end, gen)
    write_meta(params, dash, start, gen.steps)
    write_topology(params, dash, start, end, gen)
    log(f"  metrics.jsonl: {gen.steps:,} steps; phases ...")
    newest_phases = write_phases(params, dash, start, end, cycles, gen)
    cut_last_line(newest_phases, f'{{"name":"actor_train","t0":{end - 3:.7f},"t1":{end - 0.5:.7f},"node":"10.0.0.11"}}')
    log("  engine_series ...")
    write_engines(params, dash, start, end, cycles, gen)
    log(f"  gpu_util{' and gpu_processes' if params.processes else ''} ({params.gpus} GPUs) ...")
    gpus = GpuWriter(params, dash, start, end, cycles, gen)
    gpus.run()
    cut_last_line(gpus.files.newest(), f'{{"ts":{end:.7f},"node":"{node_name(0)}","gpu":0,"util":97,"mem_mb":7}}')
    steps = max(gen.steps, params.step_files)
    log(f"  rollout_data/: steps {steps - params.step_files}..{steps - 1} ...")
    write_steps(run, steps - params.step_files, params.step_files, end - 30)
    gen.seconds = time.perf_counter() - started
    data = asdict(gen)
    (run / MARKER).write_text(json.dumps(data, indent=1))
    return gen


def ensure(params: Params, root: Path, log: Callable[[str], None] = print) -> Generated:
    """The run for ``params`` under ``root``: reused when its marker names the same parameters, else rebuilt."""
    run = root / params.folder_name()
    marker = run / MARKER
    if marker.is_file():
        data = json.loads(marker.read_text())
        if data.get("params") == asdict(params):
            return Generated.load(data)
    if run.exists():
        log(f"{run}: written with other parameters (or cut short); rebuilding")
        shutil.rmtree(run)
    log(f"generating {run} ({params.nodes} nodes x 8 GPUs, {params.days:g} days) ...")
    return generate(params, run, log)


def ensure_metrics_run(root: Path, week: Generated, lines: int, log: Callable[[str], None] = print) -> Path:
    """A run of ``lines`` metrics lines (bench/telemetry_gen.py) beside the week's first day of gpu_util
    partitions (hard links): the metrics export beside a day of GPU partitions."""
    run = root / f"metrics-{lines}"
    marker = run / MARKER
    wanted = {"lines": lines, "week": week.run, "week_start": week.start_ts, "version": GENERATOR_VERSION}
    if marker.is_file() and json.loads(marker.read_text()) == wanted:
        return run
    if run.exists():
        shutil.rmtree(run)
    dash = run / "dashboard"
    (dash / "gpu_util").mkdir(parents=True)
    log(f"generating {run}: {lines:,} metrics lines (bench/telemetry_gen.py) + a day of gpu_util ...")
    telemetry_gen.generate(dash / "metrics.jsonl", lines)
    source = sorted((week.path / "dashboard" / "gpu_util").glob("*.jsonl"))[:24]
    for path in source:
        os.link(path, dash / "gpu_util" / path.name)
    meta = {"run_name": "metrics-2m-beside-a-day", "start_ts": week.start_ts, "args": {}, "schema_version": 1}
    (dash / "meta.json").write_text(json.dumps(meta, indent=1))
    marker.write_text(json.dumps(wanted))
    return run
