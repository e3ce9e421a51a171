"""Lifecycle lanes from ``trajectories/`` events (miles' rules), their painting on a time axis, and the batch
anatomy of a step (the consume anchor, the join with the step's rows, sorting); hostile events."""

from __future__ import annotations

import math
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from miles_tui.core.analysis.batch_anatomy import (
    LOOKBACK_SECONDS,
    SORTS,
    batch_anatomy,
    consume_time,
    sample_lane,
    sorted_rows,
)
from miles_tui.core.dump import RunDir
from miles_tui.core.follow import RunFollower
from miles_tui.core.telemetry import MetricStore
from miles_tui.core.telemetry.stream_records import TrajectoryEvent, decode_trajectory_event
from miles_tui.core.telemetry.trajectory_lanes import (
    EMPTY,
    GENERATING,
    MAX_EVENTS_PER_SAMPLE,
    MAX_SHORT_TEXT,
    QUEUE_STATE,
    STALE_GENERATING,
    TOOL_STATE,
    WAITING,
    lane_cells,
    lane_totals,
    trajectory_lanes,
)
from tests.conftest import write_demo_run
from tests.tui.test_row_filter import BASE


def ev(ts: float, kind: str, index: int = 1, turn: int = -1, version: Any = "", detail: Any = "") -> TrajectoryEvent:
    return TrajectoryEvent(ts, kind, index, 0, turn, version, detail)


def single_turn(index: int = 1, start: float = 100.0) -> list[TrajectoryEvent]:
    """miles' single-turn path: a coarse gen_start (turn -1) that the attempt's end closes."""
    return [
        ev(start, "attempt_start", index),
        ev(start + 2, "gen_start", index),
        ev(start + 10, "attempt_end", index, version="7", detail="completed"),
    ]


def multi_turn(index: int = 2, start: float = 100.0) -> list[TrajectoryEvent]:
    return [
        ev(start, "attempt_start", index),
        ev(start + 1, "gen_start", index),  # the coarse span: dropped, per-turn spans exist
        ev(start + 1, "gen_start", index, 1, "5"),
        ev(start + 4, "gen_end", index, 1, "5"),
        ev(start + 4, "tool_start", index, 1, detail="agent gap"),
        ev(start + 6, "tool_end", index, 1, detail="agent gap"),
        ev(start + 6, "gen_start", index, 2, "6"),
        ev(start + 9, "gen_end", index, 2, "6"),
        ev(start + 9, "attempt_end", index, version="6", detail="truncated"),
    ]


# -- miles' rules -------------------------------------------------------------------------------------


def test_an_attempt_ending_closes_the_span_it_left_open_and_lends_its_version() -> None:
    (lane,) = trajectory_lanes(single_turn()).lanes
    (segment,) = lane.segments
    assert (segment.kind, segment.t0, segment.t1, segment.turn) == ("gen", 102.0, 110.0, -1)
    assert segment.weight_version == "7"
    assert lane.status == "completed" and lane.versions == (7,)
    assert [(a.t0, a.t1) for a in lane.attempts] == [(100.0, 110.0)]


def test_per_turn_spans_supersede_the_coarse_span_and_pair_by_kind_and_turn() -> None:
    (lane,) = trajectory_lanes(multi_turn()).lanes
    assert [(s.kind, s.turn, s.t0, s.t1) for s in lane.segments] == [
        ("gen", 1, 101.0, 104.0),
        ("tool", 1, 104.0, 106.0),
        ("gen", 2, 106.0, 109.0),
    ]
    assert lane.versions == (5, 6) and lane.status == "truncated"
    totals = lane_totals(lane)
    assert (totals.turns, totals.tool_calls) == (2, 1)
    assert math.isclose(totals.generating, 6.0) and math.isclose(totals.tools, 2.0)
    assert math.isclose(totals.queued, 1.0)


def test_an_end_without_a_start_and_an_attempt_still_running() -> None:
    events = [ev(50, "gen_end", 3, 1), ev(60, "attempt_start", 3), ev(61, "gen_start", 3, 2)]
    (lane,) = trajectory_lanes(events).lanes
    assert [(s.t0, s.t1) for s in lane.segments] == [(None, 50.0), (61.0, None)]
    assert [(a.t0, a.t1) for a in lane.attempts] == [(60.0, None)]
    assert lane.finished is None and lane.status == ""


def test_a_retried_sample_has_two_attempts_and_the_last_status() -> None:
    events = [
        *single_turn(4, 100.0)[:2],
        ev(105, "attempt_end", 4, detail="aborted"),
        *single_turn(4, 200.0),
    ]
    (lane,) = trajectory_lanes(events).lanes
    assert len(lane.attempts) == 2 and lane.status == "completed"
    assert [(s.t0, s.t1) for s in lane.segments] == [(102.0, 105.0), (202.0, 210.0)]


