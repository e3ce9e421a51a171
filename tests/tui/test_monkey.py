"""Monkey test: hypothesis drives the real app with Pilot, the way a user who tries every key would.

Each example opens the app on one run (the seeded demo written by core's demo
writer, or an aged copy of a golden case), at a window size from 40x12 to
200x60, then takes a sequence of steps, each drawn from what the app offers at
that moment: a key of the active bindings (the focused widget's, the screen's
and the app's, collected afresh on every screen), a navigation key, a window
resize, or, when a text box has the focus, a filter string drawn from the
filter grammar or plain garbage, then enter. After every step:

- no exception reached the app, and no worker died of one;
- the app is still running (the quit keys are never drawn);
- the screen stack stays bounded (global views replace each other);
- the visible table agrees with the model: the overview lists exactly the
  model's steps, the step table exactly the summary's rows that pass the
  filter (in rollout order, or sorted), the groups table exactly its groups,
  the compare table exactly the compared group slots,
  each drawn row names its own key in its first cell, unreadable samples (and
  only they) draw UNREAD, and steps with unreadable samples say so;
- once every worker has finished, no table still promises rows ("loading…")
  and the header names the run's latest step.

A failure prints the shrunk step sequence (``note``). CI runs a small fixed
budget (derandomized, so CI is reproducible); ``MILES_TUI_MONKEY_EXAMPLES=N``
runs the slow, random variant with N examples (``-m slow``).
"""

from __future__ import annotations

import asyncio
import os
import string
from collections.abc import Hashable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from textual.pilot import Pilot
from textual.widgets import Input
from textual.worker import Worker, WorkerState

from miles_tui.core.dump import ROW_COLUMNS
from miles_tui.tui.app import MilesApp, make_app
from miles_tui.tui.screens.compare_screen import CompareScreen
from miles_tui.tui.screens.overview_screen import OverviewScreen
from miles_tui.tui.screens.step_screen import StepScreen, _sort_value
from miles_tui.tui.views.row_filter import ALIASES, STATUSES
from miles_tui.tui.widgets.run_header import RunHeader
from miles_tui.tui.widgets.virtual_table import VirtualTable
from screenshots.scenes import EPOCH, GOLDEN, build_demo, build_golden
from tests.harness import screen_text

GOLDEN_CASES = ("truncated_shard", "cp_legacy_ambiguous", "live_streams", "degenerate", "tp_dup", "staleness")
"""Golden cases the monkey visits besides the demo: unreadable data, telemetry, zero-std groups, conversations."""

MAX_STACK = 8
"""default + overview + step + outliers/compare + sample + a global view + a modal, and one to spare."""

NEVER = frozenset({"q", "ctrl+q", "ctrl+c", "ctrl+p"})
"""Quit keys (the monkey must keep the app running), and the command palette (whose Quit command is one enter away)."""

NAVIGATION = (
    "up",
    "down",
    "left",
    "right",
    "enter",
    "escape",
    "backspace",
    "tab",
    "home",
    "end",
    "pageup",
    "pagedown",
    "shift+left",
    "shift+right",
)
"""Keys a user presses whatever the bindings say."""

WAITING = ("loading", "finding", "reading", "waiting for the first")
"""Placeholders that promise rows: once every worker has finished, an empty table must say why instead."""

CI_EXAMPLES = 10
SLOW_EXAMPLES = int(os.environ.get("MILES_TUI_MONKEY_EXAMPLES", "0") or 0)


# -- strategies -------------------------------------------------------------------------------------------

_OPS = ("=", "!=", ">", ">=", "<", "<=", "~")
_NAMES = (*ROW_COLUMNS, *ALIASES, "bogus", "Reward", "")
_VALUES = st.one_of(
    st.integers(-5, 10**9).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["true", "no", "none", "-", "v1", "v12", "+3", "abc", "completed", "1e999", "", "nan"]),
)
_WORDS = st.sampled_from([*STATUSES, "unreadable", "mixed", "removed", "zero-std", "degenerate", "bogus"])
_TERM = st.one_of(
    st.builds(lambda n, o, v: f"{n}{o}{v}", st.sampled_from(_NAMES), st.sampled_from(_OPS), _VALUES),
    _WORDS,
    _WORDS.map(lambda w: f"not-{w}"),
    _WORDS.map(lambda w: f"!{w}"),
)
GRAMMAR = st.lists(_TERM, min_size=0, max_size=4).map(" ".join)
"""Filters drawn from the step table's grammar (and its near misses)."""
GARBAGE = st.text(
    st.characters(blacklist_categories=("Cc", "Cs"), blacklist_characters="\x7f") | st.sampled_from(string.punctuation),
    max_size=24,
)
"""Anything a user could type, glob characters and unicode included."""
TYPED = st.one_of(GRAMMAR, GARBAGE)
SAFE_NAME = st.text(st.sampled_from(string.ascii_letters + string.digits + "._- "), max_size=16)
"""What the monkey types as a CSV path: names in the scratch working directory, never a path that leaves it."""


