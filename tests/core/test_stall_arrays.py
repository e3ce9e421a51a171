"""The stall rule over phase columns (what the monitor runs every few seconds) gives exactly the
advisories of the rule over phase records, whatever the records hold."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from miles_tui.core.analysis.stall_rule import PHASE_NUMBERS, PHASE_SHARED, stalled_phase_arrays, stalled_phases
from miles_tui.core.telemetry import Phase
from miles_tui.core.telemetry.record_table import Interner, RecordTable, table_arrays

T = 1_787_223_000.0

_names = st.sampled_from(["actor_train", "rollout", "update_weights"])
_nodes = st.sampled_from(["10.0.0.7", "10.0.0.8", None])
_ranks = st.one_of(st.integers(-1, 3), st.sampled_from([0.0, -0.0, 1.0, None]))
_offsets = st.one_of(st.integers(0, 40), st.sampled_from([0.5, 10.25]))
_durations = st.one_of(st.integers(0, 30), st.floats(0, 30), st.just(-1))  # -1: an open marker


@st.composite
def _phases(draw: st.DrawFn, odd: bool) -> list[Phase]:
    out = []
    for _ in range(draw(st.integers(0, 40))):
        t0 = T + 60 * draw(_offsets)
        duration = draw(_durations)
        t1 = -1 if duration == -1 else t0 + duration
        name, node, rank = draw(_names), draw(_nodes), draw(_ranks)
        if odd:  # what a float64 key cannot stand for: the array rule must fall back, not differ
            name = draw(st.one_of(st.just(name), st.sampled_from([1, None])))
            rank = draw(st.one_of(st.just(rank), st.sampled_from([[1], 2**60, float("nan")])))
            t0 = draw(st.one_of(st.just(t0), st.just(2**60)))
        out.append(Phase(name, t0, t1, node, (0,), rank, draw(st.sampled_from(["train", "rollout_manager"]))))
    return out


def _both(phases: list[Phase], attempt: float | None, at: float) -> tuple[object, object]:
    try:
        expected: object = stalled_phases(phases, attempt, at)
    except TypeError as err:  # names that do not sort (1 and "x"): the record rule raises, and so must this
        expected = type(err)
    interner = Interner()
    tables = [RecordTable(Phase, interner), RecordTable(Phase, interner)]  # two partitions, one code space
    tables[0].extend(phases[: len(phases) // 2])
    tables[1].extend(phases[len(phases) // 2 :])
    try:
        got: object = stalled_phase_arrays(table_arrays(tables, PHASE_NUMBERS, PHASE_SHARED, interner), attempt, at)
    except TypeError as err:
        got = type(err)
    return expected, got


@settings(max_examples=300, deadline=None)
@given(_phases(odd=False), st.sampled_from([None, T, T + 600]), st.floats(T + 1800, T + 20_000))
def test_columns_give_the_records_advisories(phases: list[Phase], attempt: float | None, at: float) -> None:
    expected, got = _both(phases, attempt, at)
    assert got == expected


@settings(max_examples=150, deadline=None)
@given(_phases(odd=True), st.sampled_from([None, T]), st.floats(T + 1800, T + 20_000))
def test_records_a_float64_cannot_key_fall_back_to_the_record_rule(
    phases: list[Phase], attempt: float | None, at: float
) -> None:
    expected, got = _both(phases, attempt, at)
    assert got == expected


def test_a_real_stall_is_found_in_columns() -> None:
    phases = []
    for i in range(10):
        t0 = T + 50 * i
        phases += [
            Phase("actor_train", t0, -1, "n1", (0,), 0, "train"),
            Phase("actor_train", t0, t0 + 20, "n1", (0,), 0, "train"),
        ]
    phases.append(Phase("actor_train", T + 600, -1, "n1", (0,), 3, "train"))
    expected, got = _both(phases, None, T + 600 + 3 * 3600)
    assert got == expected and len(got) == 1  # type: ignore[arg-type]
    assert "n1 rank 3" in got[0].message  # type: ignore[index]
