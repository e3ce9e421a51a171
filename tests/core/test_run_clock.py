"""One clock for the run's state (issue 24, items 4 and 5): record times over file times, quiet on the run's
own cadence, an ended run is information, and a folder that is not a dump is never live."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from miles_tui.core.analysis import RunState, quiet_after
from miles_tui.core.analysis.run_state import QUIET_DEFAULT_S, run_clock
from miles_tui.core.commands.report import build_report, render_report
from tests.conftest import EPOCH, GOLDEN, stamp, write_demo_run


def _clock(**overrides: object) -> RunState:
    options: dict[str, object] = {
        "is_dump": True,
        "record_time": EPOCH - 60,
        "file_time": EPOCH - 1,
        "quiet_seconds": 90.0,
        "args": {},
        "has_ended": False,
        "now": EPOCH,
    }
    options.update(overrides)
    return run_clock(**options).state  # type: ignore[arg-type]


def test_the_records_own_times_are_the_clock_not_the_files() -> None:
    # a cp -r copy: fresh file times, records from long ago
    assert _clock(record_time=EPOCH - 86400, file_time=EPOCH - 1) is RunState.QUIET
    assert _clock(record_time=None, file_time=EPOCH - 1) is RunState.LIVE  # no record has a time: files
    assert _clock(record_time=None, file_time=None) is RunState.WAITING
    assert _clock(is_dump=False, record_time=EPOCH) is RunState.NOT_A_DUMP  # never live
    assert _clock(has_ended=True, record_time=EPOCH) is RunState.ENDED


def test_quiet_is_a_few_of_the_runs_own_step_intervals() -> None:
    assert quiet_after([0, 10, 20, 30, 40]) == 30.0  # every 10 s: quiet after 30 s, not 10 minutes
    assert quiet_after([0, 600, 1200, 1800]) == 1800.0
    assert quiet_after([0, 1, 2, 3, 4]) == 30.0  # never sooner than the floor
    assert quiet_after([0, 10]) == QUIET_DEFAULT_S  # too few steps to know the cadence


def _report(root: Path, now: float, **options: bool) -> tuple[int, dict[str, object]]:
    report = build_report(root, now, **options)
    return report.exit_status, report.to_dict()


def test_a_run_that_reached_num_rollout_with_its_phases_closed_has_ended(tmp_path: Path) -> None:
    root = write_demo_run(tmp_path / "run", 4, num_rollout=4)
    stamp(root, EPOCH - 600)
    status, document = _report(root, EPOCH + 30 * 86400)  # a month later: still not an alarm
    codes = {a["code"]: a["level"] for a in document["advisories"]}  # type: ignore[union-attr]
    assert codes.get("run_ended") == "info" and "no_new_data" not in codes
    assert document["run"]["state"] == "ended"  # type: ignore[index]
    assert status == (1 if "warning" in codes.values() else 0)  # only what else is wrong counts
    assert "state: ended" in render_report(build_report(root, EPOCH + 30 * 86400))


def test_a_run_that_went_quiet_before_its_last_step_keeps_the_alarm(tmp_path: Path) -> None:
    root = write_demo_run(tmp_path / "run", 4, num_rollout=10)
    stamp(root, EPOCH - 600)
    status, document = _report(root, EPOCH + 30 * 86400, quiet_ok=True)  # --quiet-ok: the args say 10 steps
    codes = {a["code"]: a["level"] for a in document["advisories"]}  # type: ignore[union-attr]
    assert codes.get("no_new_data") == "critical" and "run_ended" not in codes and status == 2
    assert document["run"]["state"] == "quiet"  # type: ignore[index]


def test_a_run_quiet_inside_an_open_phase_keeps_the_alarm_even_with_quiet_ok(tmp_path: Path) -> None:
    root = write_demo_run(tmp_path / "run", 4, num_rollout=4)
    marker = {"name": "actor_train", "t0": EPOCH - 650, "t1": -1.0, "node": "n", "gpus": [0], "rank": 0}
    hour = next((root / "dashboard" / "phases").iterdir())
    with hour.open("a") as out:
        out.write(json.dumps({**marker, "role": "train"}) + "\n")
    stamp(root, EPOCH - 600)
    status, document = _report(root, EPOCH + 86400, quiet_ok=True)
    codes = {a["code"] for a in document["advisories"]}  # type: ignore[union-attr]
    assert "no_new_data" in codes and "run_ended" not in codes and status == 2
    assert document["run"]["open_phases"] == 1  # type: ignore[index]


def test_quiet_ok_leaves_a_quiet_run_without_num_rollout_to_the_rest(tmp_path: Path) -> None:
    root = write_demo_run(tmp_path / "run", 4)
    stamp(root, EPOCH - 600)
    loud, _ = _report(root, EPOCH + 86400)
    calm, document = _report(root, EPOCH + 86400, quiet_ok=True)
    assert loud == 2 and calm < 2
    assert "no_new_data" in {a["code"] for a in document["advisories"]}  # type: ignore[union-attr]


def test_a_copied_finished_run_is_not_live(tmp_path: Path) -> None:
    root = tmp_path / "copy"
    shutil.copytree(GOLDEN / "live_streams", root)  # cp -r: every mtime is now
    newest = 1787226017.5
    report = build_report(root, newest + 86400 * 104)
    assert report.health.state is RunState.QUIET and report.health.clock.from_records
    assert report.data_age == pytest.approx(86400 * 104)