# -- the runs ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The demo run and aged copies of the golden cases that are present."""
    root = tmp_path_factory.mktemp("monkey-runs")
    made = {"demo": build_demo(root / "demo")}
    if GOLDEN.is_dir():
        for case in GOLDEN_CASES:
            if (GOLDEN / case).is_dir():
                made[case] = build_golden(case, root / case)
    return made


@pytest.fixture
def scratch_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """ctrl+s then enter saves a CSV in the working directory: make that a scratch folder, not the checkout."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def worker_errors(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Errors that killed a worker (a worker started with exit_on_error=False dies quietly otherwise)."""
    errors: list[str] = []
    run = Worker._run

    async def watched(self: Worker[Any], app: Any) -> None:
        await run(self, app)
        if self.state is WorkerState.ERROR:
            errors.append(f"worker {self.name!r} of {type(self.node).__name__}: {self.error!r}")

    monkeypatch.setattr(Worker, "_run", watched)
    yield errors


# -- invariants ---------------------------------------------------------------------------------------------


def _first_cells(table: VirtualTable) -> Iterator[tuple[Hashable, str]]:
    """(key, first drawn cell) of the rows on screen (when the table is not scrolled sideways)."""
    if table.scroll_offset.x or not table.columns:
        return
    width = table.columns[0].width
    for y in range(1, max(table.size.height, 1)):
        index = table.scroll_offset.y + y - 1
        if index >= len(table.rows):
            return
        text = "".join(segment.text for segment in table.render_line(y))[:width]
        yield table.rows[index].key, text.strip()


def _check_step(screen: StepScreen) -> None:
    summary = screen.summary
    if summary is None:
        return
    table = screen.query_one("#samples", VirtualTable)
    keys = list(table.keys)
    if screen.show_groups:
        expected_groups = [("group", g.group_index) for g in summary.groups]
        assert sorted(keys, key=repr) == sorted(expected_groups, key=repr), "the groups table lost or invented a group"
        for key, first in _first_cells(table):
            group = key[1] if isinstance(key, tuple) else key
            assert first == ("–" if group is None else str(group)), f"group row {key} draws {first!r}"
        return
    rows = [r for r in summary.rows if screen.row_filter is None or screen.row_filter(r)]
    by_index = {r.sample_index: r for r in rows}
    assert sorted(keys) == sorted(by_index), "the step table does not show exactly the rows that pass the filter"
    if screen.sort_key is None:
        assert keys == [r.sample_index for r in rows], "rollout order lost"
    elif screen.sort_key in ROW_COLUMNS:
        values = [_sort_value(getattr(by_index[k], screen.sort_key)) for k in keys]
        present = [v for v in values if v[0] == 0]
        wanted = sorted(present, reverse=screen.sort_reverse)
        assert present == wanted, f"not sorted by {screen.sort_key}"
    for key, first in _first_cells(table):
        assert first == str(key), f"row {key} draws {first!r} in its first cell"
    for row in table.rows[table.scroll_offset.y : table.scroll_offset.y + table.size.height]:
        unread = any(cell.plain.startswith("UNREAD") for cell in row.cells)
        failed = by_index[row.key].alignment_failed and summary.complete
        assert unread == failed, f"sample {row.key}: unreadable {failed}, yet UNREAD drawn: {unread}"


def _check_overview(app: MilesApp, screen: OverviewScreen) -> None:
    table = screen.query_one("#steps", VirtualTable)
    assert list(table.keys) == app.model.steps(), "the overview does not list exactly the model's steps"
    for key, first in _first_cells(table):
        step = key[0] if isinstance(key, tuple) else key
        assert first == str(step), f"step row {key} draws {first!r}"
    for row in table.rows:
        summary = app.model.summaries.get(row.key)
        if summary is not None and summary.complete and summary.aggregate.alignment_failed:
            assert "unreadable" in row.cells[-1].plain, f"step {row.key} hides its unreadable samples"


def _check_compare(screen: CompareScreen) -> None:
    comparison = screen.comparison
    if comparison is None or screen.tracing:
        return
    table = screen.query_one("#groups", VirtualTable)
    assert list(table.keys) == [("group", g.group_index) for g in comparison.groups], "compare lost a group"


def check(app: MilesApp, worker_errors: list[str]) -> None:
    """Every invariant, after one step."""
    assert app._exception is None, f"an exception reached the app: {app._exception!r}"
    assert not worker_errors, worker_errors
    assert app.is_running and app.return_code is None, "the app stopped"
    assert len(app.screen_stack) <= MAX_STACK, [type(s).__name__ for s in app.screen_stack]
    screen = app.screen
    if isinstance(screen, StepScreen):
        _check_step(screen)
    elif isinstance(screen, OverviewScreen):
        _check_overview(app, screen)
    elif isinstance(screen, CompareScreen):
        _check_compare(screen)
    for table in screen.query(VirtualTable):  # every worker has finished: nothing may still say it is coming
        assert not table.loading, f"#{table.id} still shows its loading indicator"
        if not table.rows:
            assert not table.placeholder.startswith(WAITING), f"#{table.id} says {table.placeholder!r} forever"
    for header in screen.query(RunHeader):
        assert header.latest == app.model.latest, f"header: step {header.latest}, the run: {app.model.latest}"
    assert "Traceback" not in screen_text(app)