def test_lanes_filter_by_sample_and_window_and_sort_by_first_event() -> None:
    events = [*single_turn(1, 300.0), *multi_turn(2, 100.0), *single_turn(9, 200.0)]
    lanes = trajectory_lanes(events, {1, 2}).lanes
    assert [lane.sample_index for lane in lanes] == [2, 1]
    windowed = trajectory_lanes(events, None, since=150.0, until=305.0).lanes
    assert [lane.sample_index for lane in windowed] == [9, 1]


# -- hostile events ------------------------------------------------------------------------------------


def test_events_that_are_not_miles_are_skipped_and_counted() -> None:
    bad = [
        ev(1, "launch_missiles"),
        TrajectoryEvent(2, "gen_start", "1", 0, 1, "", ""),
        TrajectoryEvent(3, "gen_start", 1 << 70, 0, 1, "", ""),
        TrajectoryEvent(float("nan"), "gen_start", 1, 0, 1, "", ""),
        TrajectoryEvent(4, "gen_start", True, 0, 1, "", ""),
        "not an event",
    ]
    found = trajectory_lanes([*bad, *single_turn()])
    assert found.skipped == len(bad) and len(found.lanes) == 1


def test_odd_fields_read_as_nothing_and_long_text_is_cut() -> None:
    events = [
        TrajectoryEvent(1, "attempt_start", 1, {"g": 1}, [1], {"v": 1}, None),
        TrajectoryEvent(2, "gen_start", 1, -5, 1 << 40, "9" * 30, None),
        TrajectoryEvent(3, "attempt_end", 1, None, None, 3, "x" * 10_000),
    ]
    (lane,) = trajectory_lanes(events).lanes
    assert lane.group_index is None
    assert lane.segments[0].turn == -1 and lane.segments[0].weight_version == "9" * 30
    assert lane.versions == (3,)  # 30 digits is no version a run has; 3 (an int) is
    assert lane.status == "x" * MAX_SHORT_TEXT


def test_a_sample_keeps_at_most_its_cap_of_events() -> None:
    flood = [ev(float(i), "tool_start", 1, i % 1000) for i in range(MAX_EVENTS_PER_SAMPLE + 500)]
    (lane,) = trajectory_lanes(flood).lanes
    assert lane.dropped == 500 and len(lane.segments) <= MAX_EVENTS_PER_SAMPLE


def test_a_flood_of_samples_is_linear() -> None:
    events = [e for i in range(20_000) for e in single_turn(i, float(i))]
    started = time.perf_counter()
    found = trajectory_lanes(events)
    assert len(found.lanes) == 20_000 and time.perf_counter() - started < 5.0


_EVENT = st.builds(
    TrajectoryEvent,
    st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-(10**20), 10**20)),
    st.sampled_from(["attempt_start", "gen_start", "gen_end", "tool_start", "tool_end", "attempt_end", "other"]),
    st.one_of(st.integers(-3, 3), st.integers(), st.text(max_size=3), st.none()),
    st.one_of(st.integers(), st.none(), st.text(max_size=3)),
    st.one_of(st.integers(), st.none(), st.text(max_size=3), st.lists(st.integers(), max_size=2)),
    st.one_of(st.text(max_size=50), st.integers(), st.none(), st.floats()),
    st.one_of(st.text(max_size=50), st.none(), st.integers()),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_EVENT, max_size=60), st.integers(1, 200))
def test_any_events_make_lanes_and_cells_of_the_asked_width(events: list[TrajectoryEvent], width: int) -> None:
    found = trajectory_lanes(events)
    assert found.skipped <= len(events)
    for lane in found.lanes:
        assert lane.first_ts <= lane.last_ts
        assert all(len(s.weight_version) <= MAX_SHORT_TEXT for s in lane.segments)
        assert len(lane.status) <= MAX_SHORT_TEXT
        cells = lane_cells(lane, lane.first_ts, lane.last_ts + 1.0, width, lane.last_ts + 0.5, newest=3)
        states = {EMPTY, WAITING, QUEUE_STATE, TOOL_STATE, STALE_GENERATING, GENERATING}
        assert len(cells) == width and set(cells) <= states
        lane_totals(lane)


# -- painting ------------------------------------------------------------------------------------------


