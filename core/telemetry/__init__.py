"""The append-only JSONL telemetry under ``RUN_DIR/dashboard``: tails, records, series.

Independent of ``dump``; joined with it only in ``miles_tui.core.follow``.
"""

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
from miles_tui.core.telemetry.lane_phases import LanePhases, lane_phases
from miles_tui.core.telemetry.metric_export import write_metrics
from miles_tui.core.telemetry.metrics import MetricSeries, MetricStore, export_metrics
from miles_tui.core.telemetry.phase_bands import BandKey, PhaseBand, PhaseSpans, phase_bands, phase_time
from miles_tui.core.telemetry.stream_records import EngineSample, Phase, RunMeta, StreamRecord
from miles_tui.core.telemetry.streams import DashboardReader, PartitionInfo
from miles_tui.core.telemetry.telemetry_columns import TelemetryColumns
from miles_tui.core.telemetry.time_bins import WINDOWS, TimeBins, bin_count, time_bins, window_bounds
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

__all__ = [
    "ABORTED",
    "CACHE_HIT_RATE",
    "GEN_THROUGHPUT",
    "PAN_FRACTION",
    "QUEUED",
    "REQUESTS",
    "RUNNING",
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
    "MetricSeries",
    "MetricStore",
    "PartitionInfo",
    "Phase",
    "PhaseBand",
    "PhaseSpans",
    "RunMeta",
    "StreamRecord",
    "TelemetryColumns",
    "TimeBins",
    "TimeWindow",
    "again",
    "bin_count",
    "counter_delta",
    "export_metrics",
    "flat_values",
    "frame",
    "go_live",
    "go_start",
    "lane_key",
    "lane_phases",
    "natural_key",
    "pan",
    "phase_bands",
    "phase_time",
    "preset",
    "restart_times",
    "time_bins",
    "window_bounds",
    "write_metrics",
    "zoom",
]