# -- driving ------------------------------------------------------------------------------------------------


@dataclass
class Monkey:
    """One example: the app, the drawing source and the log of steps taken."""

    app: MilesApp
    pilot: Pilot[None]
    data: st.DataObject
    run_dir: Path
    log: list[str] = field(default_factory=list)

    async def settle(self) -> None:
        for _ in range(3):
            await self.pilot.pause()
            await self.app.workers.wait_for_complete()
        await self.pilot.pause()

    def keys(self) -> list[str]:
        """Keys of the active bindings (collected now, on this screen and focus) and the navigation keys.

        The keys the footer offers come three times: they are what the screen is for, and a plain
        draw would spend most steps on scrolling keys and Textual's own bindings.
        """
        active = self.app.active_bindings  # focused widget → screen → app (a modal screen alone)
        own = [key for key, found in active.items() if found.binding.show]
        keys = [*NAVIGATION, *sorted(active), *sorted(own) * 3]
        return [k for k in keys if k not in NEVER]

    async def type_into(self, box: Input) -> None:
        """Type a filter (or a CSV path into the save box) and press enter."""
        if box.id == "path":  # the CSV save box writes what it is given: only names in the scratch dir
            paths = st.one_of(SAFE_NAME, st.just(str(self.run_dir / "inside.csv")), st.just(""))
            text = self.data.draw(paths, label="csv path")
        else:
            text = self.data.draw(TYPED, label="typed")
        self.log.append(f"type {text!r} + enter")
        box.value = text
        await self.pilot.press("end", "enter")

    async def step(self) -> None:
        focused = self.app.focused
        actions = ["key"] * 6 + ["resize"]
        if isinstance(focused, Input):
            actions += ["type"] * 4
        elif "slash" in self.app.active_bindings:
            actions += ["filter"] * 2  # open the filter box, type, enter: one step, so it happens often
        choice = self.data.draw(st.sampled_from(actions), label="action")
        if choice == "type":
            assert isinstance(focused, Input)
            await self.type_into(focused)
        elif choice == "filter":
            self.log.append(f"slash ({type(self.app.screen).__name__})")
            await self.pilot.press("slash")
            await self.settle()
            box = self.app.focused
            if isinstance(box, Input):
                await self.type_into(box)
        elif choice == "resize":
            size = self.data.draw(st.tuples(st.integers(40, 200), st.integers(12, 60)), label="size")
            self.log.append(f"resize {size[0]}x{size[1]}")
            await self.pilot.resize_terminal(*size)
        else:
            key = self.data.draw(st.sampled_from(self.keys()), label=f"key on {type(self.app.screen).__name__}")
            self.log.append(f"{key} ({type(self.app.screen).__name__})")
            await self.pilot.press(key)
        await self.settle()


async def _explore(run_dir: Path, data: st.DataObject, worker_errors: list[str], steps: int) -> None:
    size = data.draw(st.tuples(st.integers(40, 200), st.integers(12, 60)), label="window")
    app = make_app(run_dir, poll_seconds=3600, clock=lambda: EPOCH)
    async with app.run_test(size=size) as pilot:
        monkey = Monkey(app, pilot, data, run_dir, [f"open {run_dir.name} at {size[0]}x{size[1]}"])
        await monkey.settle()
        check(app, worker_errors)
        try:
            for _ in range(data.draw(st.integers(1, steps), label="steps")):
                await monkey.step()
                check(app, worker_errors)
        finally:
            note("steps taken:\n  " + "\n  ".join(monkey.log))


def _monkey(runs: dict[str, Path], data: st.DataObject, worker_errors: list[str], steps: int) -> None:
    worker_errors.clear()
    source = data.draw(st.sampled_from(sorted(runs)), label="run")
    asyncio.run(_explore(runs[source], data, worker_errors, steps))


HEALTH = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large]


@settings(max_examples=CI_EXAMPLES, deadline=None, derandomize=True, database=None, suppress_health_check=HEALTH)
@given(data=st.data())
def test_monkey(runs: dict[str, Path], data: st.DataObject, worker_errors: list[str], scratch_cwd: Path) -> None:
    _monkey(runs, data, worker_errors, steps=25)


@pytest.mark.slow
@pytest.mark.skipif(not SLOW_EXAMPLES, reason="set MILES_TUI_MONKEY_EXAMPLES=N for the long, random run")
@settings(
    max_examples=max(SLOW_EXAMPLES, 1), deadline=None, database=None, suppress_health_check=HEALTH, print_blob=True
)
@given(data=st.data())
def test_monkey_long(runs: dict[str, Path], data: st.DataObject, worker_errors: list[str], scratch_cwd: Path) -> None:
    _monkey(runs, data, worker_errors, steps=60)
