"""``miles-tui report``: a run's health in one look, for people (text) and scripts (JSON).

Contract: reads the run once (every visible step's summary, via the cache, so
an unreadable older step is reported as the monitor shows it; the newest train
step's figures; and the dashboard streams), applies every advisory rule and returns a
:class:`Report` whose ``exit_status`` is 0 (nothing worse than info), 1 (a
warning) or 2 (a critical advisory). A run directory that cannot be read at
all, or is not a ``--dump-details`` folder (neither ``rollout_data/`` nor
``dashboard/``), raises :class:`RunDirError` (the CLI exits 3). ``data_age``
is ``now`` minus the newest data on the run's one clock (the newest record
timestamp where the streams have one, else the newest file write: the same
input as the ``no_new_data`` rule and the monitor's header), and ``state``
says whether the run is live, quiet or ended (:mod:`.analysis.run_state`). A
run that ended is information (exit 0 when nothing else is wrong). A quiet run
whose arguments do not say its last step keeps ``no_new_data``; with
``quiet_ok`` (``--quiet-ok``) that advisory does not count towards the exit
status unless a phase is still open. The JSON shape is the contract of
``cli.md``; keys may be added, never renamed or dropped.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from miles_tui.core.analysis import (
    LOW_MFU,
    Advisory,
    Level,
    RunHealth,
    RunState,
    UnreadableStep,
    dump_advisories,
    quiet_after,
    run_health,
)
from miles_tui.core.analysis.advisories import worst_level
from miles_tui.core.analysis.engine_advisories import engine_figures, figures_from_digests
from miles_tui.core.analysis.phase_markers import open_phase_count
from miles_tui.core.analysis.stall_rule import duration_text
from miles_tui.core.analysis.stream_advisories import TelemetryFacts, step_times, telemetry_advisories
from miles_tui.core.base.errors import StreamError
from miles_tui.core.base.export_window import utc_text
from miles_tui.core.base.inert_text import inert
from miles_tui.core.base.tail import StreamReset
from miles_tui.core.commands.baseline_report import BaselineEntry, baseline_lines
from miles_tui.core.dump import Run, StepSummary
from miles_tui.core.follow import StepFollower
from miles_tui.core.telemetry import DashboardReader, RunMeta
from miles_tui.core.telemetry.hours.engine_columns import engine_table
from miles_tui.core.telemetry.hours.hour_workers import refreshing_together
from miles_tui.core.telemetry.hours.store import HourStore


@dataclass(frozen=True)
class Report:
    """What `report` prints."""

    run_dir: Path
    """The run directory."""
    health: RunHealth
    """Steps, run name, data age and advisories (the same function the monitor's header uses)."""
    latest_summary: StepSummary | None
    """The newest train step's summary, when it could be read."""
    cache_notice: str | None = None
    """Why the summary cache was not used (it lies inside the run), for a note on stderr."""
    open_phases: int = 0
    """Phases of the current attempt still open."""
    quiet_ok: bool = False
    """``--quiet-ok``: a quiet run whose end the arguments do not say, with no phase open, is not an alarm."""
    baselines: tuple[BaselineEntry, ...] = ()
    """``--baseline OTHER``: the newest train step against each baseline's (:mod:`.baseline_report`)."""

    @property
    def run_name(self) -> str:
        return self.health.run_name

    @property
    def latest(self) -> int | None:
        return self.health.latest

    @property
    def data_age(self) -> float | None:
        return self.health.data_age

    @property
    def advisories(self) -> tuple[Advisory, ...]:
        return self.health.advisories

    def _excused(self, advisory: Advisory) -> bool:
        """``no_new_data`` that ``--quiet-ok`` leaves out of the exit status."""
        clock = self.health.clock
        return self.quiet_ok and advisory.code == "no_new_data" and clock.final_step is None and self.open_phases == 0

    @property
    def exit_status(self) -> int:
        worst = worst_level([a for a in self.advisories if not self._excused(a)])
        if worst is Level.CRITICAL:
            return 2
        if worst is Level.WARNING:
            return 1
        return 0

    def to_dict(self) -> dict[str, Any]:
        latest_step: dict[str, Any] | None = None
        if self.latest_summary is not None:
            latest_step = {
                **self.latest_summary.aggregate.to_dict(),
                "groups": len(self.latest_summary.groups),
                "complete": self.latest_summary.complete,
            }
        return {
            "run": {
                "name": self.run_name,
                "path": str(self.run_dir),
                "data_age_seconds": self.data_age,
                "state": self.health.state.value,
                "last_data_ts": self.health.clock.last_data,
                "last_data_from": "records" if self.health.clock.from_records else "files",
                "quiet_after_seconds": self.health.clock.quiet_after,
                "final_step": self.health.clock.final_step,
                "open_phases": self.open_phases,
            },
            "steps": {"train": len(self.health.train), "eval": len(self.health.evaluation), "latest": self.latest},
            "latest_step": latest_step,
            "advisories": [a.to_dict() for a in self.advisories],
            "exit_status": self.exit_status,
            "baselines": [entry.to_dict() for entry in self.baselines],
        }


def build_report(run_dir: Path, now: float, *, low_mfu_threshold: float = LOW_MFU, quiet_ok: bool = False) -> Report:
    """Read the run and apply every advisory rule (``low_mfu_threshold``: ``--low-mfu-threshold``, 0: off;
    ``quiet_ok``: ``--quiet-ok``)."""
    run = Run(run_dir)
    run.dir.require_dump_folder()
    # One telemetry read serves both meta.json (run name, arguments) and the stream advisories.
    telemetry = read_telemetry(run.dir.dashboard_dir) if run.dir.dashboard_dir.is_dir() else None
    meta = telemetry.meta if telemetry is not None else None
    # Every visible step is read (its cached summary when its files have not changed since): a corrupt older
    # step is as much the run's health as the newest one, and the monitor shows it. One poll of the step
    # follower the monitor uses, with no time budget, no wait for landing files and no helper processes.
    steps = StepFollower(run, workers=1, budget=math.inf, landing=-math.inf, open_latest=False, ahead=False)
    polled = steps.poll(now)
    visible = steps.visible_files()
    train = list(polled.train)
    summary = steps.latest_summary
    unreadable = [UnreadableStep(*failure) for failure in steps.failed_steps()]
    streams: list[Advisory] = []
    if telemetry is not None:
        streams = telemetry_advisories(
            telemetry.facts, now, problems=telemetry.problems, resets=telemetry.resets,
            low_mfu_threshold=low_mfu_threshold,
        )  # fmt: skip
    # The newest write in dump files and streams (the clock where no record has a time of its own).
    writes = [files.newest_mtime for files in visible.values()]
    # The run's cadence: its step records' times, else its rollout files' times.
    cadence: list[float] = step_times(telemetry.facts.metrics)[1].tolist() if telemetry is not None else []
    if len(cadence) < 2:
        cadence = [files.newest_mtime for (_rid, ev), files in visible.items() if not ev]
    open_phases = open_phase_count(telemetry.facts.phases, telemetry.facts.attempt_start) if telemetry else 0
    health = run_health(
        run.path,
        meta,
        train,
        list(polled.evaluation),
        dump=dump_advisories(summary, meta, unreadable),
        streams=streams,
        newest_writes=[*writes, telemetry.facts.newest_write if telemetry is not None else None],
        now=now,
        record_time=telemetry.facts.edge if telemetry is not None else None,
        quiet_seconds=quiet_after(cadence),
    )
    return Report(
        run_dir=run.path,
        health=health,
        latest_summary=summary,
        cache_notice=run.cache_notice,
        open_phases=open_phases,
        quiet_ok=quiet_ok,
    )


@dataclass(frozen=True, eq=False)
class TelemetryRead:
    """What ``report`` read of ``dashboard/``: only what the rules need."""

    meta: RunMeta | None
    """meta.json."""
    facts: TelemetryFacts
    """The rules' inputs."""
    problems: tuple[StreamError, ...]
    """Malformed lines and unreadable files met."""
    resets: tuple[StreamReset, ...]
    """Files found rewritten."""


def read_telemetry(dashboard: Path) -> TelemetryRead:
    """meta.json, metrics.jsonl, every phase and engine partition (each from the user cache when it still
    covers the file: a settled hour is parsed once), and the newest GPU hour only (for the newest data time).
    The GPU stream's older hours, trajectories, processes and snapshots are never opened: no rule reads them."""
    reader = DashboardReader(dashboard, streams=(), headless=True)
    phases = HourStore(dashboard, "phases", keep_columns=False, save_columns=False)
    engines = HourStore(dashboard, "engine_series", keep_columns=False, save_columns=False)
    gpus = HourStore(dashboard, "gpu_util", keep_columns=False)
    with refreshing_together((phases, engines), os.cpu_count() or 1) as hour_problems:
        delta = reader.poll()  # while the workers read the hours no cache entry covers
        gpu_problems = gpus.refresh(newest=True)
    problems = [*delta.problems, *hour_problems, *gpu_problems]
    spans = [s for s in (reader.time_range(), phases.span(), engines.span(), gpus.span()) if s is not None]
    writes = [t for t in (delta.newest_mtime, phases.newest_mtime(), engines.newest_mtime(), gpus.newest_mtime()) if t]
    meta = reader.meta
    facts = TelemetryFacts(
        args=meta.args if meta is not None else {},
        phases=phases.phase_digests(),
        metrics=reader.metrics,
        engines=figures_from_digests(engines.engine_digests()) or engine_figures(engine_table(engines.columns())),
        edge=max(s[1] for s in spans) if spans else None,
        attempt_start=meta.start_ts if meta is not None else None,
        newest_write=max(writes, default=None),
        malformed={**reader.malformed_counts(), **phases.malformed_counts(), **engines.malformed_counts(),
                   **gpus.malformed_counts()},
    )  # fmt: skip
    return TelemetryRead(meta, facts, tuple(problems), delta.resets)


def _state_line(report: Report) -> str:
    """The run's state on its one clock, as the monitor's header says it."""
    clock = report.health.clock
    if clock.last_data is None:
        return f"state: {clock.state.value}, no data yet"
    source = "newest record" if clock.from_records else "newest file write"
    age = f"{duration_text(report.data_age)} ago" if report.data_age is not None else ""
    word = {RunState.ENDED: "ended", RunState.QUIET: "quiet since", RunState.LIVE: "live, last data"}
    head = word.get(clock.state, clock.state.value)
    if clock.state is RunState.ENDED:
        head = f"ended (step {clock.final_step} of num_rollout {(clock.final_step or 0) + 1}), last data"
    return f"state: {head} {utc_text(clock.last_data)} ({age}, {source})"


def _percent(value: float | None) -> str:
    """A fraction as the monitor shows it: a percentage (the JSON keeps the fraction)."""
    return "–" if value is None else f"{value:.0%}"


def _number(value: Any, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def render_report(report: Report) -> str:
    """The human text of a report; every line made inert (run names, messages and paths come from the run)."""
    lines = [f"run {report.run_name}  ({report.run_dir})"]
    steps = f"steps: {len(report.health.train)} train, {len(report.health.evaluation)} eval"
    if report.latest is not None:
        steps += f", latest {report.latest}"
    if report.data_age is not None:
        steps += f", newest data {duration_text(report.data_age)} old"
    lines.append(steps)
    lines.append(_state_line(report))
    summary = report.latest_summary
    if summary is not None:
        a = summary.aggregate
        lines.append(
            f"step {a.rollout_id}: {a.n_samples} samples, reward {_number(a.reward_mean)}"
            f" ± {_number(a.reward_std)}, zero-std groups {_percent(a.zero_std_group_frac)},"
            f" truncated {_percent(a.truncated_frac)}, staleness {_number(a.avg_staleness, 2)},"
            f" |lpΔ| {_number(a.mean_abs_lp_diff, 4)}, entropy {_number(a.mean_entropy)}"
        )
    if not report.advisories:
        lines.append("no advisories: nothing needs attention")
    for advisory in report.advisories:
        lines.append(f"[{advisory.level.label.upper()}] {advisory.code}: {advisory.message}")
    for entry in report.baselines:
        lines += baseline_lines(entry)
    return "".join(inert(line) + "\n" for line in lines)
