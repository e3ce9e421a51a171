"""The summary cache: compact columns that come back exactly, type for type and bit for bit."""

from __future__ import annotations

import json
import struct
import time
import zlib
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from miles_tui.core.dump import ColumnRows, GroupRow, Run, SampleRow, StepSummary, decode_summary, encode_summary
from miles_tui.core.dump.summary_cache import MAX_ENCODED, load_summary, store_summary, summary_path


def _same(a: Any, b: Any) -> bool:
    """Equal and of the same type; floats compared by their bits (NaN, -0.0)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return struct.pack("<d", a) == struct.pack("<d", b)
    return bool(a == b)


def _same_rows(got: Any, want: Any) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        for f in fields(w):
            assert _same(getattr(g, f.name), getattr(w, f.name)), (f.name, getattr(g, f.name), getattr(w, f.name))


_floats = st.one_of(
    st.none(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1.0, 0.5, 1e308, 5e-324, float("nan"), 3.0]),
)
_ints = st.one_of(st.none(), st.integers(-(2**70), 2**70), st.integers(-3, 300))
_strings = st.one_of(st.none(), st.sampled_from(["completed", "truncated", "7", "", "défault"]), st.text(max_size=5))
_bools = st.booleans()


def _value(annotation: str) -> st.SearchStrategy[Any]:
    if annotation.startswith("bool"):
        return _bools
    if annotation.startswith("int"):
        return _ints if "None" in annotation else st.integers(-(2**70), 2**70)
    if annotation.startswith("float"):
        return _floats if "None" in annotation else st.floats(allow_nan=True)
    return _strings


def _rows(row_type: type[Any]) -> st.SearchStrategy[list[Any]]:
    row = st.builds(row_type, *(_value(str(f.type)) for f in fields(row_type)))
    # Constant columns are a case of their own: repeat one row now and then.
    return st.one_of(st.lists(row, max_size=40), row.flatmap(lambda r: st.lists(st.just(r), min_size=1, max_size=9)))


@settings(max_examples=300, deadline=None)
@given(_rows(SampleRow))
def test_sample_rows_round_trip_exactly(rows: list[SampleRow]) -> None:
    table = ColumnRows.build(SampleRow, rows)
    again = ColumnRows.from_bytes(SampleRow, table.to_bytes())
    _same_rows(list(table), rows)
    _same_rows(list(again), rows)


@settings(max_examples=100, deadline=None)
@given(_rows(GroupRow))
def test_group_rows_round_trip_exactly(rows: list[GroupRow]) -> None:
    again = ColumnRows.from_bytes(GroupRow, ColumnRows.build(GroupRow, rows).to_bytes())
    _same_rows(list(again), rows)


def test_a_constant_keeps_its_type() -> None:
    """1, 1.0 and True are equal in Python; a column of each must come back as itself."""
    base = ColumnRows.build(SampleRow, [_row()] * 3)[0]
    for value in (1, 1.0, True):
        rows = [replace(base, reward=value)] * 3  # type: ignore[arg-type]
        again = ColumnRows.from_bytes(SampleRow, ColumnRows.build(SampleRow, rows).to_bytes())
        assert type(again[0].reward) is type(value)


def _row(**values: Any) -> SampleRow:
    base: dict[str, Any] = {f.name: None for f in fields(SampleRow)}
    base.update(sample_index=0, remove_sample=False, response_length=4, total_length=9, mixed_version=False,
                turns=1, truncated=False, alignment_failed=False)  # fmt: skip
    base.update(values)
    return SampleRow(**base)


def _demo_summary(demo_run: Path) -> StepSummary:
    return Run(demo_run, use_cache=False).summary(1, False, time.time())


def test_a_real_summary_round_trips(demo_run: Path) -> None:
    summary = _demo_summary(demo_run)
    again = decode_summary(encode_summary(summary))
    assert again == summary
    _same_rows(list(again.rows), list(summary.rows))
    _same_rows(list(again.groups), list(summary.groups))
    assert again.aggregate == summary.aggregate and again.problems == summary.problems


def test_an_entry_takes_well_under_half_the_rows_json(
    demo_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The JSON cache took 311 B per sample row; a whole entry now takes well under half the rows' JSON."""
    monkeypatch.setenv("MILES_TUI_CACHE_DIR", str(tmp_path / "cache"))
    run = Run(demo_run)
    summary = run.summary(1, False, time.time())
    rows_json = len(json.dumps([list(r.to_dict().values()) for r in summary.rows], separators=(",", ":")))
    entry = summary_path(run.path, run.files(1, False, time.time())).stat().st_size
    assert entry < 0.45 * rows_json


def test_served_from_the_cache_and_missed_when_files_change(
    demo_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MILES_TUI_CACHE_DIR", str(tmp_path / "cache"))
    run = Run(demo_run)
    files = run.files(1, False, time.time())
    summary = run.summary(1, False, time.time())
    assert summary_path(run.path, files).exists()
    cached = load_summary(run.path, files)
    assert cached == summary and isinstance(cached.rows, ColumnRows)
    assert cached.signature is files.signature, "a summary kept for every step holds its own copy of the signature"
    changed = replace(files, rollout=replace(files.rollout, size=files.rollout.size + 1))
    assert load_summary(run.path, changed) is None


@pytest.mark.parametrize("damage", [b"", b"MTZ\x04", b"garbage" * 9, "truncate", "flip", "bomb"])
def test_a_damaged_entry_is_a_miss_not_an_error(
    demo_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: Any
) -> None:
    monkeypatch.setenv("MILES_TUI_CACHE_DIR", str(tmp_path / "cache"))
    run = Run(demo_run)
    files = run.files(1, False, time.time())
    store_summary(run.path, files, _demo_summary(demo_run))
    path = summary_path(run.path, files)
    data = path.read_bytes()
    raw = zlib.decompress(data[4:])
    if damage == "truncate":
        path.write_bytes(data[: len(data) - 7])
    elif damage == "flip":  # a row count that the payload cannot hold
        path.write_bytes(data[:4] + zlib.compress(raw.replace(b'{"n":', b'{"n":9', 1)))
    elif damage == "bomb":  # inflates past any summary
        path.write_bytes(data[:4] + zlib.compress(raw + bytes(MAX_ENCODED)))
    else:
        path.write_bytes(damage)
    assert load_summary(run.path, files) is None


def test_an_incomplete_summary_is_not_stored(demo_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MILES_TUI_CACHE_DIR", str(tmp_path / "cache"))
    run = Run(demo_run, use_cache=False)
    files = run.files(1, False, time.time())
    store_summary(run.path, files, replace(_demo_summary(demo_run), complete=False))
    assert not summary_path(run.path, files).exists()