def test_cells_paint_generation_over_tools_over_the_queue_then_wait_for_the_consume() -> None:
    (lane,) = trajectory_lanes(multi_turn(start=0.0)).lanes
    cells = lane_cells(lane, 0.0, 20.0, 20, consumed=15.0)
    assert cells[0] == QUEUE_STATE
    assert cells[2] == GENERATING and cells[5] == TOOL_STATE and cells[7] == GENERATING
    assert cells[11] == WAITING and cells[14] == WAITING
    assert cells[17] == EMPTY
    assert lane_cells(lane, 0.0, 20.0, 0) == b""
    assert lane_cells(lane, 5.0, 5.0, 4) == bytes(4)
    assert set(lane_cells(lane, 50.0, 60.0, 10, consumed=15.0)) == {EMPTY}  # the lane is before the axis
    assert set(lane_cells(lane, 50.0, 60.0, 10)) == {WAITING}  # not consumed yet: it waits to the axis end


def test_generation_on_a_version_older_than_the_newest_is_stale() -> None:
    (lane,) = trajectory_lanes(multi_turn(start=0.0)).lanes  # turn 1 on v5, turn 2 on v6
    cells = lane_cells(lane, 0.0, 20.0, 20, consumed=15.0, newest=6)
    assert cells[2] == STALE_GENERATING and cells[7] == GENERATING
    assert lane_cells(lane, 0.0, 20.0, 20, 15.0) == lane_cells(lane, 0.0, 20.0, 20, 15.0, newest=5).replace(
        bytes([STALE_GENERATING]), bytes([GENERATING])
    )
    (single,) = trajectory_lanes(single_turn()).lanes  # its span's version comes from the attempt's end: 7
    assert STALE_GENERATING in lane_cells(single, 100.0, 110.0, 10, newest=8)
    assert STALE_GENERATING not in lane_cells(single, 100.0, 110.0, 10, newest=7)


# -- the anatomy of a step ---------------------------------------------------------------------------------


def _metrics(records: list[dict[str, Any]]) -> MetricStore:
    return MetricStore.from_records(records)


def test_the_consume_anchor_is_the_steps_last_step_time_record() -> None:
    store = _metrics(
        [
            {"ts": 10.0, "step_key": "rollout/step", "step": 3, "metrics": {"rollout/raw_reward": 1.0}},
            {"ts": 20.0, "step_key": "rollout/step", "step": 3, "metrics": {"perf/step_time": 9.0}},
            {"ts": 25.0, "step_key": "rollout/step", "step": 4, "metrics": {"perf/step_time": 9.0}},
            {"ts": 30.0, "step_key": "rollout/step", "step": 3, "metrics": {"perf/step_time": 9.5}},
        ]
    )
    assert consume_time(store, 3) == 30.0 and consume_time(store, 4) == 25.0
    assert consume_time(store, 5) is None and consume_time(_metrics([]), 3) is None


def test_a_demo_step_anatomy_joins_every_sample_and_ends_at_the_consume(tmp_path: Path) -> None:
    from miles_tui.core.dump import Run

    root = write_demo_run(tmp_path / "demo", 2)
    follower = RunFollower(RunDir(root), streams=("trajectories",))
    follower.poll(time.time())
    events = follower.dashboard.records("trajectories")
    consumed = consume_time(follower.metrics, 1)
    assert consumed is not None
    summary = Run(root).summary(1, False, time.time())
    anatomy = batch_anatomy(1, events, summary.rows, consumed)
    assert anatomy.lanes == len(summary.rows) == 16 and anatomy.skipped == 0
    assert anatomy.end == consumed and anatomy.start is not None and anatomy.start < consumed
    for row in anatomy.rows:
        assert row.lane is not None and row.row is not None
        assert row.lane.status == row.row.status  # attempt_end carries the sample's status
        assert lane_totals(row.lane).turns == row.row.turns  # one gen span per turn the dump counts
        assert row.lane.finished is not None and row.lane.finished <= consumed
    # step 0's samples are not step 1's: the join is by the dump's sample indices
    assert {r.sample_index for r in anatomy.rows} == {r.sample_index for r in summary.rows}
    one = sample_lane(events, anatomy.rows[0].sample_index, consumed)
    assert one == anatomy.rows[0].lane


def test_samples_without_events_are_listed_last_and_the_window_bounds_the_read() -> None:
    from miles_tui.core.dump import SampleRow

    rows = [_row(1), _row(2), _row(3)]
    consumed = 1000.0
    events = [*single_turn(2, 900.0), *single_turn(1, consumed - LOOKBACK_SECONDS - 50)]
    anatomy = batch_anatomy(7, events, rows, consumed)
    assert [r.sample_index for r in anatomy.rows] == [2, 1, 3]
    assert [r.lane is not None for r in anatomy.rows] == [True, False, False]
    assert isinstance(anatomy.rows[0].row, SampleRow)
    empty = batch_anatomy(7, [], rows, None)
    assert empty.lanes == 0 and empty.start is None and empty.end is None


