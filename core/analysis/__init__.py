"""What the monitor concludes from a run: advisories, compare, outliers, view models."""

from __future__ import annotations

from typing import TYPE_CHECKING

from miles_tui.core.base.lazy_exports import lazy_getattr, public_names

if TYPE_CHECKING:
    from miles_tui.core.analysis.advisories import Advisory as Advisory
    from miles_tui.core.analysis.advisories import Level as Level
    from miles_tui.core.analysis.advisories import UnreadableStep as UnreadableStep
    from miles_tui.core.analysis.compare import Delta as Delta
    from miles_tui.core.analysis.compare import GroupComparison as GroupComparison
    from miles_tui.core.analysis.compare import GroupInStep as GroupInStep
    from miles_tui.core.analysis.compare import StepComparison as StepComparison
    from miles_tui.core.analysis.compare import compare_steps as compare_steps
    from miles_tui.core.analysis.compare import group_across_steps as group_across_steps
    from miles_tui.core.analysis.compare import group_of as group_of
    from miles_tui.core.analysis.compute_view import FLEET_LANES as FLEET_LANES
    from miles_tui.core.analysis.compute_view import ComputeView as ComputeView
    from miles_tui.core.analysis.compute_view import FleetSummary as FleetSummary
    from miles_tui.core.analysis.compute_view import LaneHealth as LaneHealth
    from miles_tui.core.analysis.compute_view import LaneSelection as LaneSelection
    from miles_tui.core.analysis.compute_view import Liveness as Liveness
    from miles_tui.core.analysis.compute_view import nodes_of as nodes_of
    from miles_tui.core.analysis.compute_view import sampling_interval as sampling_interval
    from miles_tui.core.analysis.compute_view import select_lanes as select_lanes
    from miles_tui.core.analysis.engine_view import ABORT_RATE as ABORT_RATE
    from miles_tui.core.analysis.engine_view import PANELS as PANELS
    from miles_tui.core.analysis.engine_view import EngineBlock as EngineBlock
    from miles_tui.core.analysis.engine_view import EnginePanel as EnginePanel
    from miles_tui.core.analysis.engine_view import EngineView as EngineView
    from miles_tui.core.analysis.engine_view import scrape_interval as scrape_interval
    from miles_tui.core.analysis.health import RunHealth as RunHealth
    from miles_tui.core.analysis.health import dump_advisories as dump_advisories
    from miles_tui.core.analysis.health import run_health as run_health
    from miles_tui.core.analysis.metric_view import SMOOTHING_LEVELS as SMOOTHING_LEVELS
    from miles_tui.core.analysis.metric_view import ChartSeries as ChartSeries
    from miles_tui.core.analysis.metric_view import FloatArray as FloatArray
    from miles_tui.core.analysis.metric_view import PlotData as PlotData
    from miles_tui.core.analysis.metric_view import PointAt as PointAt
    from miles_tui.core.analysis.metric_view import chart_keys as chart_keys
    from miles_tui.core.analysis.metric_view import chart_series as chart_series
    from miles_tui.core.analysis.metric_view import dump_series as dump_series
    from miles_tui.core.analysis.metric_view import group_keys as group_keys
    from miles_tui.core.analysis.metric_view import key_matches as key_matches
    from miles_tui.core.analysis.metric_view import move_cursor as move_cursor
    from miles_tui.core.analysis.metric_view import plot_data as plot_data
    from miles_tui.core.analysis.metric_view import same_points as same_points
    from miles_tui.core.analysis.metric_view import step_union as step_union
    from miles_tui.core.analysis.metric_view import store_chart_series as store_chart_series
    from miles_tui.core.analysis.metric_view import value_at as value_at
    from miles_tui.core.analysis.metric_view import values_at as values_at
    from miles_tui.core.analysis.outliers import KINDS as KINDS
    from miles_tui.core.analysis.outliers import LAST_STEPS as LAST_STEPS
    from miles_tui.core.analysis.outliers import TOP_K as TOP_K
    from miles_tui.core.analysis.outliers import OutlierKind as OutlierKind
    from miles_tui.core.analysis.outliers import SampleOutlier as SampleOutlier
    from miles_tui.core.analysis.outliers import StepOutliers as StepOutliers
    from miles_tui.core.analysis.outliers import TokenOutlier as TokenOutlier
    from miles_tui.core.analysis.outliers import merge_outliers as merge_outliers
    from miles_tui.core.analysis.outliers import peak_position as peak_position
    from miles_tui.core.analysis.outliers import recent_steps as recent_steps
    from miles_tui.core.analysis.outliers import sample_outliers as sample_outliers
    from miles_tui.core.analysis.outliers import step_outliers as step_outliers
    from miles_tui.core.analysis.run_state import RunClock as RunClock
    from miles_tui.core.analysis.run_state import RunState as RunState
    from miles_tui.core.analysis.run_state import quiet_after as quiet_after
    from miles_tui.core.analysis.scatter import Scatter as Scatter
    from miles_tui.core.analysis.scatter import dot_of as dot_of
    from miles_tui.core.analysis.scatter import step_cursor as step_cursor
    from miles_tui.core.analysis.scatter import step_scatter as step_scatter
    from miles_tui.core.analysis.stream_advisories import LOW_MFU as LOW_MFU
    from miles_tui.core.analysis.token_heat import MASKED as MASKED
    from miles_tui.core.analysis.token_heat import NO_VALUE as NO_VALUE
    from miles_tui.core.analysis.token_heat import TOP as TOP
    from miles_tui.core.analysis.token_heat import HeatStatistic as HeatStatistic
    from miles_tui.core.analysis.token_heat import TokenHeat as TokenHeat

