"""The run's health reaches every header and the sidebar through one core function and one signal."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from miles_tui.core.analysis import advisories
from miles_tui.core.commands.report import build_report
from miles_tui.tui.app import MilesApp
from miles_tui.tui.screens.overview_screen import OverviewScreen
from miles_tui.tui.screens.step_screen import StepScreen
from tests.conftest import EPOCH
from tests.harness import frozen_app, screen_text, settle


def _header(app: MilesApp) -> str:
    return screen_text(app).splitlines()[0]


async def test_the_monitor_and_report_say_the_same(demo_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run name, steps, latest, data age and advisories: report's and the header's come from one function.

    The truncation rule names the run's cap from meta.json, which the monitor reads after its first step poll:
    its step rules must run again once it has.
    """
    monkeypatch.setattr(advisories, "TRUNCATED_ALARM_FRACTION", 0.05)  # the demo truncates ~20%
    meta = demo_run / "dashboard" / "meta.json"
    document = json.loads(meta.read_text())
    meta.write_text(json.dumps({**document, "args": {**document.get("args", {}), "rollout_max_response_len": 77}}))
    os.utime(meta, (EPOCH - 600, EPOCH - 600))
    with (demo_run / "dashboard" / "metrics.jsonl").open("a") as handle:
        handle.write("{not json\n")  # a telemetry advisory beside the step ones
    app = frozen_app(demo_run)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)  # the first step poll ran before meta.json was read: its rules run again with it
        report = build_report(demo_run, EPOCH)
        model = app.model
        assert (model.run_name, model.latest, model.data_age) == (report.run_name, report.latest, report.data_age)
        assert [(a.code, a.message) for a in model.advisories] == [(a.code, a.message) for a in report.advisories]
        assert "malformed_stream_lines" in {a.code for a in model.advisories}
        assert any("--rollout-max-response-len (77)" in a.message for a in model.advisories)


async def test_a_telemetry_advisory_shows_although_no_step_changed(demo_run: Path) -> None:
    """A malformed line arriving on a quiet run reaches the sidebar (it waited for a step advisory to change)."""
    app = frozen_app(demo_run)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        assert "malformed" not in screen_text(app)
        with (demo_run / "dashboard" / "metrics.jsonl").open("a") as handle:
            handle.write("{not json\n")
        app._poll_streams()
        await settle(pilot)
        assert isinstance(app.screen, OverviewScreen)
        assert "malformed" in screen_text(app)


async def test_every_header_follows_the_run_without_its_screen(demo_run: Path) -> None:
    """The step screen has no header code: the signal brings the new name, age and follow state."""
    now = [EPOCH]
    app = frozen_app(demo_run, lambda: now[0])
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        app.navigation.open_step(3)
        await settle(pilot)
        assert isinstance(app.screen, StepScreen)
        assert "data 10m00s old" in _header(app), _header(app)
        meta = demo_run / "dashboard" / "meta.json"
        meta.write_text(json.dumps({**json.loads(meta.read_text()), "run_name": "renamed-run"}))
        os.utime(meta, (EPOCH - 600, EPOCH - 600))
        now[0] = EPOCH + 120
        app.poll_now()
        await settle(pilot)
        header = _header(app)
        assert "renamed-run" in header and "12m00s ago" in header, header
        assert "○ QUIET since" in header and "LIVE" not in header, header
        await pilot.press("f")
        await settle(pilot)
        assert "PAUSED" in _header(app)


