"""Long runs: one update per poll, rows redrawn by key, failed steps left alone until they change,
many unreadable steps as one advisory, helper processes that give the same summaries."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.geometry import Region
from textual.message import Message
from textual.pilot import Pilot

from miles_tui.core.dump import Run, RunDir
from miles_tui.tui.app import MilesApp, make_app
from miles_tui.tui.model.messages import StepsSummarized
from miles_tui.tui.runtime.run_watcher import RunWatcher, StepsPoll
from miles_tui.tui.widgets.run_header import RunHeader
from miles_tui.tui.widgets.virtual_table import VirtualTable
from tests.conftest import EPOCH, stamp


async def _settle(app: MilesApp, pilot: Pilot[None]) -> None:
    for _ in range(4):
        await pilot.pause()
        await app.workers.wait_for_complete()
    await pilot.pause()


def _garbage(run: Path, rids: range, mtime: float) -> None:
    folder = run / "rollout_data"
    folder.mkdir(parents=True, exist_ok=True)
    for rid in rids:
        path = folder / f"{rid}.pt"
        path.write_bytes(b"not a torch archive")
        os.utime(path, (mtime, mtime))


def _drain(watcher: RunWatcher, now: float) -> Iterator[StepsPoll]:
    """Poll until nothing is left to summarize (the helpers' results collected too)."""
    result = watcher.poll_blocking(now)
    yield result
    for _ in range(400):
        if not result.pending:
            return
        if not result.more:
            time.sleep(0.05)
        result = watcher.poll_blocking(now)
        yield result
    raise AssertionError(f"still {result.pending} steps to summarize after 400 polls")


async def test_each_poll_is_one_update(demo_run: Path) -> None:
    """The old app posted a message per step and rebuilt every row for each: work per step times steps."""
    messages: list[Message] = []
    polls: list[StepsPoll] = []
    app = make_app(demo_run, poll_seconds=3600, clock=lambda: EPOCH)
    poll = app.watcher.poll_blocking

    def recorded(now: float, summarize: bool = True) -> StepsPoll:
        result = poll(now, summarize)
        polls.append(result)
        return result

    app.watcher.poll_blocking = recorded  # type: ignore[method-assign]
    async with app.run_test(size=(120, 40), message_hook=messages.append) as pilot:
        await _settle(app, pilot)
        # The app forwards each message to its screens: count each message once.
        batches = list({id(m): m for m in messages if isinstance(m, StepsSummarized)}.values())
        summarizing = [p for p in polls if p.summaries or p.failures]
        assert len(batches) == len(summarizing) >= 1
        assert sum(len(b.summaries) for b in batches) == 5  # 4 train steps and eval 0
        assert max(len(b.summaries) for b in batches) >= 2

        # A changed step redraws its own row, not the table.
        table = app.screen.query_one("#steps", VirtualTable)
        refreshed: list[Region] = []
        refresh = table.refresh
        table.refresh = lambda *regions, **kw: refreshed.extend(regions) or refresh(*regions, **kw)  # type: ignore[method-assign]
        app.screen._steps_updated(StepsSummarized((app.model.summaries[(2, False)],)))
        assert len(refreshed) == 1 and refreshed[0].height == 1
        assert refreshed[0].y == table.keys.index((2, False)) + 1 - table.scroll_offset.y


async def test_the_header_draws_only_when_its_text_changes(demo_run: Path) -> None:
    """Each poll moves the data age a little; the header shows whole seconds, so it stays as drawn."""
    ticks = iter(EPOCH + 0.01 * k for k in range(10_000))
    app = make_app(demo_run, poll_seconds=3600, clock=lambda: next(ticks))
    async with app.run_test(size=(120, 40)) as pilot:
        await _settle(app, pilot)
        header = app.screen.query_one(RunHeader)
        drawn: list[str] = []
        render = header.render
        header.render = lambda: drawn.append("x") or render()  # type: ignore[method-assign]
        for _ in range(5):
            app.poll_now()
            await _settle(app, pilot)
        assert "10m00s" in str(render())
        assert drawn == [], "the header was drawn again with the same text"


def test_a_failed_step_is_read_again_only_when_its_files_change(
    demo_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _garbage(demo_run, range(10, 12), EPOCH - 600)
    loads: list[str] = []
    load = RunDir.load

    def counted(file: object, now: float) -> object:
        loads.append(file.path.name)  # type: ignore[attr-defined]
        return load(file, now)  # type: ignore[arg-type]

    monkeypatch.setattr(RunDir, "load", staticmethod(counted))
    watcher = RunWatcher(Run(demo_run), workers=1)
    failures = [f for result in _drain(watcher, EPOCH) for f in result.failures]
    assert sorted((rid, still) for rid, _ev, _msg, still in failures) == [(10, False), (11, False)]
    assert loads.count("10.pt") == 1 and loads.count("11.pt") == 1
    for k in range(5):
        assert not watcher.poll_blocking(EPOCH + k).failures
    assert loads.count("10.pt") == 1 and loads.count("11.pt") == 1, "a failed step was read again unchanged"

    _garbage(demo_run, range(10, 11), EPOCH - 500)  # rewritten: a new mtime
    again = [f for result in _drain(watcher, EPOCH + 10) for f in result.failures]
    assert loads.count("10.pt") == 2 and loads.count("11.pt") == 1
    assert again == [], "the same failure is reported once, not again"


def test_many_unreadable_steps_are_one_advisory(demo_run: Path) -> None:
    _garbage(demo_run, range(100, 140), EPOCH - 600)
    watcher = RunWatcher(Run(demo_run), workers=1)
    *_, last = _drain(watcher, EPOCH)
    codes = [a.code for a in last.advisories]
    assert codes.count("steps_unreadable") == 1 and "step_unreadable" not in codes
    [advisory] = [a for a in last.advisories if a.code == "steps_unreadable"]
    assert advisory.message.startswith("40 steps unreadable: first step 100 (")
    assert "last step 139 (" in advisory.message


def test_helper_processes_give_the_same_summaries(demo_run: Path) -> None:
    expected = {key: Run(demo_run, use_cache=False).summary(*key, EPOCH) for key in [(0, False), (1, False), (0, True)]}
    watcher = RunWatcher(Run(demo_run, use_cache=False), workers=2, pool_min_steps=1)
    watcher.steps._summarized_once = True  # helpers are never started by the first summarizing poll
    submitted: list[int] = []
    submit = watcher.backfill.submit
    watcher.backfill.submit = lambda batch, now: submitted.append(len(batch)) or submit(batch, now)  # type: ignore[method-assign]
    got = {(s.rollout_id, s.evaluation): s for result in _drain(watcher, EPOCH) for s in result.summaries}
    assert sum(submitted) >= 3, "the back-fill did not go to the helpers"
    for key, summary in expected.items():
        assert got[key] == summary
    assert watcher.backfill._pool is None, "the helpers outlived their work"


def test_a_new_step_is_summarized_without_reading_the_others_again(demo_run: Path) -> None:
    from tests.conftest import write_demo_run

    watcher = RunWatcher(Run(demo_run), workers=1)
    list(_drain(watcher, EPOCH))
    write_demo_run(demo_run, 1, start=4)
    stamp(demo_run, EPOCH - 600)
    results = list(_drain(watcher, EPOCH))
    summarized = {(s.rollout_id, s.evaluation) for r in results for s in r.summaries}
    assert summarized == {(4, False)}
    assert results[0].new_train == (4,)


async def test_a_step_whose_files_go_away_leaves_the_list(demo_run: Path) -> None:
    app = make_app(demo_run, poll_seconds=3600, clock=lambda: EPOCH)
    async with app.run_test(size=(120, 40)) as pilot:
        await _settle(app, pilot)
        assert (1, False) in app.screen.query_one("#steps", VirtualTable).keys
        (demo_run / "rollout_data" / "1.pt").unlink()
        app.poll_now()
        await _settle(app, pilot)
        assert app.model.train == (0, 2, 3)
        assert (1, False) not in app.screen.query_one("#steps", VirtualTable).keys


def test_telemetry_rules_rerun_only_when_records_arrive_or_time_passes(
    demo_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rules read every record held: on a quiet run they ran on every poll, forever."""
    from miles_tui.tui.runtime import stream_watch

    calls: list[float] = []
    rules = stream_watch.stream_advisories
    monkeypatch.setattr(
        stream_watch, "stream_advisories", lambda f, now, **kw: calls.append(now) or rules(f, now, **kw)
    )
    watcher = RunWatcher(Run(demo_run))
    first = watcher.poll_streams_blocking(EPOCH)
    for k in range(1, 6):
        assert watcher.poll_streams_blocking(EPOCH + k).advisories == first.advisories
    assert calls == [EPOCH]
    later = EPOCH + stream_watch.STREAM_ADVISORY_SECONDS
    watcher.poll_streams_blocking(later)
    assert len(calls) == 2  # the rules about time still run
    with (demo_run / "dashboard" / "metrics.jsonl").open("a") as handle:
        record = {"ts": EPOCH, "step_key": "rollout/step", "step": 99, "metrics": {"rollout/raw_reward": 0.5}}
        handle.write(json.dumps(record) + "\n")
    watcher.poll_streams_blocking(later + 1)
    assert len(calls) == 2  # new records: read at most every STREAM_ADVISORY_MIN_SECONDS
    watcher.poll_streams_blocking(later + stream_watch.STREAM_ADVISORY_MIN_SECONDS)
    assert len(calls) == 3
