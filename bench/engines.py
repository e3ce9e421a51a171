"""Benchmark: engine telemetry of a large fleet, as the advisories and the engines view read it.

Builds in memory (no files) the ``engine_series`` records miles' scraper would
write for ``--engines`` dp-attention engines of ``--ranks`` DP ranks each,
scraped every 15 s for ``--hours`` hours, seven metrics per rank. Prints,
median of ``--repeat`` runs, beside its goal:

- the engine advisories' cost on a telemetry poll that brought new scrapes
  (EngineTable over every loaded record + the figures miles' rules read; a poll
  without new scrapes reuses the figures, core/engine_feed.py): the poll
  worker's thread pays it once per scrape interval (15 s), polling every 2 s;
- the engines view of the last 15 minutes and of the whole run (what the
  screen's worker computes on a window change or new scrapes).

    python bench/engines.py [--engines 8] [--ranks 8] [--hours 6] [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from miles_tui.core.analysis import scrape_interval
from miles_tui.core.analysis.engine_advisories import engine_figures
from miles_tui.core.analysis.engine_view import engine_view
from miles_tui.core.telemetry import EngineSample, EngineTable, bin_count
from miles_tui.core.telemetry.time_bins import time_bins

T = 1_787_240_000.0
METRICS = (
    "sglang_num_running_reqs",
    "sglang_num_queue_reqs",
    "sglang_token_usage",
    "sglang_cache_hit_rate",
    "sglang_gen_throughput",
    "sglang_num_requests_total",
    "sglang_num_aborted_requests_total",
)


def records(engines: int, ranks: int, hours: float) -> list[EngineSample]:
    out = []
    labels = [{"dp_rank": str(rank)} for rank in range(ranks)]
    for i in range(int(hours * 240)):
        ts = T + 15.0 * i
        for engine in range(engines):
            addr = f"http://10.0.0.{engine}:30000"
            for rank in range(ranks):
                out += [EngineSample(ts, addr, metric, labels[rank], float(i % 97)) for metric in METRICS]
    return out


def timed(action: Callable[[], object], repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        runs.append(time.perf_counter() - start)
    return statistics.median(runs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engines", type=int, default=8)
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--hours", type=float, default=6.0)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    samples = records(args.engines, args.ranks, args.hours)
    end = T + args.hours * 3600
    recent = [s for s in samples if s.ts >= end - 900 - 300]
    print(f"{len(samples):,} records ({args.engines} engines × {args.ranks} DP ranks, {args.hours:g} h every 15 s)")

    def advisories() -> None:
        engine_figures(EngineTable(samples))

    def view(window: list[EngineSample], span: float | None) -> None:
        table = EngineTable(window)
        first, last = table.time_range() or (end, end)
        since = first if span is None else last - span
        bins = time_bins(since, last, bin_count(last - since, scrape_interval(table), 60))
        engine_view(table, bins, now=end, span=span)

    rows = (
        ("advisories, poll with new scrapes", advisories, 1.0),
        ("engines view, last 15 min", lambda: view(recent, 900.0), 0.25),
        ("engines view, whole run", lambda: view(samples, None), 2.0),
    )
    for name, action, goal in rows:
        seconds = timed(action, args.repeat)
        print(f"{name:<42} {seconds * 1000:8.0f} ms   goal < {goal * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
