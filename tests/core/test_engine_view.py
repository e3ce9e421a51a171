"""The engines view model: gauges binned with gaps kept, DP ranks split, abort rate and restarts from counters."""

from __future__ import annotations

import math

from miles_tui.core.analysis import ABORT_RATE, PANELS, scrape_interval
from miles_tui.core.analysis.engine_view import engine_view
from miles_tui.core.telemetry import EngineSample, EngineTable
from miles_tui.core.telemetry.time_bins import time_bins

T = 1_787_240_000.0


def _scrapes(metric: str, addr: str, values: list[float | None], rank: str | None = None) -> list[EngineSample]:
    labels = {} if rank is None else {"dp_rank": rank}
    return [EngineSample(T + 60 * i, addr, metric, labels, v) for i, v in enumerate(values) if v is not None]


def test_gauges_are_binned_per_rank_with_gaps_kept() -> None:
    samples = [
        *_scrapes("sglang_num_running_reqs", "e1", [4.0, 6.0, None, None, 8.0, 10.0], rank="0"),
        *_scrapes("sglang_num_running_reqs", "e1", [1.0, 1.0, None, None, 2.0, 2.0], rank="1"),
        *_scrapes("sglang_token_usage", "e2", [0.5, 0.7, 0.9, 0.9, 0.9, 0.9]),
    ]
    table = EngineTable(samples)
    assert scrape_interval(table) == 60.0
    view = engine_view(table, time_bins(T, T + 360, 3), now=T + 360, span=None)
    first, second = view.engines
    assert first.addr == "e1" and first.dp_ranks == ("0", "1")
    running = first.panels["sglang_num_running_reqs"]
    assert [line.dp_rank for line in running.lines] == ["0", "1"]
    # bins of 120 s: scrapes at 0, 60 | (none at 120, 180) | 240, 300
    assert running.lines[0].value[0] == 5.0 and math.isnan(running.lines[0].value[1])
    assert running.lines[0].value[2] == 9.0 and running.lines[0].latest == 10.0
    assert running.latest == 12.0  # engine level: the ranks summed at the newest scrape
    assert first.panels["sglang_token_usage"].lines == ()  # e1 exports no token usage
    usage = second.panels["sglang_token_usage"]
    assert second.dp_ranks == () and [line.dp_rank for line in usage.lines] == [None]
    assert usage.lines[0].value.tolist() == [0.6, 0.9, 0.9]
    assert set(first.panels) == set(PANELS)


def test_abort_rate_restarts_and_window_counts() -> None:
    # requests and aborts per minute; the engine restarts at minute 4 (its counters begin again)
    requests = [0.0, 100.0, 200.0, 300.0, 40.0, 140.0]
    aborted = [0.0, 6.0, 12.0, 18.0, 30.0, 36.0]  # the restart interval's 30 is not a fall: it is not a restart
    samples = [
        *_scrapes("sglang:num_requests_total", "e1", requests),
        *_scrapes("sglang:num_aborted_requests_total", "e1", aborted),
    ]
    view = engine_view(EngineTable(samples), time_bins(T, T + 300, 5), now=T + 300, span=None)
    [block] = view.engines
    assert block.restarts == (T + 240,)  # the requests counter fell
    assert block.requests == 100 + 100 + 100 + 100  # the restart interval is dropped
    assert block.aborted == 6 + 6 + 6 + 12 + 6  # the aborts counter did not fall: every interval counts
    rate = block.panels[ABORT_RATE]
    # per-second rate over the intervals ending in each minute-wide bin (the first bin has none: a gap)
    values = rate.lines[0].value
    assert math.isnan(values[0]) and values[1:].tolist() == [0.1, 0.1, 0.1, 0.15]
    assert rate.lines[0].latest == 0.1
    # a window over the last two minutes counts only the intervals ending in it
    late = engine_view(EngineTable(samples), time_bins(T + 181, T + 300, 2), now=T + 300, span=120.0)
    assert late.engines[0].requests == 100 and late.engines[0].restarts == (T + 240,)
