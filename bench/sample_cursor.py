"""Benchmark: cursor keys on the sample screen of a 32k-token response must paint within 50 ms.

Builds, in memory, one sample with a 32,768-token response after a 1,024-token
prompt, every per-token series, and six 700-token loss-masked spans (tool
outputs); the step is assembled with core's own row and group functions, so
no dump (and no torch) is needed. Then it runs the app headless and, for each
key, measures from posting the key to the end of the first frame Textual
writes after it (Pilot's own settling is not counted: a user does not wait
for it). Keys: right, shift+right, n (next outlier), w (window), end/home,
then right/shift+left with the chart showing, then right/n with the token
text coloured by |lp diff| too (h). Prints median, p90 and max
per key at each terminal size; exits 1 when a median misses the target.

    python bench/sample_cursor.py [--sizes 160x48,80x24] [--repeats 40]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from textual.app import App  # noqa: E402

from miles_tui.core.dump import PER_TOKEN_FIELDS, FieldState, OpenStep, StepSummary  # noqa: E402  # noqa: E402
from miles_tui.core.dump.resolve import TrainRow  # noqa: E402
from miles_tui.core.dump.summary import group_rows, sample_row, step_aggregate  # noqa: E402

TARGET_MS = 50.0
"""Median key-to-paint budget for every measured key."""


def synthetic_step(response_length: int = 32_768, prompt_length: int = 1_024) -> OpenStep:
    """One sample with a long response, every per-token field and multi-turn loss masks."""
    rng = np.random.default_rng(7)
    total = prompt_length + response_length
    loss_mask = np.ones(response_length, dtype=np.int64)
    for start in range(2_000, response_length, 6_000):
        loss_mask[start : start + 700] = 0  # tool outputs
    rollout = -np.abs(rng.normal(0.5, 0.5, response_length))
    per_token: dict[str, Any] = {name: rng.normal(size=response_length) for name in PER_TOKEN_FIELDS}
    per_token["rollout_log_probs"] = rollout
    per_token["log_probs"] = rollout + rng.normal(0, 0.02, response_length)
    train = TrainRow(
        sample_index=0,
        response_length=response_length,
        total_length=total,
        loss_mask=loss_mask,
        per_token=per_token,
        field_state=dict.fromkeys(PER_TOKEN_FIELDS, FieldState.OK),
        alignment_failed=False,
        dumped_rank=0,
        normalized_reward=0.5,
        truncated=False,
        cp_size=1,
    )
    sample = {
        "index": 0,
        "group_index": 0,
        "tokens": rng.integers(0, 100, total).tolist(),
        "response_length": response_length,
        "reward": 1.0,
        "status": "completed",
        "weight_versions": ["3", "5"],
        "loss_mask": loss_mask.tolist(),
    }
    row = sample_row(4, sample, train, 1.0)
    groups = group_rows([row], False)
    summary = StepSummary(4, False, (row,), tuple(groups), step_aggregate(4, False, [row], groups), (), True, ())
    return OpenStep(summary, (sample,), {0: train}, frozenset())


class PaintClock:
    """Times a key press from posting the key to the end of the first frame after it.

    Wraps the app's display hook, the one place a finished frame leaves the app.
    """

    def __init__(self, app: App[Any]) -> None:
        self.frames: list[float] = []
        display = app._display

        def stamped(*args: Any, **kwargs: Any) -> Any:
            result = display(*args, **kwargs)
            self.frames.append(time.perf_counter())
            return result

        app._display = stamped  # type: ignore[method-assign]

    async def press(self, pilot: Any, key: str) -> float:
        """Seconds from posting ``key`` to the end of the first frame painted after it."""
        self.frames.clear()
        started = time.perf_counter()
        await pilot.press(key)
        await pilot.pause()
        if not self.frames:
            raise AssertionError(f"{key} painted nothing")
        return self.frames[0] - started


KEY_PLAN: tuple[tuple[str, int], ...] = (
    ("right", 1),
    ("shift+right", 1),
    ("n", 1),
    ("w", 0),
    ("end", 0),
    ("home", 0),
    ("c", -1),
    ("right", 1),
    ("shift+left", 1),
    ("h", -1),
    ("right", 1),
    ("n", 1),
)
"""Keys in order, with repeats as a multiple of --repeats (0: twice, -1: once); ``c`` turns the chart on,
``h`` the coloured token text."""

MODE_KEYS = {"c": "chart", "h": "colour"}
"""Keys that turn on a mode; the keys after them are labelled with every mode on."""


async def measure(screen_factory: Callable[[], Any], size: tuple[int, int], repeats: int) -> dict[str, list[float]]:
    """Key-to-paint seconds per key label at one terminal size."""

    class Bench(App[None]):
        def on_mount(self) -> None:
            self.push_screen(screen_factory())

    app = Bench()
    timings: dict[str, list[float]] = {}
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        clock = PaintClock(app)
        modes: list[str] = []
        for key, times in KEY_PLAN:
            label = f"{key} ({', '.join(modes)})" if modes and key not in MODE_KEYS else key
            count = repeats * times if times > 0 else (2 if times == 0 else 1)
            for _ in range(count):
                timings.setdefault(label, []).append(await clock.press(pilot, key))
            if key in MODE_KEYS:
                modes.append(MODE_KEYS[key])
    return timings


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="160x48,80x24", help="terminal sizes, comma separated")
    parser.add_argument("--repeats", type=int, default=40, help="presses per repeated key")
    args = parser.parse_args()

    from miles_tui.core.dump import Run
    from miles_tui.tui.screens.sample_screen import SampleScreen

    step = synthetic_step()
    golden = REPO / "tests" / "golden" / "tp_dup"
    detokenizer = Run(golden, use_cache=False).detokenizer if golden.is_dir() else None
    failed = False
    for spec in args.sizes.split(","):
        width, height = (int(part) for part in spec.lower().split("x"))
        timings = asyncio.run(measure(lambda: SampleScreen(step, 0, detokenizer, None), (width, height), args.repeats))
        print(f"sample screen, 32,768-token response, {width}x{height}: key -> painted frame")
        for label, values in timings.items():
            ordered = sorted(values)
            median = statistics.median(values) * 1e3
            p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))] * 1e3
            verdict = "ok" if median <= TARGET_MS else f"OVER {TARGET_MS:.0f} ms"
            failed = failed or median > TARGET_MS
            print(
                f"  {label:>24}  median {median:5.1f} ms  p90 {p90:5.1f} ms  max {max(values) * 1e3:6.1f} ms"
                f"  n={len(values):<3} {verdict}"
            )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