async def test_step_rules_run_again_when_meta_json_changes(demo_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A telemetry poll that brings a new meta.json (the run's arguments) makes the step rules run again with it,
    on a static run too (no next tick would)."""
    monkeypatch.setattr(advisories, "TRUNCATED_ALARM_FRACTION", 0.05)  # the demo truncates ~20%
    meta = demo_run / "dashboard" / "meta.json"
    document = json.loads(meta.read_text())
    meta.unlink()
    app = frozen_app(demo_run, follow=False)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        assert any(a.code == "truncated_samples" for a in app.model.advisories)
        assert not any("(77)" in a.message for a in app.model.advisories)
        meta.write_text(json.dumps({**document, "args": {"rollout_max_response_len": 77}}))
        os.utime(meta, (EPOCH - 600, EPOCH - 600))
        app._poll_streams()  # only the telemetry side polls
        await settle(pilot)
        assert any("--rollout-max-response-len (77)" in a.message for a in app.model.advisories)
        assert "--rollout-max-response-len (77)" in screen_text(app)


async def test_a_corrupt_older_step_is_critical_in_report_as_in_the_monitor(demo_run: Path) -> None:
    """report read only the newest step: a corrupt step 1 was critical in the monitor and 'nothing needs
    attention' (exit 0) in report."""
    broken = demo_run / "rollout_data" / "1.pt"
    broken.write_bytes(broken.read_bytes()[: broken.stat().st_size // 2])
    os.utime(broken, (EPOCH - 600, EPOCH - 600))
    report = build_report(demo_run, EPOCH)
    assert report.exit_status == 2
    [critical] = [a for a in report.advisories if a.code == "step_unreadable"]
    assert critical.rollout_id == 1 and str(broken) in critical.message
    app = frozen_app(demo_run)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        assert [(a.code, a.message) for a in app.model.advisories] == [(a.code, a.message) for a in report.advisories]


# -- issue 24.4: one clock, and a header that never calls a copy, a stopped run or a stranger folder LIVE ----


async def test_a_copied_finished_run_reads_quiet_since_its_last_record_not_live(tmp_path: Path) -> None:
    import shutil

    from tests.conftest import GOLDEN

    root = tmp_path / "copy"
    shutil.copytree(GOLDEN / "live_streams", root)  # cp -r: every file is brand new
    newest = 1787226017.5
    app = frozen_app(root, newest + 104 * 86400)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        header = _header(app)
        assert "LIVE" not in header and "QUIET since 2026-08-20 11:40 UTC" in header, header
        assert "104d00h ago" in header, header  # the header's age and report's are the record's


async def test_a_folder_that_is_not_a_dump_never_reads_live(tmp_path: Path) -> None:
    (tmp_path / "photos").mkdir()
    (tmp_path / "photos" / "a.txt").write_text("x")
    app = frozen_app(tmp_path / "photos")
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        header = _header(app)
        assert "LIVE" not in header and "NOT A DUMP" in header, header


async def test_a_run_that_reached_its_last_step_reads_ended_with_its_last_data(tmp_path: Path) -> None:
    from tests.conftest import stamp, write_demo_run

    root = write_demo_run(tmp_path / "run", 4, num_rollout=4)
    stamp(root, EPOCH - 600)
    app = frozen_app(root, EPOCH + 86400)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        header = _header(app)
        assert "■ ENDED · last data 2026-05-28" in header and "LIVE" not in header, header
        assert "no_new_data" not in screen_text(app)


async def test_a_run_that_stops_is_quiet_after_a_few_of_its_own_step_intervals(tmp_path: Path) -> None:
    from tests.conftest import write_demo_run

    root = write_demo_run(tmp_path / "run", 6)
    for rid in range(6):  # a step every 20 s, as the files say
        for path in root.rglob(f"{rid}*.pt"):
            os.utime(path, (EPOCH - 700 + 20 * rid, EPOCH - 700 + 20 * rid))
    now = [EPOCH - 600 + 30]
    app = frozen_app(root, lambda: now[0])
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        assert "● LIVE" in _header(app), _header(app)
        now[0] = EPOCH - 600 + 61  # three 20 s intervals: quiet (was: LIVE for 10 minutes)
        app.poll_now()
        await settle(pilot)
        assert "QUIET since" in _header(app) and "LIVE" not in _header(app), _header(app)