_EXPORTS = {
    "advisories": ("Advisory", "Level", "UnreadableStep"),
    "compare": (
        "Delta",
        "GroupComparison",
        "GroupInStep",
        "StepComparison",
        "compare_steps",
        "group_across_steps",
        "group_of",
    ),
    "compute_view": (
        "FLEET_LANES",
        "ComputeView",
        "FleetSummary",
        "LaneHealth",
        "LaneSelection",
        "Liveness",
        "nodes_of",
        "sampling_interval",
        "select_lanes",
    ),
    "engine_view": ("ABORT_RATE", "PANELS", "EngineBlock", "EnginePanel", "EngineView", "scrape_interval"),
    "health": ("RunHealth", "dump_advisories", "run_health"),
    "metric_view": (
        "SMOOTHING_LEVELS",
        "ChartSeries",
        "FloatArray",
        "PlotData",
        "PointAt",
        "chart_keys",
        "chart_series",
        "dump_series",
        "group_keys",
        "key_matches",
        "move_cursor",
        "plot_data",
        "same_points",
        "step_union",
        "store_chart_series",
        "value_at",
        "values_at",
    ),
    "outliers": (
        "KINDS",
        "LAST_STEPS",
        "TOP_K",
        "OutlierKind",
        "SampleOutlier",
        "StepOutliers",
        "TokenOutlier",
        "merge_outliers",
        "peak_position",
        "recent_steps",
        "sample_outliers",
        "step_outliers",
    ),
    "run_state": ("RunClock", "RunState", "quiet_after"),
    "scatter": ("Scatter", "dot_of", "step_cursor", "step_scatter"),
    "stream_advisories": ("LOW_MFU",),
    "token_heat": ("MASKED", "NO_VALUE", "TOP", "HeatStatistic", "TokenHeat"),
}
"""Each submodule and the public names it defines, imported on first use (importing the package stays cheap)."""

__all__ = public_names(_EXPORTS)  # noqa: PLE0605 (derived: the TYPE_CHECKING block re-exports for mypy)
__getattr__ = lazy_getattr(__name__, _EXPORTS)
