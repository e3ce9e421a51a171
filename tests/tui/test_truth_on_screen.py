"""Issue 24 as a user meets it: each test reads only what the screen (or the command line) says, through
keys and the public command, so it holds for any implementation and failed on the code before the issue.

1. staleness step 10 at 100x30: every number drawn is its sample's value at the precision shown, and each
   row keeps its sample index after ``→`` ×20 (numbers were cut: 0.018 read ``0.01``; rows lost identity).
2. the demo's zero_std_groups that flickered away at step 68: still listed, cleared, and in the log.
5. ``report`` on a run that reached its last step: exit 0 a month later, not a critical alarm for ever.
9. degenerate step 1's scatter: its 6 truncated samples of 16 are all counted on screen.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from miles_tui.core.commands.export import step_export
from miles_tui.core.dump import Run
from miles_tui.core.synth.demo import run_demo
from miles_tui.tui.app import make_app
from tests.conftest import EPOCH, stamp, write_demo_run
from tests.harness import frozen_app, screen_text, settle

_NUMBER = re.compile(r"^-?\d+\.\d+$")


def _reads_as(token: str, row: dict[str, Any]) -> bool:
    """Whether a decimal on screen is one of the row's values at the precision it shows."""
    decimals = len(token.split(".")[1])
    values = [v for v in row.values() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return any(math.isfinite(v) and abs(float(token) - v) <= 0.5 * 10.0**-decimals + 1e-12 for v in values)


def _table_lines(text: str, samples: dict[int, dict[str, Any]]) -> list[tuple[int | None, list[str]]]:
    """The table's body lines between its box edges: (the sample index the line starts with, its words)."""
    out = []
    for line in text.splitlines():
        if not line.startswith("│") or not line.rstrip().endswith("│"):
            continue
        words = line.strip("│ ").split()
        if not words or words[0] == "sample" or not any(ch.isalnum() for ch in "".join(words)):
            continue  # the header, blank lines and the scrollbar
        head = int(words[0]) if words[0].isdigit() and int(words[0]) in samples else None
        out.append((head, words))
    return out


async def test_finding_1_no_number_is_cut_and_rows_keep_their_sample(golden_copy: Any) -> None:
    root = golden_copy("staleness")
    samples = {row["sample_index"]: row for row in step_export(Run(root), 10, False, EPOCH)["samples"]}
    app = make_app(root, poll_seconds=3600, clock=lambda: EPOCH, start=(10, False, None))
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        for keys in ((), ("right",) * 20):
            await pilot.press(*keys)
            await settle(pilot)
            text = screen_text(app)
            lines = _table_lines(text, samples)
            assert len(lines) == len(samples), text
            for head, words in lines:
                assert head is not None, f"after {len(keys)} →: a row lost its sample index: {words}\n{text}"
                cut = [w for w in words if _NUMBER.match(w) and not _reads_as(w, samples[head])]
                assert not cut, f"sample {head}: {cut} are not its values (cut?)\n{text}"


async def _summarised(app: Any, pilot: Any, steps: int) -> None:
    for _ in range(200):
        await settle(pilot)
        if len(app.model.summaries) >= steps and "summarizing" not in screen_text(app):
            return
    raise AssertionError("the steps were never summarised")


async def test_finding_2_a_flickering_advisory_keeps_its_history(tmp_path: Path) -> None:
    root = tmp_path / "demo"
    run_demo(root, 69, 0.0, max_steps=69, clock=lambda: EPOCH - 600, sleep=lambda _s: None)
    stamp(root, EPOCH - 600)
    app = frozen_app(root)
    async with app.run_test(size=(100, 30)) as pilot:
        await _summarised(app, pilot, 69)
        text = screen_text(app)
        assert "zero_std_groups" in text and "cleared at step 68" in text, text  # the sidebar keeps it, dimmed
        await pilot.press("a", "a")  # the advisory log
        await settle(pilot)
        text = screen_text(app)
        line = next((line for line in text.splitlines() if "zero_std_groups" in line), "")
        assert "cleared at step 68" in line and "advisories: none" not in text, text


def test_finding_5_a_run_that_ended_is_not_an_alarm(tmp_path: Path) -> None:
    root = write_demo_run(tmp_path / "run", 4)
    meta = root / "dashboard" / "meta.json"
    document = json.loads(meta.read_text())
    document["args"] = {**document.get("args", {}), "num_rollout": 4}  # miles ran steps 0-3 of 4: it ended
    meta.write_text(json.dumps(document))
    stamp(root, EPOCH - 600)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-m", "miles_tui.tui.cli", "report", str(root)],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stdout + done.stderr  # info, or a warning about the samples
    assert "no_new_data" not in done.stdout, done.stdout


@pytest.mark.parametrize("size", [(100, 30), (60, 20)])
async def test_finding_9_every_truncated_sample_is_counted(golden_copy: Any, size: tuple[int, int]) -> None:
    root = golden_copy("degenerate")
    rows = step_export(Run(root), 1, False, EPOCH)["samples"]
    truncated = sum(bool(row["truncated"]) for row in rows)
    assert (len(rows), truncated) == (16, 6)
    app = make_app(root, poll_seconds=3600, clock=lambda: EPOCH, start=(1, False, None))
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        await pilot.press("p")
        await settle(pilot)
        text = screen_text(app)
        assert f"{len(rows)} samples, {truncated} truncated" in text, text


async def test_the_header_and_the_gpu_lanes_drop_whole_words_never_part_of_a_number(tmp_path: Path) -> None:
    """A narrow pane cut the header mid-date (``since 2026-08-2``) or lost the age after its ``·``, and a GPU
    lane's ``104d02h stale`` to ``104d0``: what does not fit is left out whole."""
    import shutil

    from tests.conftest import GOLDEN

    root = tmp_path / "run"
    shutil.copytree(GOLDEN / "live_streams", root)
    meta = root / "dashboard" / "meta.json"
    meta.write_text(json.dumps({**json.loads(meta.read_text()), "run_name": "qwen3-30b-a3b-grpo-math-v7"}))
    now = 1787226017.5 + 104 * 86400 + 7300  # 104d02h after its newest record
    app = make_app(root, poll_seconds=3600, clock=lambda: now)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await pilot.press("u")
        await settle(pilot)
        for width in range(30, 121, 3):
            await pilot.resize_terminal(width, 30)
            await settle(pilot, rounds=2)
            lines = screen_text(app).splitlines()
            header = lines[0].strip()
            assert "○ QUIET" in header, f"{width}: {header!r}"
            assert re.search(r"since(?! \d{4}-\d\d-\d\d \d\d:\d\d UTC)", header) is None, f"{width}: {header!r}"
            status, mfu = re.fullmatch(
                r"(.*?)(?:\s+(MFU [\d.]+%(?: · mean [\d.]+%)?(?: of [\d,]+ TFLOP/s)?))?", header
            ).groups()
            assert status.endswith(("QUIET", "UTC", "104d02h ago")), f"{width}: {header!r}"
            assert mfu is None or status.endswith("104d02h ago"), f"{width}: the MFU shown before the age: {header!r}"
            for line in (line for line in lines if line.startswith(" 10.0.0.7:")):
                words = line.split()
                tail = [w for w in words if re.match(r"^\d+d", w)]  # the lane's age, if shown
                assert all(w in ("104d02h", "104d02h…") for w in tail), f"{width}: {line!r}"
                assert line.rstrip().endswith(("stale", "…")), f"{width}: {line!r}"
