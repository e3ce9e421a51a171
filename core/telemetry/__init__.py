"""The append-only JSONL telemetry under ``RUN_DIR/dashboard``: tails, records, series.

Independent of ``dump``; joined with it only in ``miles_tui.core.follow``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from miles_tui.core.base.lazy_exports import lazy_getattr, public_names

if TYPE_CHECKING:
    from miles_tui.core.telemetry.engine_series import ABORTED as ABORTED
    from miles_tui.core.telemetry.engine_series import CACHE_HIT_RATE as CACHE_HIT_RATE
    from miles_tui.core.telemetry.engine_series import GEN_THROUGHPUT as GEN_THROUGHPUT
    from miles_tui.core.telemetry.engine_series import QUEUED as QUEUED
    from miles_tui.core.telemetry.engine_series import REQUESTS as REQUESTS
    from miles_tui.core.telemetry.engine_series import RUNNING as RUNNING
    from miles_tui.core.telemetry.engine_series import TOKEN_USAGE as TOKEN_USAGE
    from miles_tui.core.telemetry.engine_series import EngineSeries as EngineSeries
    from miles_tui.core.telemetry.engine_series import EngineTable as EngineTable
    from miles_tui.core.telemetry.engine_series import FloatArray as FloatArray
    from miles_tui.core.telemetry.engine_series import counter_delta as counter_delta
    from miles_tui.core.telemetry.engine_series import flat_values as flat_values
    from miles_tui.core.telemetry.engine_series import restart_times as restart_times
    from miles_tui.core.telemetry.gpu_samples import GpuSamples as GpuSamples
    from miles_tui.core.telemetry.gpu_samples import IntArray as IntArray
    from miles_tui.core.telemetry.gpu_samples import Lane as Lane
    from miles_tui.core.telemetry.gpu_samples import lane_key as lane_key
    from miles_tui.core.telemetry.gpu_samples import natural_key as natural_key
    from miles_tui.core.telemetry.lane_phases import LanePhases as LanePhases
    from miles_tui.core.telemetry.metric_meaning_table import MetricMeaning as MetricMeaning
    from miles_tui.core.telemetry.metric_meanings import metric_meaning as metric_meaning
    from miles_tui.core.telemetry.metric_meanings import metric_source as metric_source
    from miles_tui.core.telemetry.metrics.metric_export import write_metrics as write_metrics
    from miles_tui.core.telemetry.metrics.metric_store import MetricSeries as MetricSeries
    from miles_tui.core.telemetry.metrics.metric_store import MetricStore as MetricStore
    from miles_tui.core.telemetry.metrics.metric_store import export_metrics as export_metrics
    from miles_tui.core.telemetry.partitions import PartitionInfo as PartitionInfo
    from miles_tui.core.telemetry.phase_bands import BandKey as BandKey
    from miles_tui.core.telemetry.phase_bands import PhaseBand as PhaseBand
    from miles_tui.core.telemetry.phase_bands import PhaseSpans as PhaseSpans
    from miles_tui.core.telemetry.phase_bands import phase_time as phase_time
    from miles_tui.core.telemetry.record_table import TAG_INT as TAG_INT
    from miles_tui.core.telemetry.record_table import TAG_NONE as TAG_NONE
    from miles_tui.core.telemetry.record_table import TAG_OTHER as TAG_OTHER
    from miles_tui.core.telemetry.record_table import TableArrays as TableArrays
    from miles_tui.core.telemetry.stream_records import OPEN_T1 as OPEN_T1
    from miles_tui.core.telemetry.stream_records import EngineSample as EngineSample
    from miles_tui.core.telemetry.stream_records import Phase as Phase
    from miles_tui.core.telemetry.stream_records import RunMeta as RunMeta
    from miles_tui.core.telemetry.stream_records import StreamRecord as StreamRecord
    from miles_tui.core.telemetry.streams import DashboardReader as DashboardReader
    from miles_tui.core.telemetry.telemetry_columns import TelemetryColumns as TelemetryColumns
    from miles_tui.core.telemetry.time_bins import WINDOWS as WINDOWS
    from miles_tui.core.telemetry.time_bins import TimeBins as TimeBins
    from miles_tui.core.telemetry.time_bins import bin_count as bin_count
    from miles_tui.core.telemetry.time_bins import window_bounds as window_bounds
    from miles_tui.core.telemetry.time_window import PAN_FRACTION as PAN_FRACTION
    from miles_tui.core.telemetry.time_window import ZOOM_FACTOR as ZOOM_FACTOR
    from miles_tui.core.telemetry.time_window import Frame as Frame
    from miles_tui.core.telemetry.time_window import TimeWindow as TimeWindow
    from miles_tui.core.telemetry.time_window import again as again
    from miles_tui.core.telemetry.time_window import frame as frame
    from miles_tui.core.telemetry.time_window import go_live as go_live
    from miles_tui.core.telemetry.time_window import go_start as go_start
    from miles_tui.core.telemetry.time_window import pan as pan
    from miles_tui.core.telemetry.time_window import preset as preset
    from miles_tui.core.telemetry.time_window import zoom as zoom
    from miles_tui.core.telemetry.wandb_page import WandbLink as WandbLink
    from miles_tui.core.telemetry.wandb_page import wandb_link as wandb_link

_EXPORTS = {
    "engine_series": (
        "ABORTED",
        "CACHE_HIT_RATE",
        "GEN_THROUGHPUT",
        "QUEUED",
        "REQUESTS",
        "RUNNING",
        "TOKEN_USAGE",
        "EngineSeries",
        "EngineTable",
        "FloatArray",
        "counter_delta",
        "flat_values",
        "restart_times",
    ),
    "gpu_samples": ("GpuSamples", "IntArray", "Lane", "lane_key", "natural_key"),
    "lane_phases": ("LanePhases",),
    "metric_meaning_table": ("MetricMeaning",),
    "metric_meanings": ("metric_meaning", "metric_source"),
    "metrics.metric_export": ("write_metrics",),
    "metrics.metric_store": ("MetricSeries", "MetricStore", "export_metrics"),
    "partitions": ("PartitionInfo",),
    "phase_bands": ("BandKey", "PhaseBand", "PhaseSpans", "phase_time"),
    "record_table": ("TAG_INT", "TAG_NONE", "TAG_OTHER", "TableArrays"),
    "stream_records": ("OPEN_T1", "EngineSample", "Phase", "RunMeta", "StreamRecord"),
    "streams": ("DashboardReader",),
    "telemetry_columns": ("TelemetryColumns",),
    "time_bins": ("WINDOWS", "TimeBins", "bin_count", "window_bounds"),
    "time_window": (
        "PAN_FRACTION",
        "ZOOM_FACTOR",
        "Frame",
        "TimeWindow",
        "again",
        "frame",
        "go_live",
        "go_start",
        "pan",
        "preset",
        "zoom",
    ),
    "wandb_page": ("WandbLink", "wandb_link"),
}
"""Each submodule and the public names it defines, imported on first use (importing the package stays cheap)."""

__all__ = public_names(_EXPORTS)  # noqa: PLE0605 (derived: the TYPE_CHECKING block re-exports for mypy)
__getattr__ = lazy_getattr(__name__, _EXPORTS)
