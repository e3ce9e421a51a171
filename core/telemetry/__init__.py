"""The append-only JSONL telemetry under ``RUN_DIR/dashboard``: tails, records, series.

Independent of ``dump``; joined with it only in ``miles_tui.core.follow``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from miles_tui.core.lazy_exports import lazy_getattr

if TYPE_CHECKING:
    from miles_tui.core.telemetry.engine_series import (
        ABORTED,
        CACHE_HIT_RATE,
        GEN_THROUGHPUT,
        QUEUED,
        REQUESTS,
        RUNNING,
        TOKEN_USAGE,
        EngineSeries,
        EngineTable,
        FloatArray,
        counter_delta,
        flat_values,
        restart_times,
    )
    from miles_tui.core.telemetry.gpu_samples import GpuSamples, IntArray, Lane, lane_key, natural_key
    from miles_tui.core.telemetry.lane_phases import LanePhases
    from miles_tui.core.telemetry.metric_export import write_metrics
    from miles_tui.core.telemetry.metric_meaning_table import MetricMeaning
    from miles_tui.core.telemetry.metric_meanings import metric_meaning, metric_source
    from miles_tui.core.telemetry.metrics import MetricSeries, MetricStore, export_metrics
    from miles_tui.core.telemetry.partitions import PartitionInfo
    from miles_tui.core.telemetry.phase_bands import BandKey, PhaseBand, PhaseSpans, phase_time
    from miles_tui.core.telemetry.record_table import TAG_INT, TAG_NONE, TAG_OTHER, TableArrays
    from miles_tui.core.telemetry.stream_records import OPEN_T1, EngineSample, Phase, RunMeta, StreamRecord
    from miles_tui.core.telemetry.streams import DashboardReader
    from miles_tui.core.telemetry.telemetry_columns import TelemetryColumns
    from miles_tui.core.telemetry.time_bins import WINDOWS, TimeBins, bin_count, window_bounds
    from miles_tui.core.telemetry.time_window import (
        PAN_FRACTION,
        ZOOM_FACTOR,
        Frame,
        TimeWindow,
        again,
        frame,
        go_live,
        go_start,
        pan,
        preset,
        zoom,
    )
    from miles_tui.core.telemetry.wandb_page import WandbLink, wandb_link

__all__ = [
    "ABORTED",
    "CACHE_HIT_RATE",
    "GEN_THROUGHPUT",
    "OPEN_T1",
    "PAN_FRACTION",
    "QUEUED",
    "REQUESTS",
    "RUNNING",
    "TAG_INT",
    "TAG_NONE",
    "TAG_OTHER",
    "TOKEN_USAGE",
    "WINDOWS",
    "ZOOM_FACTOR",
    "BandKey",
    "DashboardReader",
    "EngineSample",
    "EngineSeries",
    "EngineTable",
    "FloatArray",
    "Frame",
    "GpuSamples",
    "IntArray",
    "Lane",
    "LanePhases",
    "MetricMeaning",
    "MetricSeries",
    "MetricStore",
    "PartitionInfo",
    "Phase",
    "PhaseBand",
    "PhaseSpans",
    "RunMeta",
    "StreamRecord",
    "TableArrays",
    "TelemetryColumns",
    "TimeBins",
    "TimeWindow",
    "WandbLink",
    "again",
    "bin_count",
    "counter_delta",
    "export_metrics",
    "flat_values",
    "frame",
    "go_live",
    "go_start",
    "lane_key",
    "metric_meaning",
    "metric_source",
    "natural_key",
    "pan",
    "phase_time",
    "preset",
    "restart_times",
    "wandb_link",
    "window_bounds",
    "write_metrics",
    "zoom",
]

_HOMES = {
    "ABORTED": "engine_series",
    "CACHE_HIT_RATE": "engine_series",
    "EngineSeries": "engine_series",
    "EngineTable": "engine_series",
    "FloatArray": "engine_series",
    "GEN_THROUGHPUT": "engine_series",
    "QUEUED": "engine_series",
    "REQUESTS": "engine_series",
    "RUNNING": "engine_series",
    "TOKEN_USAGE": "engine_series",
    "counter_delta": "engine_series",
    "flat_values": "engine_series",
    "restart_times": "engine_series",
    "GpuSamples": "gpu_samples",
    "IntArray": "gpu_samples",
    "Lane": "gpu_samples",
    "lane_key": "gpu_samples",
    "natural_key": "gpu_samples",
    "LanePhases": "lane_phases",
    "write_metrics": "metric_export",
    "MetricMeaning": "metric_meaning_table",
    "metric_meaning": "metric_meanings",
    "metric_source": "metric_meanings",
    "MetricSeries": "metrics",
    "MetricStore": "metrics",
    "export_metrics": "metrics",
    "PartitionInfo": "partitions",
    "BandKey": "phase_bands",
    "PhaseBand": "phase_bands",
    "PhaseSpans": "phase_bands",
    "phase_time": "phase_bands",
    "TAG_INT": "record_table",
    "TAG_NONE": "record_table",
    "TAG_OTHER": "record_table",
    "TableArrays": "record_table",
    "EngineSample": "stream_records",
    "OPEN_T1": "stream_records",
    "Phase": "stream_records",
    "RunMeta": "stream_records",
    "StreamRecord": "stream_records",
    "DashboardReader": "streams",
    "TelemetryColumns": "telemetry_columns",
    "TimeBins": "time_bins",
    "WINDOWS": "time_bins",
    "bin_count": "time_bins",
    "window_bounds": "time_bins",
    "Frame": "time_window",
    "PAN_FRACTION": "time_window",
    "TimeWindow": "time_window",
    "ZOOM_FACTOR": "time_window",
    "again": "time_window",
    "frame": "time_window",
    "go_live": "time_window",
    "go_start": "time_window",
    "pan": "time_window",
    "preset": "time_window",
    "zoom": "time_window",
    "WandbLink": "wandb_page",
    "wandb_link": "wandb_page",
}
"""Each public name's defining module, imported on first use (importing the package stays cheap)."""

__getattr__ = lazy_getattr(__name__, _HOMES)
