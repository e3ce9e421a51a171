"""RecordTable: gpu_util and phases records held as columns give back exactly what was appended."""

from __future__ import annotations

import struct
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from miles_tui.core.telemetry import TAG_INT, Phase
from miles_tui.core.telemetry.record_table import Interner, RecordTable, table_arrays
from miles_tui.core.telemetry.stream_records import GpuUtil, decode_gpu_util, decode_phase

# what a JSON line can put in a numeric field: numbers of both kinds (NaN and the infinities that
# miles writes as literals, ints past float64's exact range), None, and the odd non-number
_values = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.none(),
    st.booleans(),
    st.text(max_size=3),
    st.lists(st.integers(), max_size=2),
)
_times = st.one_of(st.floats(allow_nan=False), st.integers(min_value=-(2**60), max_value=2**60))
_names = st.sampled_from(["rollout", "actor_train", "", "node-ü"])


def _same(a: object, b: object) -> bool:
    """Equal values of the same type; floats compared by their bits (NaN, -0.0)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return struct.pack("<d", a) == struct.pack("<d", b)  # type: ignore[arg-type]
    return a == b


def _same_record(a: GpuUtil | Phase, b: GpuUtil | Phase) -> bool:
    return type(a) is type(b) and all(_same(x, y) for x, y in zip(a.__getstate__(), b.__getstate__(), strict=True))


_gpu = st.builds(GpuUtil, _times, _names, _values, _values, _values, _values)
_phase = st.builds(
    Phase, _names, _times, _times, st.one_of(st.none(), _names), st.just((0, 1)), _values, st.one_of(st.none(), _names)
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(_gpu, max_size=6), max_size=4), st.data())
def test_gpu_records_come_back_exactly(batches: list[list[GpuUtil]], data: st.DataObject) -> None:
    table: RecordTable[GpuUtil] = RecordTable(GpuUtil)
    flat: list[GpuUtil] = []
    for batch in batches:
        table.extend(batch)
        flat += batch
    assert len(table) == len(flat) and bool(table) == bool(flat)
    assert all(_same_record(a, b) for a, b in zip(table, flat, strict=True))
    start = data.draw(st.integers(-len(flat) - 2, len(flat) + 2))
    stop = data.draw(st.integers(-len(flat) - 2, len(flat) + 2))
    assert all(_same_record(a, b) for a, b in zip(table[start:stop], flat[start:stop], strict=True))
    assert len(table[start:stop]) == len(flat[start:stop])
    if flat:
        i = data.draw(st.integers(-len(flat), len(flat) - 1))
        assert _same_record(table[i], flat[i])


@settings(max_examples=100, deadline=None)
@given(st.lists(_phase, max_size=12))
def test_phase_records_come_back_exactly(phases: list[Phase]) -> None:
    table: RecordTable[Phase] = RecordTable(Phase)
    table.extend(phases)
    assert all(_same_record(a, b) for a, b in zip(table.rows(), phases, strict=True))
    # keys compared by value and bits: a NaN rank is equal to itself only as the same object
    assert all(_same(x, y) for a, b in zip(table, phases, strict=True) for x, y in zip(a.key, b.key, strict=True))


def test_out_of_range_and_wrong_type() -> None:
    table: RecordTable[GpuUtil] = RecordTable(GpuUtil)
    table.extend([decode_gpu_util({"ts": 1.5, "node": "n", "gpu": 0, "util": 50})])
    with pytest.raises(IndexError):
        table[1]
    assert table[-1].util == 50 and type(table[-1].util) is int and table[-1].mem_mb is None
    with pytest.raises(TypeError):
        table.extend([decode_phase({"name": "x", "t0": 1, "t1": 2})])  # type: ignore[list-item]
    table.clear()
    assert len(table) == 0 and table.rows() == []


def test_a_record_costs_a_fraction_of_an_object() -> None:
    """What keeping a long run's GPU samples costs: ~48 bytes a sample against ~180 as objects."""
    lines = [
        {"ts": 1.8e9 + i * 0.5, "node": "10.0.0.1", "gpu": i % 8, "util": float(i % 100), "mem_mb": 40000.5 + i,
         "power_w": 300.25 + i % 7}
        for i in range(20_000)
    ]  # fmt: skip
    records = [decode_gpu_util(line) for line in lines]
    table: RecordTable[GpuUtil] = RecordTable(GpuUtil)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for start in range(0, len(records), 48):  # a poll's worth at a time, as a reader appends
        table.extend(records[start : start + 48])
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert held / len(records) < 64, f"{held / len(records):.0f} bytes a record"
    assert table.rows(19_999, 20_000) == [records[-1]]


def test_int_fields_and_few_codes_are_held_narrow() -> None:
    """GPU indices, memory and power in whole numbers (what the readings are) and a handful of hosts: a
    sample costs ~30 bytes (int32s, one-byte codes), not ~50."""
    records = [
        decode_gpu_util({"ts": 1.8e9 + i * 0.5, "node": f"10.0.0.{i % 4}", "gpu": i % 8, "util": float(i % 100),
                         "mem_mb": 40000 + i, "power_w": 300 + i % 7})
        for i in range(20_000)
    ]  # fmt: skip
    table: RecordTable[GpuUtil] = RecordTable(GpuUtil)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for start in range(0, len(records), 48):
        table.extend(records[start : start + 48])
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert held / len(records) < 36, f"{held / len(records):.0f} bytes a record"
    assert table.rows() == records and type(table[5].mem_mb) is int
    values, tags, _ = table.numbers("gpu")
    assert values.tolist() == [float(r.gpu) for r in records] and set(tags.tolist()) == {TAG_INT}


def test_codes_widen_past_256_values_and_ints_widen_to_floats() -> None:
    interner = Interner()
    first: RecordTable[GpuUtil] = RecordTable(GpuUtil, interner)
    second: RecordTable[GpuUtil] = RecordTable(GpuUtil, interner)
    records = [decode_gpu_util({"ts": float(i), "node": f"n{i}", "gpu": i, "mem_mb": 2**40 if i == 70_000 else i})
               for i in range(70_001)]  # fmt: skip
    first.extend(records[:10])
    second.extend(records[:300])  # a second table of the stream pushes the shared codes past one byte
    first.extend(records[10:])  # ... and past two; the last mem_mb needs more than 32 bits
    assert first.rows() == records and second.rows() == records[:300]
    arrays = table_arrays([first, second], ["gpu", "mem_mb"], ["node"], interner)
    assert arrays.column("node") == [r.node for r in records + records[:300]]
    assert arrays.column("mem_mb") == [r.mem_mb for r in records + records[:300]]