def test_sorts_put_missing_values_last_and_keep_submit_order_on_ties() -> None:
    rows = [_row(1, reward=1.0, turns=1), _row(2, reward=0.0, turns=3), _row(3, reward=None, turns=2)]
    events = [*single_turn(1, 10.0), *multi_turn(2, 20.0), *single_turn(3, 30.0)]
    anatomy = batch_anatomy(1, events, rows, 100.0)
    order = {key: [r.sample_index for r in sorted_rows(anatomy, key)] for key in SORTS}
    assert order["submit"] == [1, 2, 3]
    assert order["reward"] == [2, 1, 3]
    assert order["turns"] == [2, 1, 3]  # the lanes' turns (2, 1, 1), not the dump's (3, 1, 2): what is drawn
    assert order["sample"] == [1, 2, 3]


def _row(index: int, reward: float | None = 0.5, turns: int = 1) -> Any:
    return replace(BASE, sample_index=index, reward=reward, raw_reward=reward, turns=turns)


def test_the_demo_writes_miles_event_lines() -> None:
    from miles_tui.core.synth.demo_trajectory import step_events

    samples = [
        {"index": 5, "group_index": 1, "status": "completed", "response_length": 9, "loss_mask": None,
         "weight_versions": ["3"]},
        {"index": 6, "group_index": 1, "status": "truncated", "response_length": 9,
         "loss_mask": [1, 1, 0, 0, 1, 1, 0, 1, 1], "weight_versions": ["2", "3", "3"]},
    ]  # fmt: skip
    events = step_events(4, samples, 0.0, 10.0)
    assert events == step_events(4, samples, 0.0, 10.0)  # deterministic
    decoded = [decode_trajectory_event(e) for e in events]
    lanes = {lane.sample_index: lane for lane in trajectory_lanes(decoded).lanes}
    assert lane_totals(lanes[5]).turns == 1 and lanes[5].segments[0].weight_version == "3"
    assert (lane_totals(lanes[6]).turns, lane_totals(lanes[6]).tool_calls) == (3, 2)
    assert lanes[6].status == "truncated" and all(0.0 <= e["ts"] <= 10.0 for e in events)
    assert np.all(np.diff([e["ts"] for e in events]) >= 0)


def test_a_hostile_stream_file_reads_to_inert_bounded_lanes(tmp_path: Path) -> None:
    """Lines of a ``dashboard/trajectories/`` file a hostile writer could make: each is skipped, cut or read."""
    import json

    from miles_tui.tui.views.anatomy_rows import anatomy_row, sample_lane_lines

    root = tmp_path / "run"
    stream = root / "dashboard" / "trajectories"
    stream.mkdir(parents=True)
    good = [
        {"ts": 1.0, "kind": "attempt_start", "sample_index": 1, "group_index": 0, "turn": -1,
         "weight_version": "", "detail": ""},
        {"ts": 2.0, "kind": "gen_start", "sample_index": 1, "group_index": 0, "turn": -1,
         "weight_version": "", "detail": ""},
        {"ts": 3.0, "kind": "attempt_end", "sample_index": 1, "group_index": 0, "turn": -1,
         "weight_version": "\x1b[2J" * 50, "detail": "\x1b]52;c;cHduZWQ=\x07\u202edone" + "x" * 100_000},
    ]  # fmt: skip
    hostile = [
        '{"ts": NaN, "kind": "gen_start", "sample_index": 1}',
        '{"ts": 1e308, "kind": ["gen_start"], "sample_index": 1}',
        '{"ts": 2.5, "kind": "gen_end", "sample_index": 1e400}',
        '{"ts": 2.5, "kind": "tool_start", "sample_index": {"a": 1}, "turn": "x"}',
        '{"ts": 2.5, "kind": "tool_start", "sample_index": 1, "turn": [[[[1]]]], "detail": {"deep": [1, 2]}}',
        "[1, 2, 3]",
        "not json",
    ]
    lines = [json.dumps(r) for r in good] + hostile
    (stream / "20260528_20.jsonl").write_text("\n".join(lines) + "\n")
    follower = RunFollower(RunDir(root), streams=("trajectories",))
    follower.poll(time.time())
    events = follower.dashboard.records("trajectories")
    rows = [replace(BASE, sample_index=1), replace(BASE, sample_index=2)]
    anatomy = batch_anatomy(0, events, rows, None)
    lane = anatomy.rows[0].lane
    assert lane is not None and lane.sample_index == 1
    assert len(lane.status) == MAX_SHORT_TEXT and all(len(s.weight_version) <= MAX_SHORT_TEXT for s in lane.segments)
    drawn = [cell.plain for cell in anatomy_row(anatomy.rows[0], anatomy, 40).cells]
    drawn += [line.plain for line in sample_lane_lines(lane, None, 0, 60)]
    for text in drawn:
        assert not any(ch in text for ch in "\x1b\x07\u202e"), text
