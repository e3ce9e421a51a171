"""The starvation rows of the overview (MFU, wait per step, data-buffer depth) and the header's MFU, in the app."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from miles_tui.tui.widgets.run_header import RunHeader
from miles_tui.tui.widgets.starvation_rows import StarvationRows
from tests.conftest import write_demo_run
from tests.harness import frozen_app, screen_text, settle


def _header(text: str) -> str:
    return text.splitlines()[0]


async def test_golden_run_shows_mfu_and_wait_and_says_the_buffer_is_not_recorded(
    golden_copy: Callable[[str], Path],
) -> None:
    app = frozen_app(golden_copy("live_streams"))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        rows = app.screen.query_one(StarvationRows).texts()
        # the truth's mfu_summary: mean 0.110329, latest 0.116367, peak 989
        assert rows[0] == "MFU mean 11.0% of 989 TFLOP/s 11.6%"
        assert rows[1].startswith("wait 57%–61% (1−train/step)")
        assert rows[2] == "buffer not recorded by this run –"
        text = screen_text(app)
        assert "not recorded by this run" in text and "mean 11.0% of 989 TFLOP/s" in text
        # 80 columns: the longest form that fits after the whole status
        status = " miles-tui live_streams  step –  ● LIVE  data 0s old"
        assert _header(text).rstrip() == status + "     MFU 11.6% · mean 11.0%"
        await pilot.resize_terminal(160, 48)
        await settle(pilot)
        assert _header(screen_text(app)).rstrip().endswith("  MFU 11.6% · mean 11.0% of 989 TFLOP/s")
        await pilot.resize_terminal(60, 24)  # no form fits beside the status: none is shown, none is cut
        await settle(pilot)
        assert _header(screen_text(app)).rstrip() == status


async def test_demo_buffer_depth_and_a_header_mfu_that_fits(demo_run: Path) -> None:
    app = frozen_app(demo_run)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        header = app.screen.query_one(RunHeader)
        figures = app.model.starvation
        assert figures is not None and figures.buffer is not None and figures.mfu is not None
        lengths = [int(v) for v in figures.buffer.length]
        rows = app.screen.query_one(StarvationRows).texts()
        assert rows[2] == f"buffer {min(lengths)}–{max(lengths)} groups {lengths[-1]}"
        assert "(1−train/step)" not in rows[1]  # the demo logs perf/wait_time_ratio, as miles does
        line = _header(screen_text(app)).rstrip()
        assert line.startswith(" miles-tui demo  step 3")
        shown = [form for form in header.mfu if line.endswith(form)]
        assert shown and len(shown[0]) <= 80, line  # a whole form at the right end, never a cut one


async def test_new_steps_move_the_rows(demo_run: Path) -> None:
    app = frozen_app(demo_run)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        before = app.screen.query_one(StarvationRows).figures
        assert before is not None and len(before.bubbles.step) == 4
        write_demo_run(demo_run, 3, start=4)
        app.poll_now()
        await settle(pilot)
        after = app.screen.query_one(StarvationRows).figures
        assert after is not None and len(after.bubbles.step) == 7
        assert after.buffer is not None and len(after.buffer.length) == 7
        assert after.bubbles.wait_ratio[6] > after.bubbles.wait_ratio[5]  # step 6 found the buffer empty
        assert after.buffer.length[6] == 0
        assert "buffer" in screen_text(app)


async def test_a_run_without_telemetry_shows_no_starvation_rows(golden_copy: Callable[[str], Path]) -> None:
    root = golden_copy("tp_dup")
    assert not (root / "dashboard" / "metrics.jsonl").exists()
    app = frozen_app(root)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        text = screen_text(app)
        assert "starvation" not in text and "not recorded by this run" not in text
        assert app.screen.query_one(StarvationRows).has_class("absent")


async def test_a_malformed_buffer_record_is_skipped(tmp_path: Path) -> None:
    root = write_demo_run(tmp_path / "run", 2)
    with (root / "dashboard" / "data_buffer.jsonl").open("a") as out:
        out.write(json.dumps({"ts": 1.0, "length": "many"}) + "\n")
    app = frozen_app(root)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        figures = app.model.starvation
        assert figures is not None and figures.buffer is not None
        assert figures.buffer.skipped == 1 and len(figures.buffer.length) == 2


async def test_gpu_view_rows_put_the_wait_and_the_buffer_on_the_window(
    golden_copy: Callable[[str], Path], demo_run: Path
) -> None:
    app = frozen_app(golden_copy("live_streams"))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("u")
        await settle(pilot)
        text = screen_text(app)
        wait = next(line for line in text.splitlines() if line.startswith(" wait/step"))
        assert wait.rstrip().endswith("61% worst of 18")  # 18 steps ended in the last 15 minutes
        assert " buffer         not recorded by this run" in text
    app = frozen_app(demo_run)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await pilot.press("u")
        await settle(pilot)
        assert app.model.starvation is not None and app.model.starvation.buffer is not None
        lengths = app.model.starvation.buffer.length
        buffer = next(line for line in screen_text(app).splitlines() if line.startswith(" buffer"))
        assert buffer.rstrip().endswith(f"{int(lengths.min())}–{int(lengths.max())} groups")


async def test_huge_figures_are_shortened_never_cut(tmp_path: Path) -> None:
    root = write_demo_run(tmp_path / "run", 2)
    with (root / "dashboard" / "data_buffer.jsonl").open("a") as out:
        out.write(json.dumps({"ts": 2e9, "length": 10**30}) + "\n")
    with (root / "dashboard" / "metrics.jsonl").open("a") as out:
        record = {"perf/actor_train_mfu": 1e12, "perf/mfu_peak_tflops": 989.0, "rollout/step": 2}
        out.write(json.dumps({"ts": 2e9, "step_key": "rollout/step", "step": 2, "metrics": record}) + "\n")
    app = frozen_app(root)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        rows = app.screen.query_one(StarvationRows).texts()
        assert rows[2].endswith("–1.00e30 groups 1.00e30"), rows[2]
        latest = rows[0].split()[-1]
        text = screen_text(app)
        assert latest.endswith("%") and latest in text, "the MFU's newest value whole on screen"
        assert "1.00e30 groups" in text
